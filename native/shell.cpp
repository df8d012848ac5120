#include "shell.h"

#include <cstdint>
#include <vector>

namespace tw {
namespace {

inline bool is_ws(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
inline bool ends_word(char c) noexcept {
    return is_ws(c) || c == ';' || c == '&' || c == '|' || c == '<' || c == '>' || c == '(' ||
           c == ')' || c == '`';
}

// A minimal JSON reader over the top level of the args: enough to find one member and decode
// one string. Anything malformed makes it fail (no program), in both engines alike.
struct Reader {
    const char* s;
    size_t n;
    size_t i = 0;

    void ws() noexcept { while (i < n && is_ws(s[i])) ++i; }

    static int hex(char c) noexcept {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }
    bool hex4(uint32_t& v) noexcept {
        if (i + 4 > n) return false;
        v = 0;
        for (int k = 0; k < 4; ++k) {
            int h = hex(s[i + k]);
            if (h < 0) return false;
            v = (v << 4) | static_cast<uint32_t>(h);
        }
        i += 4;
        return true;
    }
    static void utf8(std::string& out, uint32_t cp) {
        if (cp < 0x80) {
            out.push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
            out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else if (cp < 0x10000) {
            out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else {
            out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        }
    }
    // At '"': decode the string into `out` (when given) and step past it.
    bool string(std::string* out) {
        ++i;
        while (i < n) {
            char c = s[i++];
            if (c == '"') return true;
            if (c != '\\') {
                if (out) out->push_back(c);
                continue;
            }
            if (i >= n) return false;
            char e = s[i++];
            char plain = 0;
            switch (e) {
                case '"': plain = '"'; break;
                case '\\': plain = '\\'; break;
                case '/': plain = '/'; break;
                case 'b': plain = '\b'; break;
                case 'f': plain = '\f'; break;
                case 'n': plain = '\n'; break;
                case 'r': plain = '\r'; break;
                case 't': plain = '\t'; break;
                case 'u': {
                    uint32_t cp;
                    if (!hex4(cp)) return false;
                    if (cp >= 0xD800 && cp < 0xDC00 && i + 6 <= n && s[i] == '\\' &&
                        s[i + 1] == 'u') {
                        size_t back = i;
                        i += 2;
                        uint32_t lo;
                        if (hex4(lo) && lo >= 0xDC00 && lo < 0xE000) {
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        } else {
                            i = back;
                        }
                    }
                    if (out) utf8(*out, cp);
                    continue;
                }
                default: return false;
            }
            if (out) out->push_back(plain);
        }
        return false;
    }
    // Step past one value of any kind (nesting counted, strings respected).
    bool skip() {
        ws();
        if (i >= n) return false;
        char c = s[i];
        if (c == '"') return string(nullptr);
        if (c == '{' || c == '[') {
            int depth = 0;
            while (i < n) {
                char d = s[i];
                if (d == '"') {
                    if (!string(nullptr)) return false;
                    continue;
                }
                ++i;
                if (d == '{' || d == '[') ++depth;
                else if (d == '}' || d == ']') {
                    if (--depth == 0) return true;
                }
            }
            return false;
        }
        size_t start = i;
        while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && !is_ws(s[i])) ++i;
        return i > start;
    }
    // At '[': the elements if every one is a string.
    bool strings(std::vector<std::string>& out) {
        ++i;
        ws();
        if (i < n && s[i] == ']') { ++i; return true; }
        for (;;) {
            ws();
            if (i >= n || s[i] != '"') return false;
            out.emplace_back();
            if (!string(&out.back())) return false;
            ws();
            if (i >= n) return false;
            if (s[i] == ',') { ++i; continue; }
            if (s[i] == ']') { ++i; return true; }
            return false;
        }
    }
};

std::string_view base_name(std::string_view w) noexcept {
    size_t slash = w.rfind('/');
    return slash == std::string_view::npos ? w : w.substr(slash + 1);
}

// ["bash", "-lc", SCRIPT] is SCRIPT; any other argv is its words joined by spaces.
bool argv_text(const std::vector<std::string>& argv, std::string& out) {
    if (argv.size() >= 3) {
        std::string_view shell = base_name(argv[0]);
        const std::string& flag = argv[1];
        if ((shell == "bash" || shell == "sh" || shell == "zsh") && flag.size() >= 2 &&
            flag[0] == '-' && flag.back() == 'c') {
            out = argv[2];
            return true;
        }
    }
    out.clear();
    for (size_t k = 0; k < argv.size(); ++k) {
        if (k) out.push_back(' ');
        out += argv[k];
    }
    return true;
}

// The command text of the args, into `out` (or a view of the args themselves).
bool command_text(const char* args, size_t len, std::string& scratch, std::string_view& text) {
    Reader r{args, len};
    r.ws();
    if (r.i >= len) return false;
    char c = args[r.i];
    if (c == '"') {
        scratch.clear();
        if (!r.string(&scratch)) return false;
        text = scratch;
        return true;
    }
    if (c == '[') {
        std::vector<std::string> argv;
        if (!r.strings(argv) || !argv_text(argv, scratch)) return false;
        text = scratch;
        return true;
    }
    if (c != '{') {
        text = std::string_view(args, len);
        return true;
    }
    // the first member named command, else cmd, else script
    static constexpr std::string_view kKeys[3] = {"command", "cmd", "script"};
    size_t found[3] = {0, 0, 0};  // value offset + 1
    ++r.i;
    r.ws();
    if (r.i < len && args[r.i] == '}') return false;
    std::string key;
    for (;;) {
        r.ws();
        if (r.i >= len || args[r.i] != '"') return false;
        key.clear();
        if (!r.string(&key)) return false;
        r.ws();
        if (r.i >= len || args[r.i] != ':') return false;
        ++r.i;
        r.ws();
        for (int k = 0; k < 3; ++k) {
            if (!found[k] && key == kKeys[k]) found[k] = r.i + 1;
        }
        if (!r.skip()) return false;
        r.ws();
        if (r.i >= len) return false;
        if (args[r.i] == ',') { ++r.i; continue; }
        if (args[r.i] == '}') break;
        return false;
    }
    for (int k = 0; k < 3; ++k) {
        if (!found[k]) continue;
        Reader v{args, len, found[k] - 1};
        if (args[v.i] == '"') {
            scratch.clear();
            if (!v.string(&scratch)) return false;
            text = scratch;
            return true;
        }
        if (args[v.i] == '[') {
            std::vector<std::string> argv;
            if (!v.strings(argv) || !argv_text(argv, scratch)) return false;
            text = scratch;
            return true;
        }
        return false;
    }
    return false;
}

struct Words {
    std::string_view t;
    size_t i = 0;
    void ws() noexcept { while (i < t.size() && is_ws(t[i])) ++i; }
    std::string_view word() noexcept {
        ws();
        size_t start = i;
        while (i < t.size() && !ends_word(t[i])) ++i;
        return t.substr(start, i - start);
    }
    void flags() noexcept {  // skip words that start with '-'
        for (;;) {
            size_t back = i;
            std::string_view w = word();
            if (w.empty() || w[0] != '-') { i = back; return; }
        }
    }
};

bool is_assignment(std::string_view w) noexcept {
    size_t eq = w.find('=');
    if (eq == std::string_view::npos || eq == 0) return false;
    for (size_t k = 0; k < eq; ++k) {
        char c = w[k];
        bool letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        if (!letter && !(k > 0 && c >= '0' && c <= '9')) return false;
    }
    return true;
}

}  // namespace

std::string_view shell_program(const char* args, size_t len, std::string& scratch) {
    std::string_view text;
    if (!command_text(args, len, scratch, text)) return {};
    Words w{text};
    for (;;) {
        std::string_view word = w.word();
        if (word.empty()) return {};
        if (word == "cd") {
            w.word();  // the directory
            w.ws();
            if (w.i + 1 < text.size() && text[w.i] == '&' && text[w.i + 1] == '&') {
                w.i += 2;
                continue;
            }
            if (w.i < text.size() && text[w.i] == ';') {
                ++w.i;
                continue;
            }
            return word;
        }
        if (is_assignment(word)) continue;
        if (word == "sudo" || word == "env" || word == "time") {
            w.flags();
            continue;
        }
        if (word == "timeout") {
            w.flags();
            w.word();  // the duration
            continue;
        }
        return word;
    }
}

}  // namespace tw
