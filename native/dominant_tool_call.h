// dominant-tool-call (SPEC §1, §10.2, §10.4). Reference: tripwire/signals/dominant_tool_call.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include "call_history.h"

namespace tw {

// dominant-tool-call: one canonical call is `threshold` of the last `window` calls.
struct DensityDetector {
    static constexpr uint32_t kReportedCapacity = 8;  // as DENSITY_REPORTED_CAPACITY
    uint32_t window;
    uint32_t threshold;
    int32_t defer_run;
    int32_t defer_cycle_period;
    uint32_t reported_size = 0;
    uint32_t reported_head = 0;  // oldest entry once full
    bool below = true;           // the last window's top count was under the threshold
    uint32_t count = 0, length = 0, first_age = 0;
    // last: a call reads it only when a key reaches the threshold
    // the dominant keys reported, allocated at the first (most sessions never have one)
    std::unique_ptr<uint64_t[]> reported;

    DensityDetector(uint32_t window_, uint32_t threshold_, int32_t defer_run_, int32_t defer_period_)
        : window(window_), threshold(threshold_), defer_run(defer_run_),
          defer_cycle_period(defer_period_) {}
    bool observe(const CallHistory& h) noexcept;
    void reset() noexcept {
        reported_size = reported_head = 0;
        below = true;
        count = length = first_age = 0;
        reported.reset();
    }
    size_t heap_bytes() const noexcept {
        return reported ? kReportedCapacity * sizeof(uint64_t) : 0;
    }

private:
    bool is_reported(uint64_t key) const noexcept;
    void add_reported(uint64_t key) noexcept;
    bool deferred(const uint64_t* w, const uint8_t* flags, uint32_t len, uint64_t dominant) const noexcept;
};

}  // namespace tw
