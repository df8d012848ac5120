#include "repeated_text.h"

#include <string>

#include "hash.h"

namespace tw {

static inline bool ascii_space(unsigned char c) noexcept {
    return c == ' ' || (c >= '\t' && c <= '\r');  // \t \n \v \f \r: bytes.split()'s set
}

uint64_t text_key(const char* text, size_t len) {
    thread_local std::string words;  // agent text is rare next to calls: one reused buffer
    words.clear();
    size_t i = 0;
    while (i < len) {
        while (i < len && ascii_space(static_cast<unsigned char>(text[i]))) ++i;
        const size_t start = i;
        while (i < len && !ascii_space(static_cast<unsigned char>(text[i]))) ++i;
        if (i > start) {
            if (!words.empty()) words.push_back(' ');
            words.append(text + start, i - start);
        }
    }
    return xxh3_64(words.data(), words.size());
}

}  // namespace tw
