// Canonical call keys (SPEC §2): parse the args once, clean path-shaped values, replace the
// volatile parts of string values (answer.h scan_argument), re-serialize canonically, hash. Mirrors tripwire/_reference.py byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tw {

// A growable byte buffer whose appends inline to a bounds check and a memcpy; it keeps its
// capacity between calls, so a warmed-up canonicalizer does not allocate.
class Buffer {
public:
    friend void swap(Buffer& a, Buffer& b) noexcept {
        a.p_.swap(b.p_);
        std::swap(a.size_, b.size_);
        std::swap(a.cap_, b.cap_);
    }
    void clear() noexcept { size_ = 0; }
    size_t size() const noexcept { return size_; }
    size_t capacity() const noexcept { return cap_; }
    const char* data() const noexcept { return p_.get(); }
    char operator[](size_t i) const noexcept { return p_[i]; }
    std::string_view view(size_t off, size_t len) const noexcept { return {p_.get() + off, len}; }
    void truncate(size_t n) noexcept { size_ = n; }
    void put(char c) {
        if (size_ == cap_) grow(size_ + 1);
        p_[size_++] = c;
    }
    void put(const char* s, size_t n) {
        if (size_ + n > cap_) grow(size_ + n);
        char* d = p_.get() + size_;
        // Most pieces are a few bytes: fixed-size copies inline to moves, a libc call does not.
        if (n >= 8 && n <= 16) {
            std::memcpy(d, s, 8);
            std::memcpy(d + n - 8, s + n - 8, 8);
        } else if (n >= 4 && n < 8) {
            std::memcpy(d, s, 4);
            std::memcpy(d + n - 4, s + n - 4, 4);
        } else if (n < 4) {
            for (size_t i = 0; i < n; ++i) d[i] = s[i];
        } else {
            std::memcpy(d, s, n);
        }
        size_ += n;
    }
    void put(std::string_view s) { put(s.data(), s.size()); }
    // Room for n more bytes; write through the pointer, then commit() the new end.
    char* extend(size_t n) {
        if (size_ + n > cap_) grow(size_ + n);
        return p_.get() + size_;
    }
    void commit(const char* end) noexcept { size_ = static_cast<size_t>(end - p_.get()); }
    // '"' + s + '"' with one bounds check: most strings need no escaping.
    void put_quoted(const char* s, size_t n) {
        if (size_ + n + 2 > cap_) grow(size_ + n + 2);
        char* d = p_.get() + size_;
        d[0] = '"';
        std::memcpy(d + 1, s, n);
        d[n + 1] = '"';
        size_ += n + 2;
    }
    // After a huge input, give the memory back instead of holding it for the process lifetime.
    void shrink(size_t keep) {
        if (cap_ > keep) { p_.reset(); cap_ = size_ = 0; }
    }

private:
    void grow(size_t need);
    std::unique_ptr<char[]> p_;
    size_t size_ = 0;
    size_t cap_ = 0;
};

// What the detectors need of one call. Valid until the Canonicalizer's next call.
struct CanonicalCall {
    uint64_t key;        // XXH3-64 of name + 0x00 + canonical form
    uint64_t rest;       // same, with top-level path strings replaced by a placeholder
    bool is_object;      // false: args compared as raw bytes
    // Cleaned top-level path-shaped string values, in sorted key order, as escaped canonical
    // spellings (escaping preserves the component-suffix relation, see paths_suffix_match).
    std::vector<std::string_view> paths;
};

// SPEC §2.1 / §10.10: the key's last word, or last two words joined, is a path word.
bool is_path_key(const char* key, size_t len) noexcept;

// SPEC §2.2: POSIX lexical cleaning like Go's path.Clean; appends to `out`.
void clean_path(const char* in, size_t len, Buffer& out);
std::string clean_path_string(const char* path, size_t len);

// SPEC §2.3: equal, or the longer ends with '/' + the shorter.
bool paths_suffix_match(std::string_view a, std::string_view b) noexcept;

// Reusable scratch for canonicalization: after warm-up no call allocates. Not thread-safe;
// use one per thread.
//
// One pass over the input: each value is written to the output in canonical form as it is
// parsed (strings re-escaped and path-cleaned, numbers respelled), and an object's members are
// reordered in place at its closing brace only when they were not already sorted.
class Canonicalizer {
public:
    static constexpr int kMaxDepth = 128;            // deeper nesting: compared as raw bytes
    static constexpr int kMaxExponentDigits = 15;    // keeps exact-decimal exponents in int64
    static constexpr size_t kKeepScratch = 1 << 20;  // scratch kept between calls, in bytes
    static constexpr size_t kMemoSlots = 64;         // recently canonicalized calls kept
    static constexpr size_t kMemoMaxBytes = 512;     // name + args longer than this: not kept

    const CanonicalCall& canonicalize(const char* name, size_t name_len,
                                      const char* args, size_t args_len);

    // Canonical form of object args; false (and nothing written) when they are not one.
    bool canonical_form(const char* args, size_t args_len, std::string& out);


private:
    enum Context : uint8_t { kPlain, kPathValue, kPathElement };
    struct Member {
        uint32_t key_off, key_len;  // decoded key bytes, in the input or in keys_
        bool key_in_input;
        uint32_t start, end;        // the member's `"key":value` bytes in out_
        uint32_t path_rel;          // top level: offset of a path string value in the member
        uint32_t path_len;          // ... and its length (0: none)
    };

    bool parse(const char* args, size_t len);
    // The common shape in one tight pass: a flat object of escape-free strings, integers and
    // literals. Returns false, having written nothing, for anything else.
    bool flat_object(const char* args, size_t len);
    bool parse_value(int depth, Context ctx);
    bool parse_object(int depth);
    bool parse_array(int depth, bool clean_strings);
    bool parse_number();
    // Reads a JSON string at pos_ (the opening quote); sets `s` to its decoded bytes, which
    // live in the input (plain: no escapes) or in `decoded`.
    bool read_string(Buffer& decoded, std::string_view& s, bool& plain, bool& in_input);
    void emit_string(std::string_view s, bool plain);
    // A string value: its volatile parts replaced (answer.h scan_argument), then written.
    void emit_value(std::string_view s, bool plain);
    void emit_cleaned(std::string_view s, bool plain);
    void skip_ws() noexcept;
    bool path_key(std::string_view key) noexcept;  // is_path_key, memoized for short keys
    std::string_view key_of(const Member& m) const noexcept;
    void reorder(size_t base, size_t body_start, bool top);

    const char* in_ = nullptr;
    size_t pos_ = 0, end_ = 0;

    Buffer out_;       // name + 0x00 + canonical form
    Buffer rest_;      // name + 0x00 + rest form
    Buffer keys_;      // decoded keys that had escapes
    Buffer strings_;   // a decoded string value that had escapes
    Buffer cleaned_;   // a cleaned path
    Buffer moved_;     // an object's members while they are reordered
    std::string scanned_;  // a string value with its volatile parts replaced
    std::vector<Member> members_;  // the open objects' members, innermost last
    std::vector<std::pair<uint32_t, uint32_t>> path_spans_;  // top-level path values in out_
    CanonicalCall call_;

    // Tools reuse a handful of argument names: remember the verdict for keys of up to 16
    // bytes, identified exactly by their bytes packed into two words.
    struct PathKeyMemo {
        uint64_t lo = 0, hi = 0;
        uint32_t len = 0;  // 0: empty slot
        bool path = false;
    };
    PathKeyMemo path_key_memo_[64];

    // Looping agents repeat byte-identical calls: remember the last calls' results, found by
    // a cheap fingerprint of the raw name + args and confirmed by comparing the bytes. Fixed
    // arrays, so storing one is a few memcpys.
    static constexpr size_t kMemoMaxPaths = 8;
    struct CallMemo {
        uint64_t fingerprint = 0;
        uint32_t raw_len = 0;
        uint32_t npaths = 0;
        uint64_t key = 0, rest = 0;
        bool is_object = false;
        char raw[kMemoMaxBytes];            // name + 0x00 + args, as given
        char paths[kMemoMaxBytes];          // the top-level path spellings, concatenated
        uint16_t ends[kMemoMaxPaths];       // where each one ends
    };
    std::unique_ptr<CallMemo[]> memo_;
};

// This thread's canonicalizer, for work done without the GIL (batch ingest): the one the
// bindings use under the GIL is a different object.
Canonicalizer& thread_canonicalizer();

}  // namespace tw
