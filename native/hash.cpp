// XXH3 (xxHash v0.8), seed 0 and the default secret only.
//
// Written from the algorithm in Yann Collet's reference xxhash.h (BSD-2);
// the constants and the 192-byte secret are taken from it verbatim because
// the output must be bit-identical with the Python `xxhash` package.
//
// Backend for the > 240-byte accumulate loop, chosen at compile time:
//   AVX2   if __AVX2__ is defined (needs -mavx2; not in the default flags),
//   SSE2   else if __SSE2__ is defined (always true on x86-64),
//   scalar otherwise.
// Defining TW_HASH_FORCE_SCALAR selects only portable code: the scalar
// accumulator and the 64x64->128 multiply without unsigned __int128.

#include "hash.h"

#include <cstring>

#if !defined(TW_HASH_FORCE_SCALAR) && defined(__AVX2__)
#include <immintrin.h>
#define TW_HASH_AVX2 1
#elif !defined(TW_HASH_FORCE_SCALAR) && defined(__SSE2__)
#include <emmintrin.h>
#define TW_HASH_SSE2 1
#endif

#if defined(__GNUC__)
#define TW_NOINLINE __attribute__((noinline))
#else
#define TW_NOINLINE
#endif

namespace tw {
namespace {

constexpr uint32_t kP32_1 = 0x9E3779B1U;
constexpr uint32_t kP32_2 = 0x85EBCA77U;
constexpr uint32_t kP32_3 = 0xC2B2AE3DU;
constexpr uint64_t kP64_1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kP64_2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kP64_3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kP64_4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kP64_5 = 0x27D4EB2F165667C5ULL;
constexpr uint64_t kMx1 = 0x165667919E3779F9ULL;
constexpr uint64_t kMx2 = 0x9FB21C651E98DF25ULL;

alignas(64) constexpr uint8_t kSecret[192] = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};

constexpr size_t kSecretSize = sizeof(kSecret);
constexpr size_t kSecretSizeMin = 136;  // 129..240: last 16 B use secret[kSecretSizeMin - 17]
constexpr size_t kStripeLen = 64;       // one accumulate step
constexpr size_t kStripesPerBlock = (kSecretSize - kStripeLen) / 8;  // secret advances 8 B per stripe
constexpr size_t kBlockLen = kStripeLen * kStripesPerBlock;          // 1024 B between scrambles

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
constexpr bool kBigEndian = true;
#else
constexpr bool kBigEndian = false;
#endif

// Plain shift/mask forms; GCC and Clang lower them to a single bswap.
inline uint32_t bswap32(uint32_t x) {
    return (x << 24) | ((x << 8) & 0x00FF0000U) | ((x >> 8) & 0x0000FF00U) | (x >> 24);
}
inline uint64_t bswap64(uint64_t x) {
    return (uint64_t(bswap32(uint32_t(x))) << 32) | bswap32(uint32_t(x >> 32));
}

// XXH3 is defined on little-endian words; memcpy keeps unaligned reads legal.
inline uint32_t read32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return kBigEndian ? bswap32(v) : v;
}
inline uint64_t read64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return kBigEndian ? bswap64(v) : v;
}

inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }
inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

inline Hash128 mul64to128(uint64_t a, uint64_t b) {
#if defined(__SIZEOF_INT128__) && !defined(TW_HASH_FORCE_SCALAR)
    __extension__ typedef unsigned __int128 u128;  // __extension__: quiet under -Wpedantic
    const u128 p = static_cast<u128>(a) * b;
    return {uint64_t(p), uint64_t(p >> 64)};
#else
    // Schoolbook on 32-bit halves; the partial sums cannot overflow.
    const uint64_t lo_lo = (a & 0xFFFFFFFF) * (b & 0xFFFFFFFF);
    const uint64_t hi_lo = (a >> 32) * (b & 0xFFFFFFFF);
    const uint64_t lo_hi = (a & 0xFFFFFFFF) * (b >> 32);
    const uint64_t hi_hi = (a >> 32) * (b >> 32);
    const uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFF) + lo_hi;
    return {(cross << 32) | (lo_lo & 0xFFFFFFFF), (hi_lo >> 32) + (cross >> 32) + hi_hi};
#endif
}

inline uint64_t mul_fold64(uint64_t a, uint64_t b) {
    const Hash128 p = mul64to128(a, b);
    return p.low64 ^ p.high64;
}

inline uint64_t xorshift(uint64_t v, int s) { return v ^ (v >> s); }

// XXH64's finalizer, used by the 0- and 1..3-byte classes.
inline uint64_t xxh64_avalanche(uint64_t h) {
    h = xorshift(h, 33) * kP64_2;
    h = xorshift(h, 29) * kP64_3;
    return xorshift(h, 32);
}

// Light finalizer for already mixed state.
inline uint64_t avalanche(uint64_t h) { return xorshift(xorshift(h, 37) * kMx1, 32); }

// Stronger finalizer (rrmxmx) for the barely mixed 4..8-byte class.
inline uint64_t rrmxmx(uint64_t h, uint64_t len) {
    h ^= rotl64(h, 49) ^ rotl64(h, 24);
    h *= kMx2;
    h ^= (h >> 35) + len;
    h *= kMx2;
    return xorshift(h, 28);
}

inline uint64_t mix16(const uint8_t* p, const uint8_t* s) {
    return mul_fold64(read64(p) ^ read64(s), read64(p + 8) ^ read64(s + 8));
}

// 128-bit variant of mix16: two 16-byte inputs, each also folded into the other half.
inline void mix32(Hash128& acc, const uint8_t* a, const uint8_t* b, const uint8_t* s) {
    acc.low64 += mix16(a, s);
    acc.low64 ^= read64(b) + read64(b + 8);
    acc.high64 += mix16(b, s + 16);
    acc.high64 ^= read64(a) + read64(a + 8);
}

// ---- 64-bit, len <= 240 ----------------------------------------------------

uint64_t hash64_0to16(const uint8_t* p, size_t len) {
    const uint8_t* s = kSecret;
    if (len > 8) {  // 9..16: first and last 8 bytes (overlapping)
        const uint64_t lo = read64(p) ^ (read64(s + 24) ^ read64(s + 32));
        const uint64_t hi = read64(p + len - 8) ^ (read64(s + 40) ^ read64(s + 48));
        return avalanche(len + bswap64(lo) + hi + mul_fold64(lo, hi));
    }
    if (len >= 4) {  // 4..8: first and last 4 bytes
        const uint64_t in = read32(p + len - 4) + (uint64_t(read32(p)) << 32);
        return rrmxmx(in ^ (read64(s + 8) ^ read64(s + 16)), len);
    }
    if (len > 0) {  // 1..3: first, middle and last byte plus the length
        const uint32_t c = (uint32_t(p[0]) << 16) | (uint32_t(p[len >> 1]) << 24) |
                           uint32_t(p[len - 1]) | (uint32_t(len) << 8);
        return xxh64_avalanche(c ^ (read32(s) ^ read32(s + 4)));
    }
    return xxh64_avalanche(read64(s + 56) ^ read64(s + 64));
}

// 17..128: 16-byte pairs taken from both ends, outermost pair first.
// Unrolled because the equivalent loop measured ~13% slower at 100 bytes.
uint64_t hash64_17to128(const uint8_t* p, size_t len) {
    const uint8_t* s = kSecret;
    uint64_t acc = len * kP64_1;
    if (len > 32) {
        if (len > 64) {
            if (len > 96) {
                acc += mix16(p + 48, s + 96);
                acc += mix16(p + len - 64, s + 112);
            }
            acc += mix16(p + 32, s + 64);
            acc += mix16(p + len - 48, s + 80);
        }
        acc += mix16(p + 16, s + 32);
        acc += mix16(p + len - 32, s + 48);
    }
    acc += mix16(p, s);
    acc += mix16(p + len - 16, s + 16);
    return avalanche(acc);
}

// 129..240: eight rounds on the secret start, the rest on the secret shifted by 3.
TW_NOINLINE uint64_t hash64_129to240(const uint8_t* p, size_t len) {
    uint64_t acc = len * kP64_1;
    for (size_t i = 0; i < 8; i++) acc += mix16(p + 16 * i, kSecret + 16 * i);
    acc = avalanche(acc);
    uint64_t acc_end = mix16(p + len - 16, kSecret + kSecretSizeMin - 17);
    for (size_t i = 8; i < len / 16; i++) acc_end += mix16(p + 16 * i, kSecret + 16 * (i - 8) + 3);
    return avalanche(acc + acc_end);
}

// ---- 128-bit, len <= 240 ---------------------------------------------------

Hash128 hash128_0to16(const uint8_t* p, size_t len) {
    const uint8_t* s = kSecret;
    if (len > 8) {  // 9..16
        const uint64_t lo = read64(p);
        uint64_t hi = read64(p + len - 8);
        Hash128 m = mul64to128(lo ^ hi ^ (read64(s + 32) ^ read64(s + 40)), kP64_1);
        m.low64 += uint64_t(len - 1) << 54;  // length lands in both product halves
        hi ^= read64(s + 48) ^ read64(s + 56);
        // Adds hi's upper half plus (hi's lower half * kP32_2) to m.high64.
        m.high64 += hi + uint64_t(uint32_t(hi)) * (kP32_2 - 1);
        m.low64 ^= bswap64(m.high64);
        Hash128 h = mul64to128(m.low64, kP64_2);  // 128x64 multiply, low 128 bits
        h.high64 += m.high64 * kP64_2;
        return {avalanche(h.low64), avalanche(h.high64)};
    }
    if (len >= 4) {  // 4..8
        const uint64_t in = read32(p) + (uint64_t(read32(p + len - 4)) << 32);
        Hash128 m = mul64to128(in ^ (read64(s + 16) ^ read64(s + 24)), kP64_1 + (len << 2));
        m.high64 += m.low64 << 1;
        m.low64 ^= m.high64 >> 3;
        m.low64 = xorshift(xorshift(m.low64, 35) * kMx2, 28);
        m.high64 = avalanche(m.high64);
        return m;
    }
    if (len > 0) {  // 1..3
        const uint32_t lo = (uint32_t(p[0]) << 16) | (uint32_t(p[len >> 1]) << 24) |
                            uint32_t(p[len - 1]) | (uint32_t(len) << 8);
        const uint32_t hi = rotl32(bswap32(lo), 13);
        return {xxh64_avalanche(lo ^ (read32(s) ^ read32(s + 4))),
                xxh64_avalanche(hi ^ (read32(s + 8) ^ read32(s + 12)))};
    }
    return {xxh64_avalanche(read64(s + 64) ^ read64(s + 72)),
            xxh64_avalanche(read64(s + 80) ^ read64(s + 88))};
}

// Shared by the 17..128 and 129..240 classes.
Hash128 finish128_mid(Hash128 acc, size_t len) {
    const uint64_t lo = acc.low64 + acc.high64;
    const uint64_t hi = acc.low64 * kP64_1 + acc.high64 * kP64_4 + len * kP64_2;
    return {avalanche(lo), 0 - avalanche(hi)};
}

// 17..128: as the 64-bit variant but with mix32, whose order matters.
Hash128 hash128_17to128(const uint8_t* p, size_t len) {
    const uint8_t* s = kSecret;
    Hash128 acc = {len * kP64_1, 0};
    if (len > 32) {
        if (len > 64) {
            if (len > 96) mix32(acc, p + 48, p + len - 64, s + 96);
            mix32(acc, p + 32, p + len - 48, s + 64);
        }
        mix32(acc, p + 16, p + len - 32, s + 32);
    }
    mix32(acc, p, p + len - 16, s);
    return finish128_mid(acc, len);
}

// 129..240. `i <= len` re-mixes the last 32 bytes when len % 32 == 0; that is
// part of the reference output.
TW_NOINLINE Hash128 hash128_129to240(const uint8_t* p, size_t len) {
    Hash128 acc = {len * kP64_1, 0};
    for (size_t i = 32; i < 160; i += 32) mix32(acc, p + i - 32, p + i - 16, kSecret + i - 32);
    acc = {avalanche(acc.low64), avalanche(acc.high64)};
    for (size_t i = 160; i <= len; i += 32) mix32(acc, p + i - 32, p + i - 16, kSecret + 3 + i - 160);
    mix32(acc, p + len - 16, p + len - 32, kSecret + kSecretSizeMin - 17 - 16);
    return finish128_mid(acc, len);
}

// ---- len > 240: 8 x 64-bit lane accumulator --------------------------------
// Per stripe and lane i:  acc[i ^ 1] += in[i];  k = in[i] ^ secret[i];
//                         acc[i] += lo32(k) * hi32(k).
// After each block:       acc[i] = (acc[i] ^ acc[i] >> 47 ^ secret_end[i]) * kP32_1.

constexpr uint64_t kAccInit[8] = {kP32_3, kP64_1, kP64_2, kP64_3, kP64_4, kP32_2, kP64_5, kP32_1};

#if defined(TW_HASH_AVX2)

struct Acc {
    __m256i v[2];
};
inline Acc acc_init() {
    Acc a;
    for (int i = 0; i < 2; i++) a.v[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kAccInit) + i);
    return a;
}
inline void acc_store(const Acc& a, uint64_t out[8]) {
    for (int i = 0; i < 2; i++) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out) + i, a.v[i]);
}
inline void accumulate(Acc& a, const uint8_t* in, const uint8_t* s) {
    for (int i = 0; i < 2; i++) {
        const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in) + i);
        const __m256i k = _mm256_xor_si256(d, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s) + i));
        const __m256i prod = _mm256_mul_epu32(k, _mm256_srli_epi64(k, 32));
        const __m256i swapped = _mm256_shuffle_epi32(d, _MM_SHUFFLE(1, 0, 3, 2));
        a.v[i] = _mm256_add_epi64(a.v[i], _mm256_add_epi64(swapped, prod));
    }
}
inline void scramble(Acc& a, const uint8_t* s) {
    const __m256i prime = _mm256_set1_epi32(int(kP32_1));
    for (int i = 0; i < 2; i++) {
        __m256i x = _mm256_xor_si256(a.v[i], _mm256_srli_epi64(a.v[i], 47));
        x = _mm256_xor_si256(x, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s) + i));
        // 64x32 multiply from two 32x32->64 products.
        const __m256i lo = _mm256_mul_epu32(x, prime);
        const __m256i hi = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), prime);
        a.v[i] = _mm256_add_epi64(lo, _mm256_slli_epi64(hi, 32));
    }
}

#elif defined(TW_HASH_SSE2)

struct Acc {
    __m128i v[4];
};
inline Acc acc_init() {
    Acc a;
    for (int i = 0; i < 4; i++) a.v[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kAccInit) + i);
    return a;
}
inline void acc_store(const Acc& a, uint64_t out[8]) {
    for (int i = 0; i < 4; i++) _mm_storeu_si128(reinterpret_cast<__m128i*>(out) + i, a.v[i]);
}
inline void accumulate(Acc& a, const uint8_t* in, const uint8_t* s) {
    for (int i = 0; i < 4; i++) {
        const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in) + i);
        const __m128i k = _mm_xor_si128(d, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s) + i));
        // mul_epu32 uses the low 32 bits of each lane; the shuffle puts hi32 there.
        const __m128i prod = _mm_mul_epu32(k, _mm_shuffle_epi32(k, _MM_SHUFFLE(0, 3, 0, 1)));
        const __m128i swapped = _mm_shuffle_epi32(d, _MM_SHUFFLE(1, 0, 3, 2));
        a.v[i] = _mm_add_epi64(a.v[i], _mm_add_epi64(swapped, prod));
    }
}
inline void scramble(Acc& a, const uint8_t* s) {
    const __m128i prime = _mm_set1_epi32(int(kP32_1));
    for (int i = 0; i < 4; i++) {
        __m128i x = _mm_xor_si128(a.v[i], _mm_srli_epi64(a.v[i], 47));
        x = _mm_xor_si128(x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s) + i));
        // 64x32 multiply from two 32x32->64 products.
        const __m128i lo = _mm_mul_epu32(x, prime);
        const __m128i hi = _mm_mul_epu32(_mm_shuffle_epi32(x, _MM_SHUFFLE(0, 3, 0, 1)), prime);
        a.v[i] = _mm_add_epi64(lo, _mm_slli_epi64(hi, 32));
    }
}

#else

struct Acc {
    uint64_t v[8];
};
inline Acc acc_init() {
    Acc a;
    for (int i = 0; i < 8; i++) a.v[i] = kAccInit[i];
    return a;
}
inline void acc_store(const Acc& a, uint64_t out[8]) {
    for (int i = 0; i < 8; i++) out[i] = a.v[i];
}
// Lanes in pairs, so each lane is written once per stripe.
inline void accumulate(Acc& a, const uint8_t* in, const uint8_t* s) {
    for (int i = 0; i < 8; i += 2) {
        const uint64_t d0 = read64(in + 8 * i), d1 = read64(in + 8 * i + 8);
        const uint64_t k0 = d0 ^ read64(s + 8 * i), k1 = d1 ^ read64(s + 8 * i + 8);
        a.v[i] += d1 + (k0 & 0xFFFFFFFF) * (k0 >> 32);
        a.v[i + 1] += d0 + (k1 & 0xFFFFFFFF) * (k1 >> 32);
    }
}
inline void scramble(Acc& a, const uint8_t* s) {
    for (int i = 0; i < 8; i++) a.v[i] = (xorshift(a.v[i], 47) ^ read64(s + 8 * i)) * kP32_1;
}

#endif

void accumulate_long(const uint8_t* p, size_t len, uint64_t out[8]) {
    Acc a = acc_init();
    // Full blocks; (len - 1) keeps the final stripe for the tail below.
    const size_t nb_blocks = (len - 1) / kBlockLen;
    for (size_t n = 0; n < nb_blocks; n++) {
        const uint8_t* block = p + n * kBlockLen;
        for (size_t i = 0; i < kStripesPerBlock; i++) accumulate(a, block + i * kStripeLen, kSecret + 8 * i);
        scramble(a, kSecret + kSecretSize - kStripeLen);
    }
    // Whole stripes of the last partial block (never the final byte).
    const uint8_t* tail = p + nb_blocks * kBlockLen;
    const size_t nb_stripes = ((len - 1) - nb_blocks * kBlockLen) / kStripeLen;
    for (size_t i = 0; i < nb_stripes; i++) accumulate(a, tail + i * kStripeLen, kSecret + 8 * i);
    // The last 64 bytes, overlapping the previous stripe, on an unaligned secret.
    accumulate(a, p + len - kStripeLen, kSecret + kSecretSize - kStripeLen - 7);
    acc_store(a, out);
}

uint64_t merge_accs(const uint64_t acc[8], const uint8_t* s, uint64_t start) {
    for (int i = 0; i < 4; i++)
        start += mul_fold64(acc[2 * i] ^ read64(s + 16 * i), acc[2 * i + 1] ^ read64(s + 16 * i + 8));
    return avalanche(start);
}

// Out of line, like the 129..240 classes, so the entry points stay small and
// only short-input code is inlined into them.
TW_NOINLINE uint64_t hash64_long(const uint8_t* p, size_t len) {
    uint64_t acc[8];
    accumulate_long(p, len, acc);
    return merge_accs(acc, kSecret + 11, len * kP64_1);
}

TW_NOINLINE Hash128 hash128_long(const uint8_t* p, size_t len) {
    uint64_t acc[8];
    accumulate_long(p, len, acc);
    return {merge_accs(acc, kSecret + 11, len * kP64_1),
            merge_accs(acc, kSecret + kSecretSize - 64 - 11, ~(len * kP64_2))};
}

}  // namespace

uint64_t xxh3_64(const void* data, size_t len) noexcept {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    if (len <= 16) return hash64_0to16(p, len);
    if (len <= 128) return hash64_17to128(p, len);
    if (len <= 240) return hash64_129to240(p, len);
    return hash64_long(p, len);
}

Hash128 xxh3_128(const void* data, size_t len) noexcept {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    if (len <= 16) return hash128_0to16(p, len);
    if (len <= 128) return hash128_17to128(p, len);
    if (len <= 240) return hash128_129to240(p, len);
    return hash128_long(p, len);
}

}  // namespace tw
