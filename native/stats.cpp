#include "stats.h"

#include <algorithm>

#include "session.h"

namespace tw {

static inline void raise_to(uint32_t& peak, uint32_t value) noexcept {
    if (value > peak) peak = value;
}

void SessionStats::after_call(const Session& s) noexcept {
    raise_to(peak[0], s.repeat.run);
    const CallHistory& h = s.history;
    const uint32_t n = h.size();
    const uint64_t* keys = h.keys(n);  // oldest first; n <= capacity >= 2 * max_period
    for (uint32_t p = 2; p <= s.cycle_max_period; ++p) {
        if (n > p && keys[n - 1] == keys[n - 1 - p]) {
            ++matches_[p];
        } else {
            matches_[p] = 0;
        }
        if (matches_[p] < p) continue;  // not even two laps yet
        // SPEC §10.3: a block whose calls form one repeat run is not a cycle.
        // laps count only while no result brought a new answer (the cycle rule)
        if (!h.one_run(p)) raise_to(peak[1], 1 + std::min(matches_[p], s.cycle.quiet) / p);
    }
    // Only the newest key's count rose, so the session's highest window count is the highest
    // count the newest key reached in the window ending at it.
    const uint32_t len = std::min(n, s.density_window);
    const uint64_t* w = h.keys(len);
    const uint64_t newest = w[len - 1];
    uint32_t count = 0;
    for (uint32_t i = 0; i < len; ++i) count += w[i] == newest;
    raise_to(peak[2], count);
    raise_to(peak[3], s.name.run);
    raise_to(peak[7], s.silence.streak());
    raise_to(peak[14], s.persistent.run);
}

void SessionStats::after_result(const Session& s) noexcept {
    raise_to(peak[4], s.failures.run);
    raise_to(peak[5], s.no_ops.run);
    raise_to(peak[6], s.stale.run);
    // only the pair that just failed rose: the peak is the highest count it reached
    raise_to(peak[8], s.repeated_failure.last);
    raise_to(peak[9], s.recycled.run);
    raise_to(peak[10], s.unknown_tool.run);
    raise_to(peak[14], s.persistent.run);
}

void SessionStats::after_event(const Session& s) noexcept {
    raise_to(peak[11], s.text.run);
    raise_to(peak[12], s.empty.run);
    raise_to(peak[13], s.storm.run);  // a turn's count is never above it
    raise_to(peak[14], s.persistent.run);  // warn alerts follow every kind of event
    raise_to(peak[15], s.looping.last.laps);
}

void SessionStats::after_reset() noexcept {
    std::fill(std::begin(matches_), std::end(matches_), 0u);  // the history was cleared
}

}  // namespace tw
