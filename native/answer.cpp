#include "answer.h"

#include <cstring>
#include <new>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tw {

namespace {

// -- byte classes (tripwire/_answer.py's frozensets) ------------------------------------------

enum : uint8_t {
    kDigit = 1,
    kAlpha = 2,
    kHex = 4,
    kSpace = 8,         // str.isspace on ASCII, U+001C..U+001F included
    kName = 16,         // continues a name: a temporary prefix after one does not start a token
    kComponentEnd = 32, // ends a temporary path's component
    kScalarEnd = 64,    // ends a JSON scalar
    kJoiner = 128,      // signature mode: joins a number to the one before it
};

// What the scan stops at: digits, '/', '\' always; '"' with JSON keys; whitespace in signature
// mode.
enum : uint8_t { kAnchor = 1, kKeyAnchor = 2, kSpaceAnchor = 4 };

struct Tables {
    uint8_t cls[256] = {};
    uint8_t anchor[256] = {};
    constexpr Tables() {
        for (int c = '0'; c <= '9'; ++c) cls[c] |= kDigit | kHex | kName;
        for (int c = 'a'; c <= 'z'; ++c) cls[c] |= kAlpha | kName;
        for (int c = 'A'; c <= 'Z'; ++c) cls[c] |= kAlpha | kName;
        for (int c = 'a'; c <= 'f'; ++c) cls[c] |= kHex;
        for (int c = 'A'; c <= 'F'; ++c) cls[c] |= kHex;
        const char spaces[] = " \t\n\v\f\r\x1c\x1d\x1e\x1f";
        for (const char* p = spaces; *p; ++p) cls[static_cast<uint8_t>(*p)] |= kSpace | kComponentEnd | kScalarEnd;
        const char names[] = "_.~-/";
        for (const char* p = names; *p; ++p) cls[static_cast<uint8_t>(*p)] |= kName;
        const char ends[] = "/\\\"'`()[]{}<>,;:";
        for (const char* p = ends; *p; ++p) cls[static_cast<uint8_t>(*p)] |= kComponentEnd;
        const char scalar[] = ",}]";
        for (const char* p = scalar; *p; ++p) cls[static_cast<uint8_t>(*p)] |= kScalarEnd;
        const char joiners[] = ".:-/";
        for (const char* p = joiners; *p; ++p) cls[static_cast<uint8_t>(*p)] |= kJoiner;
        for (int c = '0'; c <= '9'; ++c) anchor[c] |= kAnchor;
        anchor[static_cast<uint8_t>('/')] |= kAnchor;
        anchor[static_cast<uint8_t>('\\')] |= kAnchor;
        anchor[static_cast<uint8_t>('"')] |= kKeyAnchor;
        for (const char* p = spaces; *p; ++p) anchor[static_cast<uint8_t>(*p)] |= kSpaceAnchor;
    }
};
constexpr Tables kTables;

inline bool is(uint8_t c, uint8_t cls) noexcept { return (kTables.cls[c] & cls) != 0; }
inline bool digit(uint8_t c) noexcept { return c >= '0' && c <= '9'; }
inline bool alnum(uint8_t c) noexcept { return is(c, kDigit | kAlpha); }

// A duration's unit spellings (tripwire/_answer.py _UNITS, _COMPOUND_UNITS); "us" for µs/μs.
bool unit_in(const char* u, size_t len, bool compound) noexcept {
    auto is = [u](const char* w) { return std::memcmp(u, w, std::strlen(w)) == 0; };
    switch (len) {
        case 1:
            return u[0] == 's' || u[0] == 'h' || (compound && u[0] == 'm');
        case 2:
            return is("ns") || is("us") || is("ms");
        case 3:
            return !compound && (is("sec") || is("min"));
        case 4:
            return !compound && is("secs");
        case 6:
            return !compound && is("second");
        case 7:
            return !compound && is("seconds");
        default:
            return false;
    }
}

// The first byte of every unit spelling (n u m s h, and µ's or μ's lead byte).
inline bool unit_start(uint8_t c) noexcept {
    return c == 'n' || c == 'u' || c == 'm' || c == 's' || c == 'h' || c == 0xC2 || c == 0xCE;
}

class Scanner {
public:
    Scanner(const uint8_t* s, size_t n, uint32_t classes, const AnswerKeys* keys, bool signature,
            std::string& out)
        : s_(s), n_(n), classes_(classes), keys_(keys && !keys->keys.empty() ? keys : nullptr),
          signature_(signature), out_(out) {}

    bool run();
    bool run_argument();  // argument mode (scan_argument)

private:
    const uint8_t* s_;
    size_t n_;
    uint32_t classes_;
    const AnswerKeys* keys_;
    bool signature_;
    std::string& out_;
    size_t emitted_ = 0;   // input before this index is in out_
    bool changed_ = false;
    bool started_ = false; // out_ cleared for this scan
    long long number_end_ = -1;  // signature mode: out_.size() just after the last number

    size_t skip(size_t i) const noexcept;
    size_t at_digits(size_t i);
    bool temp_component(size_t i, size_t& p, size_t& q) const noexcept;
    bool json_member_value(size_t i, size_t& v, size_t& e) const noexcept;
    bool sleep_duration(size_t i, size_t& k, size_t& d) const noexcept;
    bool query_value(size_t eq, size_t& v, size_t& e, std::string& value) const;
    bool ends_with(size_t k, const char* p, size_t len) const noexcept;
    bool token_start(size_t k) const noexcept;
    bool temp_prefix_ends(size_t t) const noexcept;
    bool temp_name(size_t t, size_t& r, size_t& e) const noexcept;
    size_t argument_anchor(size_t a) const noexcept;  // the next '=' or 'p' at or after a

    // -- output --------------------------------------------------------------------------
    void flush(size_t upto) {
        if (!started_) {  // the scan is never longer than the input (a span: one byte)
            out_.clear();
            out_.reserve(n_);
            started_ = true;
        }
        out_.append(reinterpret_cast<const char*>(s_) + emitted_, upto - emitted_);
        emitted_ = upto;
    }
    void replace(size_t start, size_t end, const char* by, size_t by_len) {
        flush(start);
        out_.append(by, by_len);
        emitted_ = end;
        changed_ = true;
    }
    // a volatile span: the placeholder (signature mode: '#', as a number)
    void span(size_t start, size_t end) {
        if (signature_) {
            number(start, end);
        } else {
            replace(start, end, &kPlaceholder, 1);
        }
    }
    void number(size_t start, size_t end) {
        flush(start);
        if (number_end_ >= 0 && out_.size() == static_cast<size_t>(number_end_) + 1 &&
            is(static_cast<uint8_t>(out_.back()), kJoiner)) {
            out_.pop_back();
        } else {
            out_.push_back('#');
        }
        number_end_ = static_cast<long long>(out_.size());
        emitted_ = end;
        changed_ = true;
    }

    // -- helpers (tripwire/_answer.py's, same names without the underscore) ---------------
    bool escape_letter(size_t k) const noexcept {
        return k >= 2 && (s_[k - 1] == 'n' || s_[k - 1] == 't' || s_[k - 1] == 'r') &&
               s_[k - 2] == '\\';
    }
    bool boundary_before(size_t k) const noexcept {
        return k == 0 || !alnum(s_[k - 1]) || escape_letter(k);
    }
    bool boundary_after(size_t k) const noexcept {
        return k >= n_ || (!alnum(s_[k]) && s_[k] != '_');
    }
    size_t digits_end(size_t k) const noexcept {
        while (k < n_ && digit(s_[k])) ++k;
        return k;
    }
    bool two_digits(size_t k) const noexcept {
        return k + 1 < n_ && digit(s_[k]) && digit(s_[k + 1]);
    }
    size_t fraction_end(size_t k, bool comma) const noexcept {
        if (k + 1 < n_ && (s_[k] == '.' || (comma && s_[k] == ',')) && digit(s_[k + 1]))
            return digits_end(k + 1);
        return k;
    }
    template <size_t N>
    bool starts_with(size_t k, const char (&p)[N]) const noexcept {
        constexpr size_t len = N - 1;  // a string literal's length
        return k <= n_ && n_ - k >= len && std::memcmp(s_ + k, p, len) == 0;
    }
    long long date_time(size_t i) const noexcept;
    long long time_of_day(size_t i, size_t j) const noexcept;
    bool uuid_at(long long start) const noexcept;
    bool unit(size_t k, size_t& end, const char*& spelling, size_t& len) const noexcept;
    long long duration(size_t j) const noexcept;
    bool pid(size_t i) const noexcept;
    bool line_counter(size_t i, size_t j) const noexcept;
    size_t json_string_end(size_t k) const noexcept;  // n_ when unterminated
    size_t json_value_end(size_t v) const noexcept;   // v when none
    // duration_keys / id_counters (tripwire/identity/answer.py's _member_key ...)
    bool member_key(size_t v, size_t& key, size_t& key_len) const noexcept;
    long long json_number_end(size_t j) const noexcept;
    long long counter_start(size_t i) const noexcept;
};

constexpr size_t kKeyLimit = 64;     // the longest JSON key the two JSON classes read
constexpr size_t kPrefixLimit = 16;  // the longest letter prefix of a counter-like id

bool word_in(const char* w, size_t len, const char* const* list) noexcept {
    for (; *list; ++list)
        if (std::strlen(*list) == len && std::memcmp(*list, w, len) == 0) return true;
    return false;
}

const char* const kDurationWords[] = {"duration", "durations", "elapsed", "latency", "took",
                                      "runtime", "uptime", "timing", "timings", "time",
                                      "walltime", nullptr};
const char* const kUnitWords[] = {"ms", "msec", "msecs", "millis", "us", "usec", "micros",
                                  "ns", "nanos", "sec", "secs", "seconds", nullptr};

// A JSON key's words, lowercase (split at bytes that are no letter or digit, and where a
// lowercase letter meets an uppercase one): whether it names a duration (`id`: whether its
// last word is "id").
bool key_matches(const uint8_t* key, size_t len, bool id) noexcept {
    char word[kKeyLimit];
    size_t w = 0;
    bool any_duration = false;
    uint8_t prev = 0;
    bool have_last = false;
    char last[kKeyLimit];
    size_t last_len = 0;
    auto end_word = [&]() {
        if (w == 0) return;
        any_duration = any_duration || word_in(word, w, kDurationWords);
        std::memcpy(last, word, w);
        last_len = w;
        have_last = true;
        w = 0;
    };
    for (size_t k = 0; k < len; ++k) {
        const uint8_t c = key[k];
        const bool upper = c >= 'A' && c <= 'Z';
        if (alnum(c)) {
            if (w && upper && prev >= 'a' && prev <= 'z') end_word();
            word[w++] = static_cast<char>(upper ? c | 0x20 : c);
        } else {
            end_word();
        }
        prev = c;
    }
    end_word();
    if (!have_last) return false;
    if (id) return last_len == 2 && last[0] == 'i' && last[1] == 'd';
    return any_duration || word_in(last, last_len, kUnitWords);
}

bool Scanner::member_key(size_t v, size_t& key, size_t& key_len) const noexcept {
    size_t k = v;
    while (k > 0 && is(s_[k - 1], kSpace)) --k;
    if (k == 0 || s_[k - 1] != ':') return false;
    --k;
    while (k > 0 && is(s_[k - 1], kSpace)) --k;
    if (k == 0 || s_[k - 1] != '"' || (k >= 2 && s_[k - 2] == '\\')) return false;
    const size_t close = k - 1;
    size_t start = close;
    while (start > 0 && close - start < kKeyLimit) {
        const uint8_t c = s_[start - 1];
        if (c == '"') {
            if (start >= 2 && s_[start - 2] == '\\') return false;
            key = start;
            key_len = close - start;
            return true;
        }
        if (c == '\\') return false;
        --start;
    }
    return false;
}

long long Scanner::json_number_end(size_t j) const noexcept {
    const size_t k = fraction_end(j, false);
    return k >= n_ || is(s_[k], kScalarEnd) ? static_cast<long long>(k) : -1;
}

long long Scanner::counter_start(size_t i) const noexcept {
    if (i == 0 || (s_[i - 1] != '-' && s_[i - 1] != '_')) return -1;
    const size_t k = i - 1;
    size_t t = k;
    while (t > 0 && is(s_[t - 1], kAlpha) && k - t < kPrefixLimit) --t;
    if (t == k || t == 0 || s_[t - 1] != '"' || (t >= 2 && s_[t - 2] == '\\')) return -1;
    return static_cast<long long>(t);
}

size_t Scanner::skip(size_t i) const noexcept {
    const uint8_t mask = kAnchor | (keys_ ? kKeyAnchor : 0) | (signature_ ? kSpaceAnchor : 0);
#if defined(__SSE2__)
    if (!signature_) {
        // digits and '/' are 0x2F..0x39: one unsigned range test; then '\' (and '"')
        const __m128i base = _mm_set1_epi8(0x2F), span = _mm_set1_epi8(10);
        const __m128i backslash = _mm_set1_epi8('\\');
        const __m128i quote = _mm_set1_epi8(keys_ ? '"' : '\\');
        while (i + 16 <= n_) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s_ + i));
            const __m128i x = _mm_sub_epi8(v, base);
            const __m128i hit = _mm_or_si128(
                _mm_cmpeq_epi8(_mm_min_epu8(x, span), x),
                _mm_or_si128(_mm_cmpeq_epi8(v, backslash), _mm_cmpeq_epi8(v, quote)));
            const int bits = _mm_movemask_epi8(hit);
            if (bits) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(bits)));
            i += 16;
        }
    }
#endif
    while (i < n_ && !(kTables.anchor[s_[i]] & mask)) ++i;
    return i;
}

long long Scanner::date_time(size_t i) const noexcept {
    size_t k = i + 4;
    if (!(k + 6 <= n_ && s_[k] == '-' && two_digits(k + 1) && s_[k + 3] == '-' &&
          two_digits(k + 4)))
        return -1;
    k += 6;
    if (!(k < n_ && (s_[k] == 'T' || s_[k] == 't' || s_[k] == ' '))) return -1;
    k += 1;
    if (!(two_digits(k) && k + 2 < n_ && s_[k + 2] == ':' && two_digits(k + 3))) return -1;
    k += 5;
    if (k < n_ && s_[k] == ':' && two_digits(k + 1)) k += 3;
    k = fraction_end(k, true);
    if (k < n_ && (s_[k] == 'Z' || s_[k] == 'z')) {
        k += 1;
    } else if (k < n_ && (s_[k] == '+' || s_[k] == '-') && two_digits(k + 1)) {
        k += 3;
        if (k < n_ && s_[k] == ':' && two_digits(k + 1)) {
            k += 3;
        } else if (two_digits(k)) {
            k += 2;
        }
    }
    return boundary_after(k) ? static_cast<long long>(k) : -1;
}

long long Scanner::time_of_day(size_t i, size_t j) const noexcept {
    if (!(j - i <= 2 && j + 5 < n_ && s_[j] == ':' && two_digits(j + 1) && s_[j + 3] == ':' &&
          two_digits(j + 4)))
        return -1;
    const size_t k = fraction_end(j + 6, true);
    return boundary_after(k) ? static_cast<long long>(k) : -1;
}

bool Scanner::uuid_at(long long start) const noexcept {
    if (start < 0) return false;
    const size_t a = static_cast<size_t>(start);
    if (a + 36 > n_ || !boundary_before(a) || !boundary_after(a + 36)) return false;
    for (size_t k = 0; k < 36; ++k) {
        const uint8_t c = s_[a + k];
        if (k == 8 || k == 13 || k == 18 || k == 23) {
            if (c != '-') return false;
        } else if (!is(c, kHex)) {
            return false;
        }
    }
    return true;
}

bool Scanner::unit(size_t k, size_t& end, const char*& spelling, size_t& len) const noexcept {
    if (k >= n_ || !unit_start(s_[k])) return false;  // no unit starts so: no need to read on
    if (starts_with(k, "\xc2\xb5s") || starts_with(k, "\xce\xbcs")) {
        end = k + 3;
        spelling = "us";
        len = 2;
        return true;
    }
    size_t t = k;
    while (t < n_ && is(s_[t], kAlpha)) ++t;
    if (t == k) return false;
    end = t;
    spelling = reinterpret_cast<const char*>(s_ + k);
    len = t - k;
    return true;
}

long long Scanner::duration(size_t j) const noexcept {
    size_t k = fraction_end(j, false);
    size_t end, len;
    const char* spelling;
    if (k < n_ && s_[k] == ' ') {  // one space, then a single unit
        if (unit(k + 1, end, spelling, len) && unit_in(spelling, len, false) &&
            boundary_after(end))
            return static_cast<long long>(end);
        return -1;
    }
    int parts = 1;
    for (;;) {
        if (!unit(k, end, spelling, len)) return -1;
        if (end < n_ && digit(s_[end]) && unit_in(spelling, len, true)) {
            k = fraction_end(digits_end(end), false);  // the next part of a compound
            ++parts;
            continue;
        }
        return unit_in(spelling, len, parts > 1) && boundary_after(end)
                   ? static_cast<long long>(end)
                   : -1;
    }
}

bool Scanner::pid(size_t i) const noexcept {
    size_t k = i;
    while (k > 0 && s_[k - 1] == ' ') --k;
    if (k > 0 && (s_[k - 1] == '=' || s_[k - 1] == ':')) {
        --k;
        while (k > 0 && s_[k - 1] == ' ') --k;
    }
    // every keyword ends in d, D or s: most numbers are rejected on one byte
    if (k < 3 || !(s_[k - 1] == 'd' || s_[k - 1] == 'D' || s_[k - 1] == 's')) return false;
    static const char* const kWords[] = {"pid", "PID", "process"};
    for (const char* w : kWords) {
        const size_t len = std::strlen(w);
        if (k >= len && std::memcmp(s_ + k - len, w, len) == 0 && boundary_before(k - len))
            return true;
    }
    return false;
}

bool Scanner::line_counter(size_t i, size_t j) const noexcept {
    if (!(j < n_ && s_[j] == ':') || i == 0 || (s_[i - 1] != ' ' && s_[i - 1] != ':'))
        return false;  // every prefix ends in a space or a colon
    static const char* const kPrefixes[] = {"bash: line ", "sh: ", "zsh:"};
    for (const char* p : kPrefixes) {
        const size_t len = std::strlen(p);
        if (i >= len && std::memcmp(s_ + i - len, p, len) == 0 && boundary_before(i - len))
            return true;
    }
    return false;
}

bool Scanner::temp_component(size_t i, size_t& p, size_t& q) const noexcept {
    if (s_[i] == '\\') {  // ...\Temp\ (%TEMP% on Windows), also as JSON text (\\Temp\\)
        if (!(starts_with(i + 1, "Temp\\") || starts_with(i + 1, "TEMP\\") ||
              starts_with(i + 1, "temp\\")))
            return false;
        p = i + 6;
        while (p < n_ && s_[p] == '\\') ++p;
    } else {
        // every prefix starts /t, /v or /p: most slashes are rejected on one byte
        if (i + 1 >= n_ || !(s_[i + 1] == 't' || s_[i + 1] == 'v' || s_[i + 1] == 'p'))
            return false;
        if (i > 0 && is(s_[i - 1], kName) && !escape_letter(i)) return false;
        if (starts_with(i, "/tmp/")) {
            p = i + 5;
        } else if (starts_with(i, "/var/tmp/")) {
            p = i + 9;
        } else if (starts_with(i, "/private/tmp/")) {
            p = i + 13;
        } else if (starts_with(i, "/private/var/tmp/")) {
            p = i + 17;
        } else {
            if (starts_with(i, "/var/folders/")) {
                p = i + 13;
            } else if (starts_with(i, "/private/var/folders/")) {
                p = i + 21;
            } else {
                return false;
            }
            for (int c = 0; c < 2; ++c) {  // /var/folders/X/Y/T/: two components, then T
                size_t e = p;
                while (e < n_ && !is(s_[e], kComponentEnd)) ++e;
                if (e == p || e >= n_ || s_[e] != '/') return false;
                p = e + 1;
            }
            if (!starts_with(p, "T/")) return false;
            p += 2;
        }
    }
    q = p;
    while (q < n_ && !is(s_[q], kComponentEnd)) ++q;
    return q > p;
}

size_t Scanner::json_string_end(size_t k) const noexcept {
    while (k < n_) {
        const uint8_t c = s_[k];
        if (c == '\\') {
            k += 2;
        } else if (c == '"') {
            return k;
        } else {
            ++k;
        }
    }
    return n_;
}

size_t Scanner::json_value_end(size_t v) const noexcept {
    if (v >= n_) return v;
    const uint8_t c = s_[v];
    if (c == '"') {
        const size_t end = json_string_end(v + 1);
        return end < n_ ? end + 1 : v;
    }
    if (c == '{' || c == '[') {
        size_t depth = 0;
        for (size_t k = v; k < n_; ++k) {
            const uint8_t b = s_[k];
            if (b == '"') {
                const size_t end = json_string_end(k + 1);
                if (end >= n_) return v;
                k = end;
            } else if (b == '{' || b == '[') {
                ++depth;
            } else if (b == '}' || b == ']') {
                if (--depth == 0) return k + 1;
            }
        }
        return v;
    }
    size_t k = v;
    while (k < n_ && !is(s_[k], kScalarEnd)) ++k;
    return k;
}

bool Scanner::json_member_value(size_t i, size_t& v, size_t& e) const noexcept {
    if (i > 0 && s_[i - 1] == '\\') return false;  // an escaped quote inside a string
    const size_t end = json_string_end(i + 1);
    if (end >= n_ || !keys_->contains(reinterpret_cast<const char*>(s_ + i + 1), end - i - 1))
        return false;
    size_t m = end + 1;
    while (m < n_ && is(s_[m], kSpace)) ++m;
    if (m >= n_ || s_[m] != ':') return false;
    ++m;
    while (m < n_ && is(s_[m], kSpace)) ++m;
    v = m;
    e = json_value_end(m);
    return e > m;
}

size_t Scanner::at_digits(size_t i) {
    const size_t j = digits_end(i);
    // the word (letters and digits) around the run, and whether it is all hex digits and has
    // a letter, found in the one walk over it (the long hex id test reads them)
    bool word_hex = true, word_letter = false;
    size_t w = i;
    while (w > 0 && alnum(s_[w - 1]) && !escape_letter(w)) {
        --w;
        const uint8_t f = kTables.cls[s_[w]];
        word_hex = word_hex && (f & kHex);
        word_letter = word_letter || (f & kAlpha);
    }
    size_t e = j;
    for (; e < n_; ++e) {
        const uint8_t f = kTables.cls[s_[e]];
        if (!(f & (kDigit | kAlpha))) break;
        word_hex = word_hex && (f & kHex);
        word_letter = word_letter || (f & kAlpha);
    }
    const size_t lo = emitted_;
    const bool starts_number = w == i && boundary_before(i) &&
                               !(i >= 2 && s_[i - 1] == '.' && digit(s_[i - 2]));
    if ((classes_ & kTimestamps) && starts_number) {
        long long end = -1;
        if (j - i == 4 && j < n_ && s_[j] == '-') {
            end = date_time(i);
        } else if (j < n_ && s_[j] == ':') {
            end = time_of_day(i, j);
        }
        if (end > 0) {
            span(i, static_cast<size_t>(end));
            return static_cast<size_t>(end);
        }
    }
    if (classes_ & kHexIds) {
        if (starts_number && s_[i] == '0' && j == i + 1 && e - j >= 5 &&
            (s_[j] == 'x' || s_[j] == 'X')) {
            bool hex = true;
            for (size_t k = j + 1; hex && k < e; ++k) hex = is(s_[k], kHex);
            if (hex && boundary_after(e)) {
                span(i, e);
                return e;
            }
        }
        const size_t len = e - w;
        static const long long kGroupStarts[] = {0, 9, 14, 19, 24};
        int first = -1, last = -1;  // the UUID groups a word of this length can be
        if (len == 8) { first = 0; last = 0; }
        else if (len == 4) { first = 1; last = 3; }
        else if (len == 12) { first = 4; last = 4; }
        for (int g = first; g >= 0 && g <= last; ++g) {
            const long long start = static_cast<long long>(w) - kGroupStarts[g];
            if (start >= static_cast<long long>(lo) && uuid_at(start)) {
                span(static_cast<size_t>(start), static_cast<size_t>(start) + 36);
                return static_cast<size_t>(start) + 36;
            }
        }
        if (len >= 12 && word_hex && word_letter && w >= lo && boundary_before(w) &&
            boundary_after(e)) {
            span(w, e);
            return e;
        }
    }
    if (starts_number) {
        if ((classes_ & kTimestamps) && (j - i == 10 || j - i == 13) && boundary_after(j) &&
            s_[i] == '1' &&
            s_[i + 1] >= '5' && s_[i + 1] <= '9') {
            size_t end = fraction_end(j, false);
            if (!boundary_after(end)) end = j;
            span(i, end);
            return end;
        }
        if (classes_ & kDurations) {
            const long long end = duration(j);
            if (end > 0) {
                size_t start = i;
                if (i > lo && (s_[i - 1] == '+' || s_[i - 1] == '-') && boundary_before(i - 1))
                    start = i - 1;  // the sign
                span(start, static_cast<size_t>(end));
                return static_cast<size_t>(end);
            }
        }
        if (boundary_after(j) && (((classes_ & kPids) && pid(i)) ||
                       ((classes_ & kLineCounters) && line_counter(i, j)))) {
            span(i, j);
            return j;
        }
        size_t key, key_len;
        if ((classes_ & kDurationKeys) && e == j) {
            const long long end = json_number_end(j);
            const size_t start = i > 0 && s_[i - 1] == '-' ? i - 1 : i;  // the sign
            if (end > 0 && start >= lo && member_key(start, key, key_len) &&
                key_matches(s_ + key, key_len, false)) {
                span(start, static_cast<size_t>(end));
                return static_cast<size_t>(end);
            }
        }
        if ((classes_ & kIdCounters) && e == j && j < n_ && s_[j] == '"') {
            const long long start = counter_start(i);
            if (start >= static_cast<long long>(lo) &&
                member_key(static_cast<size_t>(start) - 1, key, key_len) &&
                key_matches(s_ + key, key_len, true)) {
                span(i, j);
                return j;
            }
        }
    }
    if (!signature_) return e;  // the rest of the word anchors nothing new
    // signature mode: every remaining number goes
    bool is_number;
    if (e - w > 2 && s_[w] == '0' && (s_[w + 1] == 'x' || s_[w + 1] == 'X')) {
        is_number = true;
        for (size_t k = w + 2; is_number && k < e; ++k) is_number = is(s_[k], kHex);
    } else {
        is_number = false;
    }
    if (!is_number) {
        is_number = true;
        for (size_t k = w; is_number && k < e; ++k) is_number = is(s_[k], kHex);
    }
    if (is_number && w >= lo) {
        number(w, e);
        return e;
    }
    replace(i, j, "#", 1);  // a digit run inside another word: py3 -> py#
    return j;
}

bool Scanner::run() {
    size_t pos = 0;
    for (;;) {
        const size_t i = skip(pos);
        if (i >= n_) break;
        const uint8_t c = s_[i];
        if (digit(c)) {
            pos = at_digits(i);
        } else if (is(c, kSpace)) {  // signature mode: one space between words, none at ends
            size_t j = i + 1;
            while (j < n_ && is(s_[j], kSpace)) ++j;
            flush(i);
            if (!out_.empty() && j < n_) {
                replace(i, j, " ", 1);
            } else {
                replace(i, j, "", 0);
            }
            pos = j;
        } else if (c == '"') {
            size_t v, e;
            if (json_member_value(i, v, e)) {
                span(v, e);
                pos = e;
            } else {
                pos = i + 1;
            }
        } else {  // '/' or '\'
            size_t p, q;
            if ((classes_ & kTempPaths) && temp_component(i, p, q)) {
                span(p, q);
                pos = q;
            } else {
                pos = i + 1;
            }
        }
    }
    if (!changed_ && !signature_) return false;
    flush(n_);
    return true;
}

}  // namespace

bool AnswerKeys::contains(const char* key, size_t length) const noexcept {
    for (const std::string& k : keys)
        if (k.size() == length && std::memcmp(k.data(), key, length) == 0) return true;
    return false;
}

bool scan_answer(const char* data, size_t length, uint32_t classes, const AnswerKeys* keys,
                 bool signature, std::string& out) {
    static const char kNothing = 0;
    Scanner scanner(reinterpret_cast<const uint8_t*>(data ? data : &kNothing), data ? length : 0,
                    classes, keys, signature, out);
    return scanner.run();
}

bool is_empty_answer(const void* data, size_t length) noexcept {
    const auto* s = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < length; ++i)
        if (!is(s[i], kSpace)) return false;
    return true;
}

namespace {

// Per-thread scratch: the batch path scans without the GIL. Over 1 MiB it is released after
// the call, as the canonicalizer's is.
constexpr size_t kScratchKeep = size_t{1} << 20;

std::string& scratch() {
    static thread_local std::string s;
    return s;
}

void trim(std::string& s) {
    if (s.capacity() > kScratchKeep) std::string().swap(s);
}

}  // namespace

bool answer_digest(const void* data, size_t length, uint32_t classes, const AnswerKeys* keys,
                   Hash128& digest) {
    if (is_empty_answer(data, length)) return false;
    std::string& out = scratch();
    bool scanned;
    try {
        scanned = scan_answer(static_cast<const char*>(data), length, classes, keys, false, out);
    } catch (const std::bad_alloc&) {
        scanned = false;  // no memory for a copy: the payload as it is
    }
    digest = scanned ? xxh3_128(out.data(), out.size()) : xxh3_128(data, length);
    if (scanned) trim(out);
    return true;
}

uint64_t error_signature_key(const char* data, size_t length, uint32_t classes,
                             const AnswerKeys* keys) {
    std::string& out = scratch();
    try {
        scan_answer(data, length, classes, keys, true, out);
    } catch (const std::bad_alloc&) {  // no memory for the scratch: the raw text
        return xxh3_64(data, data ? length : 0);
    }
    const uint64_t key = xxh3_64(out.data(), out.size());
    trim(out);
    return key;
}

// -- argument mode (tripwire/identity/answer.py scan_argument) --------------------------------

namespace {

inline bool query_name(uint8_t c) noexcept {
    return alnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || c == '%' || c == '[' ||
           c == ']';
}
inline bool query_end(uint8_t c) noexcept {
    return is(c, kSpace) || c == '&' || c == '#' || c == '"' || c == '\'' || c == '`' ||
           c == '<' || c == '>' || c == ';' || c == '|' || c == '(' || c == ')' || c == '\\';
}
inline bool word_byte(uint8_t c) noexcept { return alnum(c) || c == '_'; }

}  // namespace

bool Scanner::sleep_duration(size_t i, size_t& k, size_t& d) const noexcept {
    if (i > 0 && (word_byte(s_[i - 1]) || s_[i - 1] == '.' || s_[i - 1] == '-')) return false;
    k = i + 5;
    while (k < n_ && (s_[k] == ' ' || s_[k] == '\t')) ++k;
    if (k == i + 5 || k >= n_ || !digit(s_[k])) return false;
    d = digits_end(k);
    if (d + 1 < n_ && s_[d] == '.' && digit(s_[d + 1])) d = digits_end(d + 1);
    if (d < n_ && (s_[d] == 's' || s_[d] == 'm' || s_[d] == 'h' || s_[d] == 'd')) ++d;
    return !(d < n_ && (word_byte(s_[d]) || s_[d] == '.'));
}

bool Scanner::query_value(size_t eq, size_t& v, size_t& e, std::string& value) const {
    size_t b = eq;
    while (b > 0 && query_name(s_[b - 1])) --b;
    if (b == eq || b == 0 || (s_[b - 1] != '?' && s_[b - 1] != '&')) return false;
    v = e = eq + 1;
    while (e < n_ && !query_end(s_[e])) ++e;
    return e > v && scan_answer(reinterpret_cast<const char*>(s_) + v, e - v, kQueryClasses,
                                nullptr, false, value);
}

bool Scanner::ends_with(size_t k, const char* p, size_t len) const noexcept {
    return k >= len && std::memcmp(s_ + k - len, p, len) == 0;
}

bool Scanner::token_start(size_t k) const noexcept {
    return k == 0 || !is(s_[k - 1], kName) || escape_letter(k);
}

bool Scanner::temp_prefix_ends(size_t t) const noexcept {
    static const char* const kPrefixes[] = {"/tmp/", "/var/tmp/", "/private/tmp/",
                                            "/private/var/tmp/"};
    for (const char* p : kPrefixes) {
        const size_t len = std::strlen(p);
        if (ends_with(t, p, len) && token_start(t - len)) return true;
    }
    if (ends_with(t, "/T/", 3)) {  // /var/folders/X/Y/T/
        size_t k = t - 3;
        for (int i = 0; i < 2; ++i) {  // Y, then X: non-empty components, each after a '/'
            size_t c = k;
            while (c > 0 && !is(s_[c - 1], kComponentEnd)) --c;
            if (c == k || c == 0 || s_[c - 1] != '/') return false;
            k = c - 1;
        }
        ++k;  // just past the '/' before X
        return (ends_with(k, "/var/folders/", 13) && token_start(k - 13)) ||
               (ends_with(k, "/private/var/folders/", 21) && token_start(k - 21));
    }
    size_t b = t;
    while (b > 0 && s_[b - 1] == '\\') --b;  // ...\Temp\ (also doubled, as in JSON text)
    return b < t && b >= 5 && s_[b - 5] == '\\' &&
           (std::memcmp(s_ + b - 4, "Temp", 4) == 0 || std::memcmp(s_ + b - 4, "TEMP", 4) == 0 ||
            std::memcmp(s_ + b - 4, "temp", 4) == 0);
}

bool Scanner::temp_name(size_t t, size_t& r, size_t& e) const noexcept {
    if (!temp_prefix_ends(t)) return false;
    r = t + 3;
    if (r < n_ && s_[r] == '.') ++r;
    if (r < n_ && s_[r] == '_') return false;  // tmp_ then a word: a name someone chose
    bool has_digit = false;
    e = r;
    while (e < n_ && word_byte(s_[e])) has_digit |= digit(s_[e++]);
    return has_digit && e - r >= kTempRandomMin && e - r <= kTempRandomMax;
}

size_t Scanner::argument_anchor(size_t a) const noexcept {
#if defined(__SSE2__)
    const __m128i eq = _mm_set1_epi8('='), p = _mm_set1_epi8('p');
    for (; a + 16 <= n_; a += 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s_ + a));
        const int bits = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, eq), _mm_cmpeq_epi8(v, p)));
        if (bits) return a + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(bits)));
    }
#endif
    while (a < n_ && s_[a] != '=' && s_[a] != 'p') ++a;
    return a;
}

bool Scanner::run_argument() {
    std::string value;  // a query value's own scan (query values are rare: no scratch kept)
    size_t done = 0;    // the end of the last replacement
    for (size_t a = argument_anchor(0); a < n_; a = argument_anchor(a + 1)) {
        size_t start, end;
        if (s_[a] == '=') {
            if (query_value(a, start, end, value) && start >= done) {
                replace(start, end, value.data(), value.size());
                done = end;
            }
            continue;
        }
        bool found;
        if (a >= 4 && std::memcmp(s_ + a - 4, "slee", 4) == 0) {
            found = sleep_duration(a - 4, start, end);
        } else if (a >= 2 && s_[a - 2] == 't' && s_[a - 1] == 'm') {
            found = temp_name(a - 2, start, end);
        } else {
            continue;
        }
        if (found && start >= done) {
            replace(start, end, &kPlaceholder, 1);
            done = end;
        }
    }
    if (!changed_) return false;
    flush(n_);
    return true;
}

bool scan_argument(const char* data, size_t length, std::string& out) {
    if (!argument_candidate(data, length)) return false;
    Scanner scanner(reinterpret_cast<const uint8_t*>(data), length, 0, nullptr, false, out);
    return scanner.run_argument();
}

}  // namespace tw
