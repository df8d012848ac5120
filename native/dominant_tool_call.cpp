#include "dominant_tool_call.h"

#include <new>

namespace tw {

bool DensityDetector::is_reported(uint64_t key) const noexcept {
    for (uint32_t i = 0; i < reported_size; ++i)
        if (reported[i] == key) return true;
    return false;
}

void DensityDetector::add_reported(uint64_t key) noexcept {
    if (!reported) {
        reported.reset(new (std::nothrow) uint64_t[kReportedCapacity]);
        if (!reported) return;  // out of memory: not remembered (it may report again)
    }
    if (reported_size < kReportedCapacity) {
        reported[reported_size++] = key;
    } else {
        reported[reported_head] = key;  // forget the oldest
        reported_head = (reported_head + 1) % kReportedCapacity;
    }
}

bool DensityDetector::observe(const CallHistory& h) noexcept {
    const uint32_t len = h.size() < window ? h.size() : window;
    const uint64_t* w = h.keys(len);  // oldest first
    if (below) {
        // Only the newest key's count rose since the last window, so if it is under the
        // threshold the whole window is: the common path costs one pass.
        const uint64_t newest = w[len - 1];
        uint32_t c = 0;
        for (uint32_t i = 0; i < len; ++i) c += w[i] == newest;
        if (c < threshold) { reported_size = reported_head = 0; return false; }
    }
    // The dominant key: highest count, ties to the earliest first occurrence.
    uint64_t dominant = 0;
    uint32_t best = 0, first = 0;
    for (uint32_t i = 0; i < len && len - i > best; ++i) {
        const uint64_t k = w[i];
        bool earlier = false;
        for (uint32_t j = 0; j < i && !earlier; ++j) earlier = w[j] == k;
        if (earlier) continue;
        uint32_t c = 0;
        for (uint32_t j = i; j < len; ++j) c += w[j] == k;
        if (c > best) { best = c; dominant = k; first = i; }
    }
    below = best < threshold;
    if (below) { reported_size = reported_head = 0; return false; }  // SPEC §10.4: re-arm
    const uint8_t* flags = h.flags(len);
    if (deferred(w, flags, len, dominant)) return false;
    // issue 39: the key of a tool whose rule turns the signal off is never reported (its
    // calls still fill the window: the other keys' share is of every call)
    if (flags[first] & kDensityOff) return false;
    if (is_reported(dominant)) return false;
    add_reported(dominant);
    count = best;
    length = len;
    first_age = len - 1 - first;
    return true;
}

bool DensityDetector::deferred(const uint64_t* w, const uint8_t* flags, uint32_t len,
                               uint64_t dominant) const noexcept {
    if (defer_run > 0) {
        // SPEC §10.2: the longest stretch the repeat detector counted as one run, containing
        // the dominant key.
        uint32_t stretch = 0, best = 0;
        bool has = false;
        for (uint32_t i = 0; i < len; ++i) {
            if (i == 0 || !(flags[i] & kJoined)) { stretch = 0; has = false; }
            ++stretch;
            has = has || w[i] == dominant;
            if (has && stretch > best) best = stretch;
        }
        if (best >= static_cast<uint32_t>(defer_run)) return true;
    }
    for (int32_t p = 2; p <= defer_cycle_period; ++p) {
        const uint32_t up = static_cast<uint32_t>(p);
        if (up >= len) break;
        bool periodic = true;
        for (uint32_t i = up; periodic && i < len; ++i) periodic = w[i] == w[i - up];
        if (periodic) return true;  // a clean cycle: the cycle detector's territory
    }
    return false;
}

}  // namespace tw
