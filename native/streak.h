// tool-failure-streak, no-op-streak and no-new-state count streaks with this one struct.
// Reference: tripwire/signals/_spec.py StreakDetector.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tw {

// A run of results with one property, one alert per run (failures, no-ops, stale payloads).
struct StreakDetector {
    uint32_t threshold;
    uint32_t run = 0;
    bool tripped = false;

    explicit StreakDetector(uint32_t threshold_) : threshold(threshold_) {}
    bool extend() noexcept {
        ++run;
        if (run >= threshold && !tripped) { tripped = true; return true; }
        return false;
    }
    void reset() noexcept { run = 0; tripped = false; }
};

}  // namespace tw
