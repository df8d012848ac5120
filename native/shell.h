// Shell-tool identity for the name-level signals (SPEC §11.2): the program word of a shell
// tool's command. Mirrors tripwire/_common.py shell_program() byte for byte.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tw {

// The program word of `args` (the call's args bytes): the command under the key "command",
// "cmd" or "script" of a JSON object (a string, or an argv array: ["bash", "-lc", SCRIPT] is
// SCRIPT), a JSON string, or the whole args when they are plain text; leading `cd DIR &&` /
// `cd DIR;` steps, VAR=value assignments and sudo/env/timeout N/time wrappers skipped. Empty
// when there is none. The view points into `args` or into `scratch`.
std::string_view shell_program(const char* args, size_t len, std::string& scratch);

}  // namespace tw
