// repeated-tool-call (SPEC §1, §2.3). Reference: tripwire/signals/repeated_tool_call.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include "canonical.h"

namespace tw {

// repeated-tool-call: run-consistent repeats (SPEC §2.3 Decision).
struct RepeatDetector {
    uint32_t threshold;
    bool enabled;
    uint32_t run = 0;
    uint64_t rest = 0;
    bool is_object = false;
    bool tripped = false;
    // The longest spelling seen in the run for each top-level path key, concatenated;
    // ends[i] is where slot i ends.
    std::string longest;
    std::vector<uint32_t> ends;

    RepeatDetector(uint32_t threshold_, bool enabled_) : threshold(threshold_), enabled(enabled_) {}
    // Returns whether the call joined the current run; sets `fired`.
    bool observe(const CanonicalCall& c, bool& fired);
    void reset() noexcept { run = 0; rest = 0; is_object = false; tripped = false; ends.clear(); }

private:
    std::string_view slot(size_t i) const noexcept {
        const uint32_t begin = i ? ends[i - 1] : 0;
        return std::string_view(longest.data() + begin, ends[i] - begin);
    }
    void start_run(const CanonicalCall& c);
};

}  // namespace tw
