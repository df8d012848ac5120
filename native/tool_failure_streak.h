// tool-failure-streak (SPEC §1), standing down for repeated-failure (SPEC §12.3): results in a
// row that failed, no success between; while the last `threshold` failures of the streak are
// one tool with one error signature, that is repeated-failure's run (one behaviour, one
// alert), and a streak it stood down on counts as reported. Reference:
// tripwire/signals/tool_failure_streak.py FailureStreakDetector.
#pragma once

#include <cstddef>
#include <cstdint>

#include "streak.h"

namespace tw {

struct FailureStreakDetector : StreakDetector {
    // The last failure's (tool, signature) as repeated-failure keys it, its low 32 bits (both
    // engines: tool_failure_streak.pair_tag; a collision between two pairs of one streak is
    // ~2^-32), so the detector is 20 bytes.
    uint32_t pair = 0;
    uint32_t same = 0;  // failures in a row, at the streak's end, with that pair

    explicit FailureStreakDetector(uint32_t threshold_) : StreakDetector(threshold_) {}
    // One failure. `signed_pair`: repeated-failure counts it (enabled, the tool not exempt),
    // under `pair_key` (RepeatedFailureDetector::pair_key). True when the streak alerts.
    bool fail(uint64_t pair_key, bool signed_pair) noexcept {
        const uint32_t tag = static_cast<uint32_t>(pair_key);
        same = signed_pair ? (same > 0 && tag == pair ? same + 1 : 1) : 0;
        pair = tag;
        if (!extend()) return false;
        return !(signed_pair && same >= threshold);  // stood down: counts as reported
    }
    void reset() noexcept {
        StreakDetector::reset();
        same = 0;
    }
};

}  // namespace tw
