// looping-text (issue 39): one agent message that ends in the same stretch of text repeated
// lap after lap (a model chanting until its output limit). Reference:
// tripwire/signals/looping_text.py (tail_laps, LoopingTextDetector).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tw {

// How a message ends: `laps` copies of its last `period` bytes in a row (1 and 0: no repeat).
struct TextLaps {
    uint32_t laps = 0;
    uint32_t period = 0;
};

// The shortest lap the tail is searched for: its last kLapChunk bytes must recur.
inline constexpr uint32_t kLapChunk = 16;
// A lap must hold this many letter bytes (ASCII letters, or any byte of a non-ASCII
// character): a line of dashes or a table's rule is not a chant.
inline constexpr uint32_t kLapLetters = 8;

// The candidate periods are the distances (kLapChunk..max_period) at which the message's last
// kLapChunk bytes occur again, nearest first; each counts the copies of the last `period`
// bytes at the end. The first to reach `threshold` laps is the answer; else the most laps.
TextLaps tail_laps(const char* text, size_t len, uint32_t max_period,
                   uint32_t threshold) noexcept;

struct LoopingTextDetector {
    uint32_t threshold;
    uint32_t max_period;
    TextLaps last;  // the last message's (the alert's texts and the statistics read it)

    LoopingTextDetector(uint32_t threshold_, uint32_t max_period_)
        : threshold(threshold_), max_period(max_period_) {}
    // One message with words: true when it ends in `threshold` laps or more.
    bool observe(const char* text, size_t len) noexcept {
        last = tail_laps(text, len, max_period, threshold);
        return last.laps >= threshold;
    }
    void reset() noexcept { last = TextLaps{}; }
};

}  // namespace tw
