// One session's detector state: every detector of SPEC §1 in one plain object (fused for
// speed: one allocation, one cache-friendly block). The calls return a bitmask of fired
// signals; alert texts are built in Python, only when a bit is set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "answer.h"
#include "canonical.h"
#include "detectors.h"
#include "digest_lru.h"
#include "stats.h"

namespace tw {

// Bit i = tripwire.signals.SIGNALS[i] (the Python catalogue's order, written there once);
// tests/test_parity.py checks kSignalBits against it.
enum SignalBit : uint32_t {
    kRepeat = 1u << 0,
    kCycle = 1u << 1,
    kDensity = 1u << 2,
    kName = 1u << 3,
    kFailure = 1u << 4,
    kNoOp = 1u << 5,
    kNoNewState = 1u << 6,
    kSilence = 1u << 7,
    kRepeatedFailure = 1u << 8,
    kRecycled = 1u << 9,
    kUnknownTool = 1u << 10,
    kRepeatedText = 1u << 11,
    kEmptyResponses = 1u << 12,
    kCompactionStorm = 1u << 13,
    kPersistentWarnings = 1u << 14,
    kLoopingText = 1u << 15,
};

struct SignalBitName {
    const char* id;
    uint32_t bit;
};
inline constexpr SignalBitName kSignalBits[] = {
    {"repeated-tool-call", kRepeat},     {"alternating-tool-cycle", kCycle},
    {"dominant-tool-call", kDensity},    {"repeated-tool-name", kName},
    {"tool-failure-streak", kFailure},   {"no-op-streak", kNoOp},
    {"no-new-state", kNoNewState},       {"tools-without-text", kSilence},
    {"repeated-failure", kRepeatedFailure}, {"recycled-calls", kRecycled},
    {"unknown-tool", kUnknownTool},      {"repeated-text", kRepeatedText},
    {"empty-responses", kEmptyResponses}, {"compaction-storm", kCompactionStorm},
    {"persistent-warnings", kPersistentWarnings}, {"looping-text", kLoopingText},
};
inline constexpr size_t kSignalCount = sizeof(kSignalBits) / sizeof(kSignalBits[0]);

// tripwire._common.EngineSettings, resolved by each signal module's resolve(); the parity
// test checks the fields the bindings declare and this struct's size.
struct Settings {
    uint32_t enabled;
    uint32_t repeat_threshold;
    uint32_t poll_plateau;  // SPEC §12.2
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
    uint32_t repeated_failure_threshold;
    uint32_t answer_volatile;  // SPEC §12.1: the AnswerClass bits an answer replaces
    uint32_t recycled_threshold;
    uint32_t recycled_window;
    uint32_t unknown_tool_threshold;  // SPEC §12.4
    uint32_t repeated_text_threshold;
    uint32_t empty_responses_threshold;
    uint32_t compaction_per_turn;
    uint32_t compaction_in_a_row;
    uint32_t persistent_warnings_threshold;  // issue 39
    uint32_t warn_signals;  // the bits alerting as warn under the config
    uint32_t looping_text_threshold;  // issue 39: laps at a message's end
    uint32_t looping_text_max_period;  // the longest lap, in bytes
};

// A per-tool rule (issue 39; tripwire.signals.tool_rules.ToolRule, resolved there: the one
// place its precedence is decided): what one tool's calls and results are judged by. Null
// for a tool without one (the common case: one pointer test).
struct ToolRule {
    uint32_t off;  // SignalBit bits that never alert for this tool
    uint32_t repeat_threshold;  // kRuleOff when off
    uint32_t name_threshold;
    uint32_t repeated_failure_threshold;
};
// A threshold no run reaches: the signal is off for the tool (tool_rules.OFF).
inline constexpr uint32_t kRuleOff = 0xFFFFFFFFu;
// The call ring's flags for the ring-reading signals a rule turns off (its `off` bits).
inline uint8_t call_flags(uint32_t off) noexcept {
    return static_cast<uint8_t>(((off & kCycle) ? kCycleOff : 0) |
                                ((off & kDensity) ? kDensityOff : 0) |
                                ((off & kSilence) ? kSilenceOff : 0));
}

class Session {
public:
    // A session whose rings (the call ring, the digests) allocate their own storage.
    explicit Session(const Settings& s) : Session(s, nullptr) {}

    // The session and its rings in one block, the rings right after the object: a call on a
    // session cold in cache then fetches neighbouring lines, none found through a pointer
    // read first. Freed by destroy().
    static Session* create(const Settings& s);
    static void destroy(Session* session) noexcept;

    // name_hash: any 64-bit hash of the tool name (the repeat run's tool, matched by results);
    // identity: what the name-run detector compares (the name's hash, or for a shell tool the
    // hash of tool:program, SPEC §11.2)
    // rule: the tool's per-tool rule (null: none)
    uint32_t observe_call(const CanonicalCall& c, uint64_t name_hash, uint64_t identity,
                          const ToolRule* rule = nullptr);
    // Where the next call writes its key and join flag in the call ring (a caller notes them
    // after a call, to fetch them early on the next one; addresses only).
    const void* next_key() const noexcept { return history.next_key(); }
    const void* next_flags() const noexcept { return history.next_flags(); }
    // Starts fetching the call-path detectors' state (the first lines of this object), so
    // that a caller holding the session's address overlaps those memory accesses with its
    // own work (canonicalizing the call) when the session is cold in cache (up to the pending
    // calls recycled-calls reads, the last state a call writes). Changes nothing,
    // and branches on nothing it loads: a mispredicted branch on a line still in flight would
    // throw away the work done past it. (The call ring's recent keys are not fetched: their
    // address depends on this object's first line, and measured, fetching them gained nothing.)
    void prefetch_call_path() const noexcept {
        const char* at = reinterpret_cast<const char*>(this);
        const char* end = reinterpret_cast<const char*>(&pending + 1);
        for (; at < end; at += 64) __builtin_prefetch(at);
    }
    // name_hash: the result's tool, hashed as observe_call's (the repeat run's results are
    // its tool's); rule: the tool's per-tool rule (null: none): the signals it turns off
    // skip the result (no-new-state, repeated-failure, recycled-calls: exempt_tools is the
    // three; its payload still reaches the repeat run), its repeated-failure threshold;
    // error: a failure's error text (repeated-failure's signature);
    // keys: the tool's [results] ignore_json_keys (null: none); unknown: the result answers a
    // call of a tool the host does not have (SPEC §12.4). Every reader compares the
    // payload's answer (SPEC §12.1), computed here at most once.
    uint32_t observe_result(uint64_t name_hash, bool failed, bool no_op,
                            const ToolRule* rule, const void* payload, size_t payload_len,
                            bool has_payload,
                            const char* error = nullptr, size_t error_len = 0,
                            const AnswerKeys* keys = nullptr, bool unknown = false);
    // The agent's words; key: their text_key, text: their UTF-8 bytes (both read only when
    // has_words; looping-text reads the bytes).
    uint32_t observe_text(bool has_words, uint64_t key = 0, const char* text = nullptr,
                          size_t len = 0) noexcept;
    uint32_t observe_response(bool produced = false) noexcept;    // one model response (a usage event)
    uint32_t observe_compaction() noexcept;  // the history was compacted
    void end_turn() noexcept;       // the turn ends (compaction-storm reads how); then the boundary
    void turn_boundary() noexcept;  // SPEC §10.5: the turn-scoped memory
    void reset() noexcept;          // SPEC §10.8: every detector, the seen-set included
    // The last `calls` calls were refused by the host's gate and the turn ended: they come off
    // the call ring, the repeat run, the name run and the run without text (issue 15 §7).
    void retract_calls(uint32_t calls) noexcept;

    // Bytes this session holds: the object itself plus its rings (those parts of them allocated
    // on demand while they are).
    size_t state_bytes() const noexcept;

    // Statistics mode (`tripwire corpus stats`): off (null) unless enabled; then updated
    // after every call and result, from the detectors' state.
    void enable_stats() { if (!stats) stats.reset(new SessionStats()); }

    // First, in the object's first lines: what observe_call reads and writes (a call on a
    // session cold in cache fetches each line it touches; the result detectors and the
    // settings come after).
    // (The settings read after construction, the rest being the detectors' own, sit in the
    // four bytes a 4-byte-aligned member leaves before an 8-byte-aligned one: the object is
    // then 640 bytes, ten cache lines, not eleven.)
    const uint32_t enabled;  // settings.enabled: the signals that alert
    const uint32_t answer_volatile;  // SPEC §12.1: the AnswerClass bits an answer replaces
    std::unique_ptr<SessionStats> stats;
    CallHistory history;
    NameRunDetector name;
    SilenceDetector silence;
    const uint32_t poll_plateau;  // SPEC §12.2
    RepeatDetector repeat;
    CycleDetector cycle;
    // Calls since the last result, model response or turn boundary: the calls of the model
    // response in flight, which a transport retry replaces (issue 39; in the 4 bytes the
    // 16-byte cycle detector leaves before the density detector).
    uint32_t attempt_calls = 0;
    DensityDetector density;
    PendingCalls pending;  // recycled-calls' calls without a result: the call writes one slot
    FailureStreakDetector failures;
    StreakDetector no_ops;
    StreakDetector stale;
    const uint32_t cycle_max_period;  // recycled-calls' stand-down, statistics
    DigestLRU digests;
    RepeatedFailureDetector repeated_failure;
    RecycledCallsDetector recycled;
    UnknownToolDetector unknown_tool;
    const uint32_t density_window;  // statistics
    RepeatedTextDetector text;
    EmptyResponsesDetector empty;
    CompactionStormDetector storm;
    const uint32_t warn_signals;  // persistent-warnings counts these bits' alerts
    PersistentWarningsDetector persistent;
    LoopingTextDetector looping;  // read once per message: past every hot line

private:
    // storage: block_bytes(s) bytes (64-aligned) for the rings, or null
    Session(const Settings& s, void* storage);
    static size_t head_bytes() noexcept { return (sizeof(Session) + 63) & ~size_t{63}; }
    static uint32_t ring_capacity(const Settings& s) noexcept;
    static size_t history_bytes(const Settings& s) noexcept;  // rounded up to 16
    static size_t block_bytes(const Settings& s) noexcept;

    uint32_t result_mask(uint64_t name_hash, bool failed, bool no_op, const ToolRule* rule,
                         const void* payload, size_t payload_len, bool has_payload,
                         const char* error, size_t error_len, const AnswerKeys* keys,
                         bool unknown);
    uint32_t after_event(uint32_t mask) noexcept;
    // an event that raised warn alerts (or, persisted, continued a warned run by another
    // threshold): persistent-warnings counts them
    uint32_t warned(uint32_t mask, uint32_t persisted = 0) noexcept;
};

}  // namespace tw
