#include "alternating_tool_cycle.h"

#include "hash.h"

namespace tw {

bool CycleDetector::observe(const CallHistory& h) noexcept {
    const uint32_t n = h.size();
    for (uint32_t p = 2; p <= max_period; ++p) {
        const uint32_t span = p * cycles;
        if (n < span) break;
        const uint64_t* tail = h.keys(span);  // oldest first
        bool periodic = true;
        for (uint32_t i = span - 1; periodic && i >= p; --i) periodic = tail[i] == tail[i - p];
        if (!periodic) continue;
        // SPEC §10.3: a block whose calls form one repeat run is the repeat detector's.
        if (h.one_run(p)) continue;
        if (quiet < span - p) return false;  // a repeated lap brought a new answer: progress
        // Fingerprint: the smallest rotation of the block, oldest call first.
        const uint64_t* block = tail + span - p;
        uint32_t best = 0;
        for (uint32_t r = 1; r < p; ++r) {
            for (uint32_t k = 0; k < p; ++k) {
                const uint64_t a = block[(r + k) % p], b = block[(best + k) % p];
                if (a != b) { if (a < b) best = r; break; }
            }
        }
        uint64_t rotated[kMaxPeriod];
        for (uint32_t k = 0; k < p; ++k) rotated[k] = block[(best + k) % p];
        const uint64_t fp = xxh3_64(rotated, p * sizeof(uint64_t));
        if (!armed && fp == fingerprint) return false;
        fingerprint = fp;
        armed = false;
        // issue 39: a block with a call of a tool whose rule turns the signal off is held
        // as reported (quiet while it goes on; a new pattern re-arms)
        const uint8_t* flags = h.flags(p);
        for (uint32_t k = 0; k < p; ++k)
            if (flags[k] & kCycleOff) return false;
        period = static_cast<uint8_t>(p);
        return true;
    }
    armed = true;  // any call that breaks the pattern re-arms
    return false;
}

}  // namespace tw
