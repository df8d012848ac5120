// One session's detector state: every detector of SPEC §1 in one plain object. The calls
// return a bitmask of fired signals (bit i = the i-th signal of the §1 table); alert texts are
// built in Python, only when a bit is set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "canonical.h"
#include "detectors.h"
#include "digest_lru.h"
#include "stats.h"

namespace tw {

enum SignalBit : uint32_t {
    kRepeat = 1u << 0,
    kCycle = 1u << 1,
    kDensity = 1u << 2,
    kName = 1u << 3,
    kFailure = 1u << 4,
    kNoOp = 1u << 5,
    kNoNewState = 1u << 6,
    kSilence = 1u << 7,
};

// Resolved and clamped by tripwire.signals.WatchdogConfig.engine_settings().
struct Settings {
    uint32_t enabled;
    uint32_t repeat_threshold;
    uint32_t cycle_max_period;
    uint32_t cycle_cycles;
    uint32_t density_window;
    uint32_t density_threshold;
    int32_t density_defer_run;
    int32_t density_defer_cycle_period;
    uint32_t name_threshold;
    uint32_t failure_threshold;
    uint32_t no_op_threshold;
    uint32_t no_new_state_threshold;
    uint32_t silence_threshold;
    uint32_t digest_memory;
};

class Session {
public:
    explicit Session(const Settings& s);

    // name_hash: any 64-bit hash of the tool name (the name-run detector compares names by it)
    uint32_t observe_call(const CanonicalCall& c, uint64_t name_hash);
    uint32_t observe_result(bool failed, bool no_op, bool exempt, const void* payload,
                            size_t payload_len, bool has_payload);
    void observe_text(bool has_words) noexcept { silence.observe_text(has_words); }
    void turn_boundary() noexcept;  // SPEC §10.5: the turn-scoped memory
    void reset() noexcept;          // SPEC §10.8: every detector, the seen-set included

    // Bytes this session holds: the object itself plus its fixed-size rings.
    size_t state_bytes() const noexcept;

    // Statistics mode (`tripwire corpus stats`): off (null) unless enabled; then updated
    // after every call and result, from the detectors' state.
    void enable_stats() { if (!stats) stats.reset(new SessionStats()); }
    std::unique_ptr<SessionStats> stats;

    const Settings settings;
    CallHistory history;
    RepeatDetector repeat;
    CycleDetector cycle;
    DensityDetector density;
    NameRunDetector name;
    SilenceDetector silence;
    StreakDetector failures;
    StreakDetector no_ops;
    StreakDetector stale;
    DigestLRU digests;

private:
    uint32_t result_mask(bool failed, bool no_op, bool exempt, const void* payload,
                         size_t payload_len, bool has_payload);
};

}  // namespace tw
