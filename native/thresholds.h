// The threshold predicates batch ingest checks without the GIL (SPEC §4, §6). Their Python twins
// are tripwire/thresholds.py (the cost ceiling, the context guard and the reference batch use
// those); tests/test_thresholds.py drives both with the same numbers. (Not "limits.h": that
// name is the C standard header's.)
#pragma once

#include <cstdint>

namespace tw {

// A charge that brings the spend to `spent` (nano-dollars) trips a bound: the per-turn bound
// (only once a turn has started: has_baseline) or the per-session ceiling; 0 disables a bound,
// and reaching it trips (>=).
inline bool cost_trips(int64_t spent, bool has_baseline, int64_t baseline, int64_t max_turn,
                       int64_t ceiling) noexcept {
    return (max_turn && has_baseline && spent - baseline >= max_turn) ||
           (ceiling && spent >= ceiling);
}

// `tokens` reaches a context limit the guard has not reported yet: the compaction threshold
// (unless compaction is already pending) or the hard cut (unless this turn was already cut).
inline bool context_crosses(int64_t tokens, int64_t compact_at, bool pending,
                            int64_t cut_tokens, bool cut) noexcept {
    return (tokens >= compact_at && !pending) || (tokens >= cut_tokens && !cut);
}

}  // namespace tw
