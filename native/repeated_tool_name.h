// repeated-tool-name (SPEC §1, §10.1). Reference: tripwire/signals/repeated_tool_name.py.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tw {

// repeated-tool-name (SPEC §10.1).
struct NameRunDetector {
    uint32_t threshold;
    uint32_t stand_down_run;  // the repeat threshold, 0 when repeat is disabled
    uint64_t name = 0;
    uint32_t run = 0;
    bool reported = false;

    NameRunDetector(uint32_t threshold_, uint32_t stand_down) : threshold(threshold_), stand_down_run(stand_down) {}
    // at, stand_down: the call's tool's own (a per-tool rule's), else the detector's
    bool observe(uint64_t name_hash, uint32_t repeat_run, uint32_t at,
                 uint32_t stand_down) noexcept;
    bool observe(uint64_t name_hash, uint32_t repeat_run) noexcept {
        return observe(name_hash, repeat_run, threshold, stand_down_run);
    }
    void reset() noexcept { name = 0; run = 0; reported = false; }
    void retract(uint32_t calls) noexcept { if (run > calls) run -= calls; else reset(); }
};

}  // namespace tw
