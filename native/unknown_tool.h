// unknown-tool (SPEC §12.4). Reference: tripwire/signals/unknown_tool.py.
#pragma once

#include <cstddef>
#include <cstdint>

#include "streak.h"

namespace tw {

// The failure streak's pair tag for a failure unknown-tool counts (unknown_tool.UNKNOWN_PAIR):
// all such failures are one behaviour, whatever the tool.
inline constexpr uint64_t kUnknownPair = 0x554E4B4Eu;

// Results in a row that answer a call of a missing tool; a turn boundary ends the run.
struct UnknownToolDetector : StreakDetector {
    explicit UnknownToolDetector(uint32_t threshold_) : StreakDetector(threshold_) {}
    bool observe(bool unknown) noexcept {
        if (unknown) return extend();
        if (run) reset();
        return false;
    }
};

}  // namespace tw
