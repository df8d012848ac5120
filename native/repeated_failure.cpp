#include "repeated_failure.h"

#include <cstring>

#include "hash.h"

namespace tw {

namespace {

inline bool is_space(unsigned char c) noexcept {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
inline bool is_digit(unsigned char c) noexcept { return c >= '0' && c <= '9'; }
inline bool is_alpha(unsigned char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
inline bool is_alnum(unsigned char c) noexcept { return is_digit(c) || is_alpha(c); }
inline bool is_hex(unsigned char c) noexcept {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
// a byte that continues a name: a temporary path must start a token
inline bool is_name_char(unsigned char c) noexcept {
    return is_alnum(c) || c == '_' || c == '.' || c == '~' || c == '-' || c == '/';
}
inline bool ends_path(unsigned char c) noexcept {
    return is_space(c) || (c != 0 && std::strchr("\"'`()[]{}<>,;:", c) != nullptr);
}
inline bool is_joiner(unsigned char c) noexcept {
    return c == '.' || c == ':' || c == '-' || c == '/';
}

constexpr const char* kTmpPrefixes[] = {"/tmp/", "/var/tmp/", "/var/folders/", "/private/tmp/",
                                        "/private/var/folders/", "/dev/shm/"};

bool tmp_prefix_at(const unsigned char* s, size_t n, size_t i) noexcept {
    for (const char* p : kTmpPrefixes) {
        const size_t len = std::strlen(p);
        if (n - i >= len && std::memcmp(s + i, p, len) == 0) return true;
    }
    return false;
}

bool is_number(const unsigned char* w, size_t len) noexcept {
    if (len > 2 && w[0] == '0' && (w[1] == 'x' || w[1] == 'X')) {
        for (size_t k = 2; k < len; ++k)
            if (!is_hex(w[k])) return false;
        return true;
    }
    bool digit = false;
    for (size_t k = 0; k < len; ++k) {
        if (!is_hex(w[k])) return false;
        digit = digit || is_digit(w[k]);
    }
    return digit;
}

}  // namespace

void normalize_error(const char* data, size_t length, std::string& out) {
    out.clear();
    const auto* s = reinterpret_cast<const unsigned char*>(data);
    const size_t n = length;
    size_t number_end = static_cast<size_t>(-1);  // out.size() just after the last number
    bool pending_space = false;
    size_t i = 0;
    while (i < n) {
        const unsigned char c = s[i];
        if (is_space(c)) {
            pending_space = !out.empty();
            ++i;
            continue;
        }
        if (pending_space) {
            out.push_back(' ');
            pending_space = false;
        }
        if (c == '/' && (i == 0 || !is_name_char(s[i - 1])) && tmp_prefix_at(s, n, i)) {
            while (i < n && !ends_path(s[i])) ++i;
            out.append("<tmp>");
            continue;
        }
        if (is_alnum(c)) {
            size_t j = i;
            while (j < n && is_alnum(s[j])) ++j;
            if (is_number(s + i, j - i)) {
                if (number_end != static_cast<size_t>(-1) && out.size() == number_end + 1 &&
                    is_joiner(static_cast<unsigned char>(out.back()))) {
                    out.pop_back();  // joins the number before
                } else {
                    out.push_back('#');
                }
                number_end = out.size();
            } else {
                size_t k = i;
                while (k < j) {
                    if (is_digit(s[k])) {
                        while (k < j && is_digit(s[k])) ++k;
                        out.push_back('#');
                    } else {
                        out.push_back(static_cast<char>(s[k]));
                        ++k;
                    }
                }
            }
            i = j;
            continue;
        }
        out.push_back(static_cast<char>(c));
        ++i;
    }
}

uint64_t error_signature_key(const char* data, size_t length, std::string& scratch) {
    normalize_error(data, length, scratch);
    return xxh3_64(scratch.data(), scratch.size());
}

bool RepeatedFailureDetector::fail(uint64_t tool, uint64_t signature) noexcept {
    ++clock;
    const uint64_t key = signature ^ ((tool | 1) * 0x9E3779B97F4A7C15ull);
    uint32_t at = size;
    for (uint32_t k = 0; k < size; ++k) {
        if (entries[k].key == key) {
            at = k;
            break;
        }
    }
    if (at == size) {
        if (size == kMemory) {  // forget the least recently failed pair
            at = 0;
            for (uint32_t k = 1; k < size; ++k)
                if (entries[k].stamp < entries[at].stamp) at = k;
        } else {
            ++size;
        }
        entries[at] = Entry{key, 0, 0};
        reported = static_cast<uint8_t>(reported & ~(1u << at));
    }
    Entry& e = entries[at];
    e.stamp = clock;
    if (e.count < UINT32_MAX) ++e.count;
    last = e.count;
    if (e.count >= threshold && !(reported & (1u << at))) {
        reported = static_cast<uint8_t>(reported | (1u << at));
        return true;
    }
    return false;
}

}  // namespace tw
