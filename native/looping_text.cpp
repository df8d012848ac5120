#include "looping_text.h"

#include <cstring>

namespace tw {

namespace {

uint32_t letter_bytes(const unsigned char* at, uint32_t n) noexcept {
    uint32_t count = 0;
    for (uint32_t i = 0; i < n; ++i) {
        const unsigned char c = at[i];
        count += (c >= 0x80) | ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
    }
    return count;
}

}  // namespace

TextLaps tail_laps(const char* text, size_t len, uint32_t max_period,
                   uint32_t threshold) noexcept {
    TextLaps best{1, 0};
    if (len < 2 * static_cast<size_t>(kLapChunk)) return TextLaps{};
    const auto* b = reinterpret_cast<const unsigned char*>(text);
    const unsigned char* tail = b + len - kLapChunk;
    // occurrences of the tail chunk starting at q, kLapChunk <= len - kLapChunk - q <= max_period,
    // the nearest (largest q) first: Python's bytes.rfind over the same window
    const size_t lowest = len - kLapChunk > max_period ? len - kLapChunk - max_period : 0;
    size_t q = len - 2 * kLapChunk + 1;  // one past the highest start allowed
    while (q > lowest) {
        --q;
        if (b[q] != tail[0] || std::memcmp(b + q, tail, kLapChunk) != 0) continue;
        const size_t period = len - kLapChunk - q;
        const unsigned char* block = b + len - period;
        if (letter_bytes(block, static_cast<uint32_t>(period)) < kLapLetters) continue;
        uint32_t laps = 1;
        while ((laps + 1) * period <= len &&
               std::memcmp(b + len - (laps + 1) * period, block, period) == 0)
            ++laps;
        if (laps > best.laps) best = TextLaps{laps, static_cast<uint32_t>(period)};
        if (laps >= threshold) return best;
    }
    return best;
}

}  // namespace tw
