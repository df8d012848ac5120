// alternating-tool-cycle (SPEC §1, §10.3). Reference: tripwire/signals/alternating_tool_cycle.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include "call_history.h"

namespace tw {

// alternating-tool-cycle: the last p*cycles calls are `cycles` laps of a p-call block, and
// none of its repeated laps brought a new answer.
struct CycleDetector {
    static constexpr uint32_t kMaxPeriod = 16;
    // XXH3 of the reported pattern's smallest rotation (a collision among the few patterns
    // of one session is as negligible as one among its canonical keys).
    uint64_t fingerprint = 0;
    // Calls since a result last brought a new answer (not in the turn's seen-set); UINT32_MAX:
    // none ever did. A cycle trips only when its repeated laps brought none (issue 39).
    uint32_t quiet = UINT32_MAX;
    // One byte each (max_period <= 16, cycles <= 32): the detector stays in 16 bytes.
    uint8_t max_period;
    uint8_t cycles;
    uint8_t period = 0;
    bool armed = true;

    CycleDetector(uint32_t max_period_, uint32_t cycles_)
        : max_period(static_cast<uint8_t>(max_period_)), cycles(static_cast<uint8_t>(cycles_)) {}
    // One more call (counted whether the signal is on or not: statistics read it).
    void called() noexcept { if (quiet != UINT32_MAX) ++quiet; }
    void new_answer() noexcept { quiet = 0; }
    // The last `calls` calls are taken back, and their calls since a new answer with them.
    void retract(uint32_t calls) noexcept {
        if (quiet != UINT32_MAX) quiet = quiet > calls ? quiet - calls : 0;
    }
    bool observe(const CallHistory& h) noexcept;
    void reset() noexcept { armed = true; period = 0; quiet = UINT32_MAX; }
};

}  // namespace tw
