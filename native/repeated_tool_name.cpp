#include "repeated_tool_name.h"

namespace tw {

bool NameRunDetector::observe(uint64_t name_hash, uint32_t repeat_run) noexcept {
    if (run && name_hash == name) {
        ++run;
    } else {
        name = name_hash;
        run = 1;
        reported = false;
    }
    if (run >= threshold && !reported) {
        reported = true;  // a stood-down run counts as reported
        return !(stand_down_run && repeat_run >= stand_down_run);
    }
    return false;
}

}  // namespace tw
