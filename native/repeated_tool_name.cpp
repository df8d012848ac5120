#include "repeated_tool_name.h"

namespace tw {

bool NameRunDetector::observe(uint64_t name_hash, uint32_t repeat_run, uint32_t at,
                              uint32_t stand_down) noexcept {
    if (run && name_hash == name) {
        ++run;
    } else {
        name = name_hash;
        run = 1;
        reported = false;
    }
    if (run >= at && !reported) {
        reported = true;  // a stood-down run counts as reported
        return !(stand_down && repeat_run >= stand_down);
    }
    return false;
}

}  // namespace tw
