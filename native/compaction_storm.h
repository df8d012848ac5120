// compaction-storm (SPEC §12.4). Reference: tripwire/signals/compaction_storm.py.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tw {

// Compactions per turn and since the last turn that ended in agent text, with no new answer
// between them; one alert until such a turn or a new answer.
struct CompactionStormDetector {
    uint32_t per_turn;
    uint32_t in_a_row;
    uint32_t turn = 0;
    uint32_t run = 0;
    bool tripped = false;
    bool spoke = false;  // words in this turn

    CompactionStormDetector(uint32_t per_turn_, uint32_t in_a_row_)
        : per_turn(per_turn_), in_a_row(in_a_row_) {}
    bool observe() noexcept {
        ++turn;
        ++run;
        if ((turn >= per_turn || run >= in_a_row) && !tripped) { tripped = true; return true; }
        return false;
    }
    // A result brought an answer the turn had not seen: the compactions made room for work.
    void new_answer() noexcept { turn = run = 0; tripped = false; }
    void observe_text(bool has_words) noexcept { if (has_words) spoke = true; }
    // The turn ends in agent text when it spoke and made no call since (silence run 0).
    void end_turn(uint32_t silent_calls) noexcept {
        if (spoke && silent_calls == 0) { run = 0; tripped = false; }
    }
    void turn_boundary() noexcept { turn = 0; spoke = false; }
    void reset() noexcept { turn = run = 0; tripped = spoke = false; }
};

}  // namespace tw
