// tools-without-text (SPEC §1, §10.11). Reference: tripwire/signals/tools_without_text.py.
#pragma once

#include <cstddef>
#include <cstdint>

#include "streak.h"

namespace tw {

// tools-without-text: a streak of calls that the agent's words end.
struct SilenceDetector : StreakDetector {
    explicit SilenceDetector(uint32_t threshold_) : StreakDetector(threshold_) {}
    bool observe_call() noexcept { return extend(); }
    void observe_text(bool has_words) noexcept { if (has_words) reset(); }
    void retract(uint32_t calls) noexcept { if (run > calls) run -= calls; else reset(); }
};

}  // namespace tw
