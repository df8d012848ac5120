// empty-responses (SPEC §12.4). Reference: tripwire/signals/empty_responses.py.
#pragma once

#include <cstddef>
#include <cstdint>

#include "streak.h"

namespace tw {

// Empty gaps between consecutive model responses, in a row: a gap is empty when no words came
// and the silence run (tools-without-text's calls since words) did not move, so the call path
// pays nothing for it.
struct EmptyResponsesDetector : StreakDetector {
    bool primed = false;  // a response has been seen (the gap after it is open)
    bool spoke = false;   // words since that response
    uint32_t mark = 0;    // the silence run at that response

    explicit EmptyResponsesDetector(uint32_t threshold_) : StreakDetector(threshold_) {}
    void observe_text(bool has_words) noexcept { if (has_words) spoke = true; }
    // produced: the response's usage reported output tokens (thinking, a call, a thought
    // signature the recording may not keep): an answer, as words or a call are.
    bool observe_response(uint32_t silent_calls, bool produced = false) noexcept {
        const bool empty = primed && !spoke && silent_calls == mark && !produced;
        primed = true;
        spoke = false;
        mark = silent_calls;
        if (empty) return extend();
        StreakDetector::reset();
        return false;
    }
    void reset() noexcept {
        StreakDetector::reset();
        primed = spoke = false;
        mark = 0;
    }
};

}  // namespace tw
