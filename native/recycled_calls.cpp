#include "recycled_calls.h"

#include <new>

namespace tw {

bool PendingCalls::take(uint64_t tool_hash, uint32_t& key) noexcept {
    const uint64_t tool = tool_hash & 0xFFFFFFFFull;
    for (uint32_t i = 0; i < size; ++i) {
        const uint64_t entry = slots[(head + i) & (kPending - 1)];
        if ((entry >> 32) != tool) continue;
        key = static_cast<uint32_t>(entry);
        for (uint32_t j = i; j + 1 < size; ++j)  // the later ones move up one
            slots[(head + j) & (kPending - 1)] = slots[(head + j + 1) & (kPending - 1)];
        --size;
        return true;
    }
    return false;
}

bool RecycledCallsDetector::observe(uint32_t key, uint32_t answer) noexcept {
    if (window == 0) return false;  // nothing is held: no call repeats one it remembers
    bool repeat = false;
    for (uint32_t k = 1; k <= size; ++k) {  // newest first: the time before
        const uint64_t entry = slot((next + window - k) % window);
        if (static_cast<uint32_t>(entry >> 32) == key) {
            repeat = static_cast<uint32_t>(entry) == answer;
            break;
        }
    }
    if (next >= kInline && !more) {
        more.reset(new (std::nothrow) uint64_t[window - kInline]);
        if (!more) {  // out of memory: the window is the first slots alone from now on
            window = kInline;
            next = 0;
        }
    }
    slot(next) = (static_cast<uint64_t>(key) << 32) | answer;
    next = (next + 1) % window;
    if (size < window) ++size;
    if (!repeat) {
        run = 0;
        tripped = false;  // re-armed
        return false;
    }
    if (run < UINT32_MAX) ++run;
    if (run >= threshold && !tripped) {
        tripped = true;
        return true;
    }
    return false;
}

bool RecycledCallsDetector::stands_down(const CallHistory& h, bool repeat_on,
                                        uint32_t cycle_max_period) const noexcept {
    const uint32_t n = h.size() < threshold ? h.size() : threshold;
    if (n < 2) return false;
    const uint64_t* keys = h.keys(n);  // oldest first
    if (repeat_on && h.one_run(n)) return true;
    for (uint32_t p = 2; p <= cycle_max_period && p < n; ++p) {
        bool periodic = true;
        for (uint32_t i = p; periodic && i < n; ++i) periodic = keys[i] == keys[i - p];
        if (!periodic) continue;
        if (!h.one_run(p)) return true;  // SPEC §10.3: a one-run block is the repeat detector's
    }
    return false;
}

}  // namespace tw
