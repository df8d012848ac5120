// Streaming byte -> token estimate for tool results (SPEC §6): 3 bytes per token over the
// running total, so any chunking of the same bytes gives the same count.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tw {

// JSON, YAML and logs tokenize worse than prose; under-counting is the dangerous direction.
constexpr uint64_t kBytesPerToken = 3;

inline uint64_t tokens_for_bytes(uint64_t bytes) noexcept {
    return (bytes + kBytesPerToken - 1) / kBytesPerToken;
}

// UTF-8 length of a string held as fixed-width code units (CPython's 1-, 2- and 4-byte string
// kinds), without encoding it. Surrogate code points count 3 bytes (surrogatepass).
size_t utf8_length_ucs1(const uint8_t* s, size_t n) noexcept;
size_t utf8_length_ucs2(const uint16_t* s, size_t n) noexcept;
size_t utf8_length_ucs4(const uint32_t* s, size_t n) noexcept;

}  // namespace tw
