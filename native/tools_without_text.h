// tools-without-text (SPEC §1, §10.11). Reference: tripwire/signals/tools_without_text.py.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tw {

// tools-without-text.
struct SilenceDetector {
    uint32_t threshold;
    uint32_t run = 0;
    bool reported = false;

    explicit SilenceDetector(uint32_t threshold_) : threshold(threshold_) {}
    bool observe_call() noexcept {
        ++run;
        if (run >= threshold && !reported) { reported = true; return true; }
        return false;
    }
    void observe_text(bool has_words) noexcept { if (has_words) reset(); }
    void reset() noexcept { run = 0; reported = false; }
};

}  // namespace tw
