// The answer of a tool result (SPEC §12.1): the payload with its volatile spans (durations,
// timestamps, hex ids, PIDs, a shell's line counter, temporary path components, host-configured
// JSON members) replaced by one placeholder byte, hashed. One pass, no regex engine: the scan
// skips (a table, 16 bytes at a time with SSE2) to the next byte that can start or anchor a span
// and looks back and forward from there. The same scanner makes repeated-failure's error
// signature ("signature" mode: every remaining number removed as well, whitespace collapsed).
// Reference, byte for byte: tripwire/_answer.py (its docstring states the rules).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "hash.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tw {

// [results] volatile: the classes of spans a scan replaces (tripwire._answer.CLASSES).
enum AnswerClass : uint32_t {
    kDurations = 1u << 0,
    kTimestamps = 1u << 1,
    kHexIds = 1u << 2,
    kPids = 1u << 3,
    kLineCounters = 1u << 4,
    kTempPaths = 1u << 5,
    kDurationKeys = 1u << 6,  // a number under a JSON key that names a duration
    kIdCounters = 1u << 7,    // a counter-like id ("sess-7") under a JSON key ending in "id"
    kAllClasses = (1u << 8) - 1,
};

inline constexpr char kPlaceholder = '\x1a';

// [results] ignore_json_keys for one tool (the global keys and the tool's own): the values of
// JSON members with these keys (the bytes between the quotes, as written) are replaced.
struct AnswerKeys {
    std::vector<std::string> keys;
    bool contains(const char* key, size_t length) const noexcept;
};

// Scans `data`. Answer mode: returns false when no span was found (`out` untouched: the payload
// is its own scan); else true with the scanned bytes in `out` (cleared first). Signature mode
// always writes the signature to `out` and returns true.
bool scan_answer(const char* data, size_t length, uint32_t classes, const AnswerKeys* keys,
                 bool signature, std::string& out);

// Empty or whitespace only (str.isspace on ASCII): the *empty answer*.
bool is_empty_answer(const void* data, size_t length) noexcept;

// The 128-bit answer (XXH3-128 of the scan, of the payload itself when nothing was replaced);
// false for the empty answer (`digest` then untouched). Scratch memory is per thread.
bool answer_digest(const void* data, size_t length, uint32_t classes, const AnswerKeys* keys,
                   Hash128& digest);

// Argument mode (tripwire/identity/answer.py scan_argument, whose docstring states the rules):
// a call's argument value with the parts that change when the same call is re-run (a URL query
// value's timestamps and hex ids, the duration of `sleep N`, a generated temporary name's random
// run) replaced by the placeholder. Returns false when there are none (`out` untouched).
inline constexpr uint32_t kQueryClasses = kTimestamps | kHexIds;
inline constexpr size_t kTempRandomMin = 6, kTempRandomMax = 12;
bool scan_argument(const char* data, size_t length, std::string& out);
// Whether the value holds '=', "sleep" or "tmp": without one, scan_argument finds nothing (and
// path cleaning cannot make one, as it only drops and joins '/'-separated elements). Inline: the
// canonicalizer asks it of every string value. One pass for '=' and 'p', the last letter of both
// "sleep" and "tmp" (and a rarer one than their first): each 'p' is checked against the bytes
// before it.
inline bool argument_candidate(const char* data, size_t length) noexcept {
    const auto* s = reinterpret_cast<const unsigned char*>(data);
    auto hit = [s](size_t i) {
        return s[i] == '=' || (i >= 2 && s[i - 2] == 't' && s[i - 1] == 'm') ||
               (i >= 4 && std::memcmp(s + i - 4, "slee", 4) == 0);
    };
    size_t i = 0;
#if defined(__SSE2__)
    const __m128i eq = _mm_set1_epi8('='), p = _mm_set1_epi8('p');
    for (; i + 16 <= length; i += 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        unsigned bits = static_cast<unsigned>(
            _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, eq), _mm_cmpeq_epi8(v, p))));
        for (; bits; bits &= bits - 1)
            if (hit(i + static_cast<size_t>(__builtin_ctz(bits)))) return true;
    }
#endif
    for (; i < length; ++i)
        if ((s[i] == '=' || s[i] == 'p') && hit(i)) return true;
    return false;
}

// repeated-failure's error signature, hashed (XXH3-64 of the signature-mode scan).
uint64_t error_signature_key(const char* data, size_t length, uint32_t classes,
                             const AnswerKeys* keys);

}  // namespace tw
