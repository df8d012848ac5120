// repeated-text (SPEC §12.4). Reference: tripwire/signals/repeated_text.py.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tw {

// XXH3-64 of the text's bytes with each run of ASCII whitespace one space, the ends trimmed
// (repeated_text.text_key: Python's bytes.split() and join).
uint64_t text_key(const char* text, size_t len);

// The agent's messages in a row with one key; one alert per run. It stands down while the
// calls between its messages (two or more) are one repeat run (the repeat detector's loop);
// a run it stood down on counts as reported.
struct RepeatedTextDetector {
    uint32_t threshold;
    uint32_t run = 0;
    bool tripped = false;
    uint32_t calls = 0;  // calls between the run's first message and its last
    uint64_t key = 0;

    explicit RepeatedTextDetector(uint32_t threshold_) : threshold(threshold_) {}
    // silent_calls: calls since the last words; repeat_run: the repeat detector's (0: off)
    bool observe(uint64_t k, uint32_t silent_calls, uint32_t repeat_run) noexcept {
        if (run && k == key) {
            ++run;
            calls += silent_calls;
        } else {
            key = k;
            run = 1;
            tripped = false;
            calls = 0;
        }
        if (run < threshold || tripped) return false;
        tripped = true;  // stood down or not: reported
        return !(calls >= 2 && repeat_run >= calls);
    }
    void reset() noexcept { run = 0; tripped = false; calls = 0; key = 0; }
};

}  // namespace tw
