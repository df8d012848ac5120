// XXH3 (xxHash v0.8) 64- and 128-bit hashes, seed 0, default secret.
// Bit-identical with xxhash.xxh3_64_intdigest / xxhash.xxh3_128_intdigest;
// the 128-bit intdigest is (high64 << 64) | low64.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tw {

struct Hash128 {
    uint64_t low64;
    uint64_t high64;
};

uint64_t xxh3_64(const void* data, size_t len) noexcept;
Hash128 xxh3_128(const void* data, size_t len) noexcept;

}  // namespace tw
