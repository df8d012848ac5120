// Statistics mode of a session (issue 11, `tripwire corpus stats`): for every signal, the
// largest value the session reached of the quantity that signal's threshold is compared with.
// Fed from the Session's own detector state after each call and result, so it measures exactly
// what the detectors count; it never changes what they fire. Stand-downs and one-alert-per-
// pattern are not applied here (they decide *whether* an alert is raised, not how far the
// pattern went): the first event at which a signal really trips is the engine's alert.
#pragma once

#include <cstdint>

#include "detectors.h"

namespace tw {

class Session;

struct SessionStats {
    static constexpr uint32_t kSignals = 16;
    // peak[i]: the i-th signal of the SPEC §1 table (bit i of the fired mask):
    // longest equivalent-args run, most complete laps of any 2..max_period block (0 when no
    // block repeated), highest count of one canonical call in any window, longest same-name
    // run, longest failure / no-op / already-seen-payload run, longest call run without text,
    // most failures of one (tool, error signature) with no productive success between,
    // longest run of results answering a recycled call with its earlier answer, longest run
    // of unknown-tool results, of identical agent messages, of empty responses, most
    // compactions since a turn ended in agent text, most warn alerts with no new answer between,
    // most laps a message ended in.
    uint32_t peak[kSignals] = {};

    void after_call(const Session& s) noexcept;
    void after_result(const Session& s) noexcept;
    void after_event(const Session& s) noexcept;  // a text, a response, a compaction
    void after_reset() noexcept;

private:
    // matches[p]: how many calls in a row equalled (canonical key) the call p before them
    uint32_t matches_[CycleDetector::kMaxPeriod + 1] = {};
};

}  // namespace tw
