// repeated-tool-call (SPEC §1, §2.3), unless the run is polling something that changes
// (SPEC §10.24, §12.2: results compare by their answer; a poll whose answer has not changed
// for poll_plateau results trips). Reference: tripwire/signals/repeated_tool_call.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include "canonical.h"
#include "hash.h"

namespace tw {

// What the results of the current run's calls have shown, in arrival order: the values of
// tripwire.signals.repeated_tool_call.Poll. Only kPollChanging exempts the run; the last four
// are the ways an exemption that held can end, which the alert's texts name.
enum Poll : uint8_t {
    kPollAwaiting = 0,    // no result of the run's tool yet
    kPollOnePayload = 1,  // one successful payload: nothing to compare it with yet
    kPollChanging = 2,    // a poll: every result a success with a payload, its answer changed
                          // at least once and the same for fewer than poll_plateau results
    kPollEnded = 3,       // ended before the run ever observed change: an ordinary repeat
    kPollStoppedChanging = 4,  // the same answer for poll_plateau results in a row
    kPollFailed = 5,
    kPollNoOp = 6,
    kPollNoPayload = 7,
};

// repeated-tool-call: run-consistent repeats (SPEC §2.3 Decision).
struct RepeatDetector {
    uint32_t threshold;
    bool enabled;
    bool tripped = false;
    bool is_object = false;
    uint8_t poll = kPollAwaiting;
    uint32_t run = 0;
    uint32_t plateau = 0;  // results of the run in a row carrying its last answer (`last`)
    uint64_t rest = 0;
    uint64_t name = 0;  // the run's tool (its name hash): whose results are the run's
    // The longest spelling seen in the run for each top-level path key, concatenated;
    // ends[i] (i < paths) is where slot i ends (an array of its own, not a vector: 8 bytes
    // a session less).
    std::string longest;
    std::unique_ptr<uint32_t[]> ends;
    uint32_t paths = 0;           // the slots the run holds
    uint32_t ends_capacity = 0;   // ends' length
    Hash128 last{};     // the run's previous answer (results only: after the above)

    RepeatDetector(uint32_t threshold_, bool enabled_) : threshold(threshold_), enabled(enabled_) {}
    // Returns whether the call joined the current run; sets `fired` when the run reaches
    // `at` (the call's tool's threshold: a per-tool rule's, else `threshold`).
    bool observe(const CanonicalCall& c, uint64_t name_hash, bool& fired, uint32_t at);
    bool observe(const CanonicalCall& c, uint64_t name_hash, bool& fired) {
        return observe(c, name_hash, fired, threshold);
    }
    // Whether a result of tool `name_hash` arriving now is the current run's and can still
    // change its exemption (then the session digests its payload, exempt tool or not). A
    // result carries a tool, not the call it answers: a late result of a call before the
    // run, of the same tool, counts for it too.
    bool awaits(uint64_t name_hash) const noexcept {
        return run > 0 && name_hash == name && poll < kPollEnded;
    }
    // A result `awaits` said is the run's; `answer` null when it has no payload or the empty
    // answer (SPEC §12.1); `poll_plateau`: the setting (SPEC §12.2; not kept here, so the
    // detector stays in its 104 bytes).
    void observe_result(bool failed, bool no_op, const Hash128* answer,
                        uint32_t poll_plateau) noexcept;
    // The last `calls` calls are taken back: the run loses them; a run made only of them is
    // forgotten (reference: RepeatDetector.retract).
    void retract(uint32_t calls) noexcept {
        if (run > calls) run -= calls; else reset();
    }
    void reset() noexcept {
        run = 0;
        rest = 0;
        name = 0;
        is_object = false;
        tripped = false;
        poll = kPollAwaiting;
        plateau = 0;
        paths = 0;
    }
    size_t ends_bytes() const noexcept { return ends_capacity * sizeof(uint32_t); }

private:
    // Room for n slots' ends (the slots held are dropped).
    void reserve_ends(size_t n) {
        paths = 0;
        if (n > ends_capacity) {
            ends.reset(new uint32_t[n]);
            ends_capacity = static_cast<uint32_t>(n);
        }
    }
    std::string_view slot(size_t i) const noexcept {
        const uint32_t begin = i ? ends[i - 1] : 0;
        return std::string_view(longest.data() + begin, ends[i] - begin);
    }
    void start_run(const CanonicalCall& c, uint64_t name_hash);
};

}  // namespace tw
