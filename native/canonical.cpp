// Canonical call keys: see canonical.h and tripwire/_reference.py (the executable spec).
#include "canonical.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "answer.h"
#include "hash.h"

namespace tw {

namespace {

// SPEC §2.1: the fixed list of path words, packed little-endian into two 64-bit words each so
// that a candidate is matched with integer compares, not string compares.
struct PackedWord {
    uint32_t len;
    uint64_t lo, hi;
};

constexpr PackedWord pack(const char* w) {
    PackedWord p{0, 0, 0};
    while (w[p.len]) ++p.len;
    for (uint32_t i = 0; i < p.len; ++i) {
        const uint64_t c = static_cast<unsigned char>(w[i]);
        if (i < 8) p.lo |= c << (8 * i);
        else p.hi |= c << (8 * (i - 8));
    }
    return p;
}

constexpr PackedWord kPathWords[] = {
    pack("path"), pack("paths"), pack("file"), pack("files"), pack("filename"),
    pack("filepath"), pack("pathname"), pack("dirname"), pack("foldername"), pack("dir"),
    pack("dirs"), pack("directory"), pack("folder"), pack("cwd"), pack("root"), pack("target"),
    pack("source"), pack("destination"), pack("src"), pack("dst"),
};
constexpr uint32_t kLongestPathWord = 11;  // "destination"

// The lower-cased word a+b (b may be empty) against the list. Only ASCII letters can match.
bool is_path_word(const char* a, size_t alen, const char* b, size_t blen) noexcept {
    const size_t n = alen + blen;
    if (n < 3 || n > kLongestPathWord) return false;
    uint64_t lo = 0, hi = 0;
    for (size_t i = 0; i < n; ++i) {
        const unsigned char c = static_cast<unsigned char>(i < alen ? a[i] : b[i - alen]);
        const unsigned char l = c | 0x20;  // ASCII lower case for letters
        if (l < 'a' || l > 'z') return false;
        if (i < 8) lo |= static_cast<uint64_t>(l) << (8 * i);
        else hi |= static_cast<uint64_t>(l) << (8 * (i - 8));
    }
    for (const PackedWord& w : kPathWords)
        if (w.lo == lo && w.hi == hi && w.len == n) return true;
    return false;
}

inline bool is_upper(unsigned char c) noexcept { return c >= 'A' && c <= 'Z'; }
inline bool is_lower(unsigned char c) noexcept { return c >= 'a' && c <= 'z'; }
inline bool is_digit(unsigned char c) noexcept { return c >= '0' && c <= '9'; }
inline bool is_separator(unsigned char c) noexcept {
    return c == '_' || c == '-' || c == '.' || c == ' ';
}
inline bool is_ws(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Length of a valid UTF-8 sequence starting at s[0] (s[0] >= 0x80), or 0 if invalid. Exactly
// Python's strict decoder: no overlongs, no surrogates, nothing above U+10FFFF.
size_t utf8_sequence(const unsigned char* s, size_t avail) noexcept {
    const unsigned char c = s[0];
    auto cont = [&](size_t i) { return i < avail && (s[i] & 0xC0) == 0x80; };
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (avail < 2) return 0;
        const unsigned char d = s[1];
        if (c == 0xE0 && d < 0xA0) return 0;             // overlong
        if (c == 0xED && d > 0x9F) return 0;             // surrogates
        return (cont(1) && cont(2)) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (avail < 2) return 0;
        const unsigned char d = s[1];
        if (c == 0xF0 && d < 0x90) return 0;             // overlong
        if (c == 0xF4 && d > 0x8F) return 0;             // above U+10FFFF
        return (cont(1) && cont(2) && cont(3)) ? 4 : 0;
    }
    return 0;
}

void append_utf8(Buffer& out, uint32_t cp) {
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = static_cast<char>(cp); n = 1;
    } else if (cp < 0x800) {
        b[0] = static_cast<char>(0xC0 | (cp >> 6));
        b[1] = static_cast<char>(0x80 | (cp & 0x3F)); n = 2;
    } else if (cp < 0x10000) {
        b[0] = static_cast<char>(0xE0 | (cp >> 12));
        b[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        b[2] = static_cast<char>(0x80 | (cp & 0x3F)); n = 3;
    } else {
        b[0] = static_cast<char>(0xF0 | (cp >> 18));
        b[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        b[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        b[3] = static_cast<char>(0x80 | (cp & 0x3F)); n = 4;
    }
    out.put(b, n);
}

// Offset of the first byte at or after `i` that a JSON string scan must look at: '"', '\\',
// a control character or a non-ASCII byte (or `end`).
inline size_t scan_plain(const unsigned char* s, size_t i, size_t end) noexcept {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i backslash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20);
    for (; i + 16 <= end; i += 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        // signed compare: bytes >= 0x80 are negative, so "< 0x20" also catches non-ASCII
        const __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                         _mm_cmplt_epi8(v, space));
        const int mask = _mm_movemask_epi8(hit);
        if (mask) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
    }
#endif
    for (; i < end; ++i) {
        const unsigned char c = s[i];
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) return i;
    }
    return end;
}

void put_int(Buffer& out, int64_t v) {
    char b[24];
    size_t n = 0;
    const bool negative = v < 0;
    uint64_t u = negative ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
    do { b[sizeof b - 1 - n++] = static_cast<char>('0' + u % 10); u /= 10; } while (u);
    if (negative) b[sizeof b - 1 - n++] = '-';
    out.put(b + sizeof b - n, n);
}

int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool read_hex4(const char* s, uint32_t& v) noexcept {
    v = 0;
    for (int i = 0; i < 4; ++i) {
        const int h = hex_value(s[i]);
        if (h < 0) return false;
        v = (v << 4) | static_cast<uint32_t>(h);
    }
    return true;
}

// Byte order of UTF-8 is code-point order, as the reference sorts. Keys are short: an inline
// loop beats a memcmp call.
inline int compare_bytes(std::string_view a, std::string_view b) noexcept {
    const size_t n = a.size() < b.size() ? a.size() : b.size();
    for (size_t i = 0; i < n; ++i) {
        const unsigned char x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
        if (x != y) return x < y ? -1 : 1;
    }
    return a.size() == b.size() ? 0 : (a.size() < b.size() ? -1 : 1);
}

// Marks a top-level path value in the rest form (raw 0x01 never occurs in canonical JSON).
constexpr char kRestPlaceholder = '\x01';

// Up to 8 bytes, little-endian, zero-padded; never reads past p + n.
inline uint64_t load_le(const char* p, size_t n) noexcept {
    uint64_t v = 0;
    if (n == 8) {
        std::memcpy(&v, p, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        std::memcpy(&a, p, 4);
        std::memcpy(&b, p + n - 4, 4);
        v = a | (static_cast<uint64_t>(b) << (8 * (n - 4)));
    } else {
        for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
    }
    return v;
}

// A cheap fingerprint of a byte string (length, head, tail): picks a memo slot and rejects
// most mismatches before the byte comparison that decides.
inline uint64_t fingerprint(const char* p, size_t n) noexcept {
    const uint64_t head = load_le(p, n < 8 ? n : 8);
    const uint64_t tail = n > 8 ? load_le(p + n - 8, 8) : 0;
    const uint64_t mid = n > 16 ? load_le(p + n / 2 - 4, 8) : 0;
    uint64_t h = (head * 0x9E3779B97F4A7C15ULL) ^ (tail * 0xC2B2AE3D27D4EB4FULL) ^
                 (mid * 0x165667B19E3779F9ULL) ^ n;
    h ^= h >> 29;
    return h * 0xBF58476D1CE4E5B9ULL;
}

// Whether Go's path.Clean would change `p` (most paths are already clean: skip the rewrite).
// Looks only at element starts: "//", a "." or ".." element, or a trailing '/'.
bool needs_cleaning(const char* p, size_t n) noexcept {
    if (n == 0) return true;
    const char* s = p;
    const char* end = p + n;
    if (*s == '/') {
        ++s;
        if (s < end && *s == '/') return true;
    }
    while (s < end) {
        if (*s == '.' && (s + 1 == end || s[1] == '/' ||
                          (s[1] == '.' && (s + 2 == end || s[2] == '/'))))
            return true;
        const char* slash = static_cast<const char*>(std::memchr(s, '/', static_cast<size_t>(end - s)));
        if (slash == nullptr) return false;
        if (slash + 1 == end || slash[1] == '/') return true;
        s = slash + 1;
    }
    return false;
}

}  // namespace

void Buffer::grow(size_t need) {
    size_t cap = cap_ ? cap_ * 2 : 256;
    while (cap < need) cap *= 2;
    std::unique_ptr<char[]> p(new char[cap]);
    if (size_) std::memcpy(p.get(), p_.get(), size_);
    p_.swap(p);
    cap_ = cap;
}

// ---------------------------------------------------------------------------------------------
// Path-shaped keys, cleaning, suffix relation

bool is_path_key(const char* key, size_t len) noexcept {
    // SPEC §10.10, §10.22: words split on _ - . space, then only at lower->upper case changes,
    // acronym ends (HTTPS|Path) and letter/digit changes; any other byte belongs to the word it
    // is in (`a/path`, `$path` are one word each). Keep the last two words not digit-only.
    const char* w1 = nullptr; size_t l1 = 0;   // second-to-last word
    const char* w2 = nullptr; size_t l2 = 0;   // last word
    const auto* s = reinterpret_cast<const unsigned char*>(key);
    auto alpha = [](unsigned char c) { return is_upper(c) || is_lower(c); };
    size_t start = 0;
    bool digits = true;  // the open word holds digits only (so far)
    bool open = false;
    auto close = [&](size_t end) {
        if (!digits) {
            w1 = w2; l1 = l2;
            w2 = key + start; l2 = end - start;
        }
    };
    for (size_t i = 0; i < len; ++i) {
        const unsigned char c = s[i];
        if (is_separator(c)) {
            if (open) close(i);
            open = false;
            continue;
        }
        if (open) {
            const unsigned char p = s[i - 1];
            const bool split =
                (is_lower(p) && is_upper(c)) ||
                (is_upper(p) && is_upper(c) && i + 1 < len && is_lower(s[i + 1])) ||
                (alpha(p) && is_digit(c)) || (is_digit(p) && alpha(c));
            if (split) {
                close(i);
                open = false;
            }
        }
        if (!open) {
            start = i;
            digits = true;
            open = true;
        }
        if (!is_digit(c)) digits = false;
    }
    if (open) close(len);
    if (w2 == nullptr) return false;
    if (is_path_word(w2, l2, nullptr, 0)) return true;
    return w1 != nullptr && is_path_word(w1, l1, w2, l2);
}

void clean_path(const char* in, size_t len, Buffer& out) {
    if (!needs_cleaning(in, len)) { out.put(in, len); return; }
    const size_t start = out.size();
    if (len == 0) { out.put('.'); return; }
    const bool rooted = in[0] == '/';
    if (rooted) out.put('/');
    const size_t base = out.size();   // out[start..base) is the root, never backtracked over
    size_t dotdot = base;             // output before this is a run of leading ".." elements
    size_t r = 0;
    while (r < len) {
        if (in[r] == '/') { ++r; continue; }
        size_t e = r;
        while (e < len && in[e] != '/') ++e;
        const size_t n = e - r;
        if (n == 1 && in[r] == '.') {
            // drop "."
        } else if (n == 2 && in[r] == '.' && in[r + 1] == '.') {
            if (out.size() > dotdot) {
                // back up over the last element
                size_t w = out.size();
                while (w > dotdot && out[w - 1] != '/') --w;
                out.truncate(w > dotdot ? w - 1 : dotdot);
            } else if (!rooted) {
                if (out.size() > base) out.put('/');
                out.put("..", 2);
                dotdot = out.size();
            }
            // ".." directly under the root is dropped
        } else {
            if (out.size() > base) out.put('/');
            out.put(in + r, n);
        }
        r = e;
    }
    if (out.size() == start) out.put('.');
}

std::string clean_path_string(const char* path, size_t len) {
    Buffer b;
    clean_path(path, len, b);
    return std::string(b.data() ? b.data() : "", b.size());
}

bool paths_suffix_match(std::string_view a, std::string_view b) noexcept {
    if (a == b) return true;
    if (a == "." || b == ".") return false;
    if (a.size() < b.size()) std::swap(a, b);
    return a.size() > b.size() && a[a.size() - b.size() - 1] == '/' &&
           a.compare(a.size() - b.size(), b.size(), b) == 0;
}

// ---------------------------------------------------------------------------------------------
// The single pass: parse and write canonical bytes as we go.

inline void Canonicalizer::skip_ws() noexcept {
    if (pos_ < end_ && static_cast<unsigned char>(in_[pos_]) > ' ') return;  // usually none
    size_t p = pos_;
    const size_t end = end_;
    while (p < end && is_ws(in_[p])) ++p;
    pos_ = p;
}

bool Canonicalizer::path_key(std::string_view key) noexcept {
    const size_t n = key.size();
    if (n == 0 || n > 16) return is_path_key(key.data(), n);
    const uint64_t lo = load_le(key.data(), n < 8 ? n : 8);
    const uint64_t hi = n > 8 ? load_le(key.data() + 8, n - 8) : 0;
    const size_t slot = static_cast<size_t>(((lo ^ (hi * 0xC2B2AE3D27D4EB4FULL) ^ n) *
                                             0x9E3779B97F4A7C15ULL) >> 58);
    PathKeyMemo& m = path_key_memo_[slot];
    if (m.len == n && m.lo == lo && m.hi == hi) return m.path;
    m.lo = lo;
    m.hi = hi;
    m.len = static_cast<uint32_t>(n);
    m.path = is_path_key(key.data(), n);
    return m.path;
}

bool Canonicalizer::parse(const char* args, size_t len) {
    in_ = args; pos_ = 0; end_ = len;
    members_.clear();
    keys_.clear();
    path_spans_.clear();
    if (members_.capacity() > kKeepScratch / sizeof(Member)) std::vector<Member>().swap(members_);
    if (flat_object(args, len)) return true;
    skip_ws();
    if (pos_ >= end_ || in_[pos_] != '{') return false;  // not an object: raw bytes
    if (!parse_object(1)) return false;
    skip_ws();
    return pos_ == end_;
}

bool Canonicalizer::flat_object(const char* in, size_t len) {
    struct Flat {
        const char* key;
        uint32_t key_len;
        const char* value;
        uint32_t value_len;
        char type;  // 's' string, 'n' integer, 'l' literal
        bool path;  // a string under a path-shaped key
    };
    constexpr size_t kMax = 16;
    Flat m[kMax];
    size_t n = 0;
    const auto* s = reinterpret_cast<const unsigned char*>(in);
    const size_t end = len;
    size_t p = 0;
    auto ws = [&]() { while (p < end && is_ws(in[p])) ++p; };
    // an escape-free string at p (the opening quote); false on anything else
    auto string = [&](const char*& out, uint32_t& out_len) {
        const size_t begin = ++p;
        for (;;) {
            p = scan_plain(s, p, end);
            if (p >= end) return false;
            const unsigned char c = s[p];
            if (c == '"') break;
            if (c < 0x80) return false;  // a backslash or a control character
            const size_t k = utf8_sequence(s + p, end - p);
            if (k == 0) return false;
            p += k;
        }
        out = in + begin;
        out_len = static_cast<uint32_t>(p - begin);
        ++p;
        return true;
    };
    ws();
    if (p >= end || in[p] != '{') return false;
    ++p;
    ws();
    if (p < end && in[p] == '}') {
        ++p;
    } else {
        for (;;) {
            if (n == kMax || p >= end || in[p] != '"') return false;
            Flat& f = m[n];
            if (!string(f.key, f.key_len)) return false;
            ws();
            if (p >= end || in[p] != ':') return false;
            ++p;
            ws();
            if (p >= end) return false;
            const char c = in[p];
            if (c == '"') {
                if (!string(f.value, f.value_len)) return false;
                f.type = 's';
            } else if (c == '-' || is_digit(static_cast<unsigned char>(c))) {
                const size_t begin = p;
                if (c == '-') ++p;
                if (p >= end || !is_digit(s[p])) return false;
                if (s[p] == '0') ++p;
                else while (p < end && is_digit(s[p])) ++p;
                if (p < end && (in[p] == '.' || in[p] == 'e' || in[p] == 'E')) return false;
                f.value = in + begin;
                f.value_len = static_cast<uint32_t>(p - begin);
                f.type = 'n';
            } else {
                const size_t k = c == 'f' ? 5 : 4;
                const char* word = c == 't' ? "true" : c == 'f' ? "false" : c == 'n' ? "null" : nullptr;
                if (word == nullptr || end - p < k || std::memcmp(in + p, word, k) != 0) return false;
                f.value = in + p;
                f.value_len = static_cast<uint32_t>(k);
                f.type = 'l';
                p += k;
            }
            ++n;
            ws();
            if (p >= end) return false;
            if (in[p] == ',') { ++p; ws(); continue; }
            if (in[p] == '}') { ++p; break; }
            return false;
        }
    }
    ws();
    if (p != end) return false;
    // A string with a volatile part is written by the general parser (escaping the
    // placeholder); a path string is scanned after cleaning there, so any candidate goes.
    for (size_t k = 0; k < n; ++k) {
        Flat& f = m[k];
        if (f.type != 's') continue;
        f.path = path_key(std::string_view(f.key, f.key_len));
        if (!argument_candidate(f.value, f.value_len)) continue;
        if (f.path || scan_argument(f.value, f.value_len, scanned_)) return false;
    }
    // Sort by key (stable insertion sort), keeping the last of duplicate keys (SPEC §10.9).
    uint8_t order[kMax];
    size_t bound = 2;
    for (size_t i = 0; i < n; ++i) {
        order[i] = static_cast<uint8_t>(i);
        bound += m[i].key_len + m[i].value_len + 5;  // quotes, colon, comma, one exponent digit
    }
    auto key = [&](uint8_t i) { return std::string_view(m[i].key, m[i].key_len); };
    for (size_t i = 1; i < n; ++i) {
        const uint8_t x = order[i];
        size_t j = i;
        while (j > 0 && compare_bytes(key(x), key(order[j - 1])) < 0) { order[j] = order[j - 1]; --j; }
        order[j] = x;
    }
    // Write the canonical form straight from the input spans.
    char* w = out_.extend(bound + 8);
    char* const base = w - out_.size();
    *w++ = '{';
    bool first = true;
    for (size_t k = 0; k < n; ++k) {
        if (k + 1 < n && compare_bytes(key(order[k]), key(order[k + 1])) == 0) continue;
        const Flat& f = m[order[k]];
        if (!first) *w++ = ',';
        first = false;
        *w++ = '"';
        std::memcpy(w, f.key, f.key_len);
        w += f.key_len;
        *w++ = '"';
        *w++ = ':';
        if (f.type == 's') {
            const size_t value_start = static_cast<size_t>(w - base);
            *w++ = '"';
            const bool path = f.path;
            if (path && needs_cleaning(f.value, f.value_len)) {
                cleaned_.clear();
                clean_path(f.value, f.value_len, cleaned_);
                std::memcpy(w, cleaned_.data(), cleaned_.size());
                w += cleaned_.size();
            } else {
                std::memcpy(w, f.value, f.value_len);
                w += f.value_len;
            }
            *w++ = '"';
            if (path)  // the repeat relation suffix-matches top-level path strings
                path_spans_.emplace_back(static_cast<uint32_t>(value_start),
                                         static_cast<uint32_t>(static_cast<size_t>(w - base) - value_start));
        } else if (f.type == 'n') {
            // an integer: -0 is 0; trailing zeros become the exponent
            const char* d = f.value;
            size_t dl = f.value_len;
            const bool negative = *d == '-';
            if (negative) { ++d; --dl; }
            size_t last = dl;
            while (last > 0 && d[last - 1] == '0') --last;
            if (last == 0) {
                *w++ = '0';
            } else {
                if (negative) *w++ = '-';
                std::memcpy(w, d, last);
                w += last;
                const size_t zeros = dl - last;
                if (zeros) {
                    *w++ = 'e';
                    char digits[20];
                    size_t nd = 0;
                    for (size_t z = zeros; z; z /= 10) digits[nd++] = static_cast<char>('0' + z % 10);
                    while (nd) *w++ = digits[--nd];
                }
            }
        } else {
            std::memcpy(w, f.value, f.value_len);
            w += f.value_len;
        }
    }
    *w++ = '}';
    out_.commit(w);
    return true;
}

bool Canonicalizer::read_string(Buffer& decoded, std::string_view& out, bool& plain,
                                bool& in_input) {
    const size_t begin = pos_ + 1;  // after the opening quote
    const auto* s = reinterpret_cast<const unsigned char*>(in_);
    const size_t end = end_;
    size_t p = begin;
    // Fast path: no escapes -> the bytes stay in the input and need no escaping on output.
    for (;;) {
        p = scan_plain(s, p, end);
        if (p >= end) return false;
        const unsigned char c = s[p];
        if (c == '"') {
            out = std::string_view(in_ + begin, p - begin);
            plain = in_input = true;
            pos_ = p + 1;
            return true;
        }
        if (c == '\\') break;
        if (c < 0x20) return false;
        const size_t n = utf8_sequence(s + p, end - p);
        if (n == 0) return false;
        p += n;
    }
    pos_ = p;
    // Slow path: decode escapes.
    const size_t off = decoded.size();
    decoded.put(in_ + begin, pos_ - begin);
    plain = true;
    while (pos_ < end_) {
        const size_t run = scan_plain(s, pos_, end_);
        decoded.put(in_ + pos_, run - pos_);
        pos_ = run;
        if (pos_ >= end_) return false;
        const unsigned char c = s[pos_];
        if (c == '"') {
            out = decoded.view(off, decoded.size() - off);
            in_input = false;
            ++pos_;
            return true;
        }
        if (c < 0x20) return false;
        if (c >= 0x80) {
            const size_t n = utf8_sequence(s + pos_, end_ - pos_);
            if (n == 0) return false;
            decoded.put(in_ + pos_, n);
            pos_ += n;
            continue;
        }
        // a backslash
        if (pos_ + 1 >= end_) return false;
        const char e = in_[pos_ + 1];
        pos_ += 2;
        switch (e) {
            case '"': decoded.put('"'); plain = false; break;
            case '\\': decoded.put('\\'); plain = false; break;
            case '/': decoded.put('/'); break;
            case 'b': decoded.put('\b'); plain = false; break;
            case 'f': decoded.put('\f'); plain = false; break;
            case 'n': decoded.put('\n'); plain = false; break;
            case 'r': decoded.put('\r'); plain = false; break;
            case 't': decoded.put('\t'); plain = false; break;
            case 'u': {
                uint32_t cp;
                if (end_ - pos_ < 4 || !read_hex4(in_ + pos_, cp)) return false;
                pos_ += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // lone low surrogate
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t lo;
                    if (end_ - pos_ < 6 || in_[pos_] != '\\' || in_[pos_ + 1] != 'u' ||
                        !read_hex4(in_ + pos_ + 2, lo) || lo < 0xDC00 || lo > 0xDFFF)
                        return false;  // lone high surrogate: not encodable as UTF-8
                    pos_ += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                if (cp < 0x20 || cp == '"' || cp == '\\') plain = false;
                append_utf8(decoded, cp);
                break;
            }
            default: return false;
        }
    }
    return false;
}

void Canonicalizer::emit_string(std::string_view s, bool plain) {
    if (plain) {
        out_.put_quoted(s.data(), s.size());
        return;
    }
    out_.put('"');
    size_t run = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        out_.put(s.data() + run, i - run);
        run = i + 1;
        if (c == '"') {
            out_.put("\\\"", 2);
        } else if (c == '\\') {
            out_.put("\\\\", 2);
        } else {
            static const char kHex[] = "0123456789abcdef";
            const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
            out_.put(esc, 6);
        }
    }
    out_.put(s.data() + run, s.size() - run);
    out_.put('"');
}

void Canonicalizer::emit_value(std::string_view s, bool plain) {
    if (scan_argument(s.data(), s.size(), scanned_))
        emit_string(scanned_, false);  // the placeholder is escaped
    else
        emit_string(s, plain);
}

void Canonicalizer::emit_cleaned(std::string_view s, bool plain) {
    if (!needs_cleaning(s.data(), s.size())) { emit_value(s, plain); return; }
    cleaned_.clear();
    clean_path(s.data(), s.size(), cleaned_);
    emit_value(cleaned_.view(0, cleaned_.size()), plain);
}

bool Canonicalizer::parse_value(int depth, Context ctx) {
    skip_ws();
    if (pos_ >= end_) return false;
    const char c = in_[pos_];
    switch (c) {
        case '"': {
            strings_.clear();
            std::string_view v;
            bool plain, in_input;
            if (!read_string(strings_, v, plain, in_input)) return false;
            if (ctx == kPlain) emit_value(v, plain);
            else emit_cleaned(v, plain);  // SPEC §10.9: strings under path-shaped keys
            return true;
        }
        case '{': return parse_object(depth);
        case '[': return parse_array(depth, ctx == kPathValue);
        case 't':
            if (end_ - pos_ < 4 || std::memcmp(in_ + pos_, "true", 4) != 0) return false;
            pos_ += 4; out_.put("true", 4); return true;
        case 'f':
            if (end_ - pos_ < 5 || std::memcmp(in_ + pos_, "false", 5) != 0) return false;
            pos_ += 5; out_.put("false", 5); return true;
        case 'n':
            if (end_ - pos_ < 4 || std::memcmp(in_ + pos_, "null", 4) != 0) return false;
            pos_ += 4; out_.put("null", 4); return true;
        default:
            if (c == '-' || is_digit(static_cast<unsigned char>(c))) return parse_number();
            return false;
    }
}

bool Canonicalizer::parse_number() {
    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?  -> exact decimal, one spelling:
    // digits without leading/trailing zeros, then e<exponent> unless 0; zero is "0".
    // Works on locals: writes to out_ (char) could alias the members, forcing reloads.
    const auto* s = reinterpret_cast<const unsigned char*>(in_);
    const char* in = in_;
    const size_t end = end_;
    size_t p = pos_;
    bool negative = false;
    if (s[p] == '-') { negative = true; ++p; }
    if (p >= end || !is_digit(s[p])) return false;
    const size_t int_begin = p;
    if (s[p] == '0') {
        ++p;
    } else {
        while (p < end && is_digit(s[p])) ++p;
    }
    const size_t int_end = p;
    size_t frac_begin = p, frac_end = p;
    if (p < end && s[p] == '.') {
        ++p;
        frac_begin = p;
        while (p < end && is_digit(s[p])) ++p;
        frac_end = p;
        if (frac_end == frac_begin) return false;
    }
    int64_t exponent = 0;
    if (p < end && (s[p] == 'e' || s[p] == 'E')) {
        ++p;
        bool exp_negative = false;
        if (p < end && (s[p] == '+' || s[p] == '-')) { exp_negative = s[p] == '-'; ++p; }
        if (p >= end || !is_digit(s[p])) return false;
        while (p < end && s[p] == '0') ++p;
        const size_t sig_begin = p;
        while (p < end && is_digit(s[p])) {
            if (p - sig_begin >= static_cast<size_t>(kMaxExponentDigits)) return false;
            exponent = exponent * 10 + (s[p] - '0');
            ++p;
        }
        if (exp_negative) exponent = -exponent;
    }
    pos_ = p;
    if (frac_end == frac_begin && exponent == 0) {
        // A plain integer, the common case: trailing zeros become the exponent.
        size_t last = int_end;
        while (last > int_begin && in[last - 1] == '0') --last;
        if (last == int_begin) { out_.put('0'); return true; }
        if (negative) out_.put('-');
        out_.put(in + int_begin, last - int_begin);
        if (last != int_end) {
            out_.put('e');
            put_int(out_, static_cast<int64_t>(int_end - last));
        }
        return true;
    }
    // The digit string is int part + fraction part; find its first and last non-zero digits.
    const size_t ni = int_end - int_begin;
    const size_t total = ni + (frac_end - frac_begin);
    auto digit_at = [&](size_t k) -> char {
        return k < ni ? in[int_begin + k] : in[frac_begin + (k - ni)];
    };
    size_t first = 0;
    while (first < total && digit_at(first) == '0') ++first;
    if (first == total) { out_.put('0'); return true; }
    size_t last = total;
    while (digit_at(last - 1) == '0') --last;
    exponent -= static_cast<int64_t>(frac_end - frac_begin);
    exponent += static_cast<int64_t>(total - last);
    if (negative) out_.put('-');
    if (last <= ni) {
        out_.put(in + int_begin + first, last - first);
    } else if (first >= ni) {
        out_.put(in + frac_begin + (first - ni), last - first);
    } else {
        out_.put(in + int_begin + first, ni - first);
        out_.put(in + frac_begin, last - ni);
    }
    if (exponent != 0) {
        out_.put('e');
        put_int(out_, exponent);
    }
    return true;
}

bool Canonicalizer::parse_array(int depth, bool clean_strings) {
    if (depth > kMaxDepth) return false;
    ++pos_;
    out_.put('[');
    skip_ws();
    if (pos_ < end_ && in_[pos_] == ']') {
        ++pos_;
        out_.put(']');
        return true;
    }
    // SPEC §10.9: string elements of an array under a path-shaped key are cleaned, the other
    // elements are left alone.
    const Context element = clean_strings ? kPathElement : kPlain;
    for (;;) {
        if (!parse_value(depth + 1, element)) return false;
        skip_ws();
        if (pos_ >= end_) return false;
        if (in_[pos_] == ',') { ++pos_; out_.put(','); continue; }
        if (in_[pos_] == ']') { ++pos_; out_.put(']'); return true; }
        return false;
    }
}

std::string_view Canonicalizer::key_of(const Member& m) const noexcept {
    return m.key_in_input ? std::string_view(in_ + m.key_off, m.key_len)
                          : keys_.view(m.key_off, m.key_len);
}


bool Canonicalizer::parse_object(int depth) {
    if (depth > kMaxDepth) return false;
    ++pos_;
    out_.put('{');
    const size_t body_start = out_.size();
    const size_t base = members_.size();
    skip_ws();
    if (pos_ < end_ && in_[pos_] == '}') {
        ++pos_;
        out_.put('}');
        return true;
    }
    bool sorted = true;  // members arrived in strictly increasing key order
    for (;;) {
        skip_ws();
        if (pos_ >= end_ || in_[pos_] != '"') return false;
        Member m;
        std::string_view key;
        bool plain, in_input;
        if (!read_string(keys_, key, plain, in_input)) return false;
        m.key_in_input = in_input;
        m.key_off = static_cast<uint32_t>(in_input ? key.data() - in_ : key.data() - keys_.data());
        m.key_len = static_cast<uint32_t>(key.size());
        skip_ws();
        if (pos_ >= end_ || in_[pos_] != ':') return false;
        ++pos_;
        m.start = static_cast<uint32_t>(out_.size());
        emit_string(key, plain);
        out_.put(':');
        const bool path = path_key(key);
        const size_t value_start = out_.size();
        skip_ws();
        const bool is_string = pos_ < end_ && in_[pos_] == '"';
        if (!parse_value(depth + 1, path ? kPathValue : kPlain)) return false;
        m.end = static_cast<uint32_t>(out_.size());
        // The repeat relation suffix-matches top-level path strings (SPEC §2.3).
        const bool top_path = depth == 1 && path && is_string;
        m.path_rel = top_path ? static_cast<uint32_t>(value_start - m.start) : 0;
        m.path_len = top_path ? static_cast<uint32_t>(m.end - value_start) : 0;
        if (members_.size() > base && compare_bytes(key_of(members_.back()), key) >= 0)
            sorted = false;
        members_.push_back(m);
        skip_ws();
        if (pos_ >= end_) return false;
        if (in_[pos_] == ',') { ++pos_; out_.put(','); continue; }
        if (in_[pos_] == '}') { ++pos_; break; }
        return false;
    }
    if (!sorted) reorder(base, body_start, depth == 1);
    out_.put('}');
    if (depth == 1) {
        for (size_t i = base; i < members_.size(); ++i) {
            const Member& m = members_[i];
            if (m.path_len) path_spans_.emplace_back(m.start + m.path_rel, m.path_len);
        }
    }
    members_.resize(base);
    return true;
}

void Canonicalizer::reorder(size_t base, size_t body_start, bool top) {
    // Sort by key; among duplicates the last one written wins (SPEC §10.9). Objects are
    // small: a stable insertion sort beats std::stable_sort's temporary buffer.
    auto begin = members_.begin() + static_cast<std::ptrdiff_t>(base);
    auto end = members_.end();
    auto less = [this](const Member& a, const Member& b) { return compare_bytes(key_of(a), key_of(b)) < 0; };
    if (end - begin <= 16) {
        for (auto it = begin + 1; it < end; ++it) {
            const Member m = *it;
            auto j = it;
            while (j > begin && less(m, *(j - 1))) { *j = *(j - 1); --j; }
            *j = m;
        }
    } else {
        std::stable_sort(begin, end, less);
    }
    // Write the members in sorted order into moved_, recording each one's new place, then
    // put them back (at the top level, moved_ simply becomes the output).
    moved_.clear();
    if (top) moved_.put(out_.data(), body_start);  // the name prefix and the '{'
    const size_t shift = top ? 0 : body_start;
    auto kept = begin;
    for (auto it = begin; it != end; ++it) {
        if (it + 1 != end && compare_bytes(key_of(*it), key_of(*(it + 1))) == 0) continue;
        if (kept != begin) moved_.put(',');
        Member m = *it;
        const uint32_t len = m.end - m.start;
        const uint32_t start = static_cast<uint32_t>(moved_.size() + shift);
        moved_.put(out_.data() + m.start, len);
        m.start = start;
        m.end = start + len;
        *kept++ = m;
    }
    members_.erase(kept, end);
    if (top) {
        std::swap(out_, moved_);
    } else {
        out_.truncate(body_start);
        out_.put(moved_.data(), moved_.size());
    }
}

const CanonicalCall& Canonicalizer::canonicalize(const char* name, size_t name_len,
                                                 const char* args, size_t args_len) {
    CanonicalCall& c = call_;
    c.paths.clear();
    out_.clear();
    if (out_.capacity() > kKeepScratch || moved_.capacity() > kKeepScratch ||
        strings_.capacity() > kKeepScratch || cleaned_.capacity() > kKeepScratch) {
        // a huge input last time: give the memory back
        for (Buffer* b : {&out_, &rest_, &keys_, &strings_, &cleaned_, &moved_}) b->shrink(0);
    }
    if (scanned_.capacity() > kKeepScratch) std::string().swap(scanned_);
    out_.put(name, name_len);
    out_.put('\0');
    const size_t prefix = out_.size();
    CallMemo* memo = nullptr;
    uint64_t fp = 0;
    if (prefix + args_len <= kMemoMaxBytes) {
        out_.put(args, args_len);
        fp = fingerprint(out_.data(), out_.size());
        if (!memo_) memo_.reset(new CallMemo[kMemoSlots]);
        static_assert(kMemoSlots == 64, "the slot is the fingerprint's top 6 bits");
        memo = &memo_[fp >> 58];
        if (memo->fingerprint == fp && memo->raw_len == out_.size() &&
            std::memcmp(memo->raw, out_.data(), out_.size()) == 0) {
            c.key = memo->key;
            c.rest = memo->rest;
            c.is_object = memo->is_object;
            uint16_t begin = 0;
            for (uint32_t i = 0; i < memo->npaths; ++i) {
                c.paths.emplace_back(memo->paths + begin, memo->ends[i] - begin);
                begin = memo->ends[i];
            }
            return c;
        }
        out_.truncate(prefix);
    }
    if (!parse(args, args_len)) {
        out_.truncate(prefix);
        out_.put(args, args_len);
        c.key = c.rest = xxh3_64(out_.data(), out_.size());
        c.is_object = false;
    } else {
        c.is_object = true;
        c.key = xxh3_64(out_.data(), out_.size());
        c.rest = c.key;
        if (!path_spans_.empty()) {
            rest_.clear();
            size_t copied = 0;
            for (const auto& span : path_spans_) {
                rest_.put(out_.data() + copied, span.first - copied);
                rest_.put(kRestPlaceholder);
                copied = span.first + span.second;
                // the escaped value without its quotes
                c.paths.emplace_back(out_.data() + span.first + 1, span.second - 2);
            }
            rest_.put(out_.data() + copied, out_.size() - copied);
            c.rest = xxh3_64(rest_.data(), rest_.size());
        }
    }
    size_t path_bytes = 0;
    for (std::string_view p : c.paths) path_bytes += p.size();
    if (memo && c.paths.size() <= kMemoMaxPaths && path_bytes <= sizeof(memo->paths)) {
        memo->fingerprint = fp;
        memo->raw_len = static_cast<uint32_t>(prefix + args_len);
        std::memcpy(memo->raw, name, name_len);
        memo->raw[name_len] = '\0';
        std::memcpy(memo->raw + prefix, args, args_len);
        memo->key = c.key;
        memo->rest = c.rest;
        memo->is_object = c.is_object;
        uint16_t end = 0;
        memo->npaths = static_cast<uint32_t>(c.paths.size());
        for (size_t i = 0; i < c.paths.size(); ++i) {
            std::memcpy(memo->paths + end, c.paths[i].data(), c.paths[i].size());
            end = static_cast<uint16_t>(end + c.paths[i].size());
            memo->ends[i] = end;
        }
    } else if (memo) {
        memo->raw_len = 0;  // too many (escaped) path bytes to keep: forget the slot
    }
    return c;
}

bool Canonicalizer::canonical_form(const char* args, size_t args_len, std::string& out) {
    out_.clear();
    out_.put('\0');
    if (!parse(args, args_len)) return false;
    out.assign(out_.data() + 1, out_.size() - 1);  // drop the empty name's 0x00
    return true;
}

Canonicalizer& thread_canonicalizer() {
    thread_local Canonicalizer canonicalizer;
    return canonicalizer;
}

}  // namespace tw
