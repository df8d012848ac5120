// alternating-tool-cycle (SPEC §1, §10.3). Reference: tripwire/signals/alternating_tool_cycle.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include "call_history.h"

namespace tw {

// alternating-tool-cycle: the last p*cycles calls are `cycles` laps of a p-call block.
struct CycleDetector {
    static constexpr uint32_t kMaxPeriod = 16;
    uint32_t max_period;
    uint32_t cycles;
    // XXH3 of the reported pattern's smallest rotation (a collision among the few patterns
    // of one session is as negligible as one among its canonical keys).
    uint64_t fingerprint = 0;
    bool armed = true;
    uint32_t period = 0;

    CycleDetector(uint32_t max_period_, uint32_t cycles_) : max_period(max_period_), cycles(cycles_) {}
    bool observe(const CallHistory& h) noexcept;
    void reset() noexcept { armed = true; period = 0; }
};

}  // namespace tw
