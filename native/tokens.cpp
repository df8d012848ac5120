#include "tokens.h"

#include <cstring>

namespace tw {

size_t utf8_length_ucs1(const uint8_t* s, size_t n) noexcept {
    // Latin-1: one extra byte per code unit >= 0x80. Count the high bits 8 bytes at a time.
    size_t extra = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        std::memcpy(&w, s + i, 8);
        extra += static_cast<size_t>(__builtin_popcountll(w & 0x8080808080808080ULL));
    }
    for (; i < n; ++i) extra += s[i] >> 7;
    return n + extra;
}

size_t utf8_length_ucs2(const uint16_t* s, size_t n) noexcept {
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
        const uint16_t c = s[i];
        total += c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
    }
    return total;
}

size_t utf8_length_ucs4(const uint32_t* s, size_t n) noexcept {
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
        const uint32_t c = s[i];
        total += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    }
    return total;
}

}  // namespace tw
