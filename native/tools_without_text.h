// tools-without-text (SPEC §1, §10.11). Reference: tripwire/signals/tools_without_text.py.
#pragma once

#include <cstddef>
#include <cstdint>

#include "streak.h"

namespace tw {

// tools-without-text: a streak of calls that the agent's words end. `run` is every call since
// the last words (repeated-text, empty-responses and compaction-storm read it); the streak
// leaves out the calls of tools whose per-tool rule turns the signal off (issue 39).
struct SilenceDetector : StreakDetector {
    uint32_t exempt = 0;  // calls among `run` that the streak does not count

    explicit SilenceDetector(uint32_t threshold_) : StreakDetector(threshold_) {}
    uint32_t streak() const noexcept { return run - exempt; }
    // counted: false for a call of a tool whose rule turns the signal off
    bool observe_call(bool counted = true) noexcept {
        ++run;
        if (!counted) { ++exempt; return false; }
        if (run - exempt >= threshold && !tripped) { tripped = true; return true; }
        return false;
    }
    void observe_text(bool has_words) noexcept { if (has_words) reset(); }
    // The last `calls` calls are taken back, `exempt_calls` of them uncounted ones.
    void retract(uint32_t calls, uint32_t exempt_calls) noexcept {
        if (run <= calls) { reset(); return; }
        run -= calls;
        exempt = exempt > exempt_calls ? exempt - exempt_calls : 0;
        if (exempt > run) exempt = run;
    }
    void reset() noexcept { StreakDetector::reset(); exempt = 0; }
};

}  // namespace tw
