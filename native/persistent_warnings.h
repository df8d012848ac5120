// persistent-warnings (issue 39). Reference: tripwire/signals/persistent_warnings.py.
#pragma once

#include <cstdint>

namespace tw {

// Warn alerts since the last progress (a successful result with an answer the turn had not
// seen); one alert until progress re-arms it.
struct PersistentWarningsDetector {
    uint32_t threshold;
    uint32_t run = 0;      // warn alerts since the last progress
    uint32_t signals = 0;  // which warn signals they were (their bits)
    bool tripped = false;

    explicit PersistentWarningsDetector(uint32_t threshold_) : threshold(threshold_) {}
    void progress() noexcept { run = 0; signals = 0; tripped = false; }
    // An event's fired warn signals (their bits); true when it trips.
    bool observe(uint32_t warned) noexcept {
        if (warned == 0) return false;
        run += static_cast<uint32_t>(__builtin_popcount(warned));
        signals |= warned;
        if (run < threshold || tripped) return false;
        tripped = true;
        return true;
    }
    void reset() noexcept { progress(); }
};

}  // namespace tw
