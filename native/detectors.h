// The eight watchdog detectors (SPEC §1, §10), one small struct each. Mirrors the detector
// classes of tripwire/_reference.py; read those for the rules in prose.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "canonical.h"

namespace tw {

// The last `capacity` calls' canonical keys, and whether each call joined the previous call's
// repeat run (the stand-downs measure runs with the repeat detector's own relation).
class CallHistory {
public:
    explicit CallHistory(uint32_t capacity);
    void push(uint64_t key, bool joined) noexcept {
        // Each entry is written twice, at i and i + capacity, so the last `n` entries are
        // always contiguous: detectors index them directly, with no modulo on the hot path.
        keys_[head_] = keys_[head_ + capacity_] = key;
        joins_[head_] = joins_[head_ + capacity_] = joined ? 1 : 0;
        head_ = head_ + 1 == capacity_ ? 0 : head_ + 1;
        if (size_ < capacity_) ++size_;
    }
    void clear() noexcept { size_ = 0; }
    uint32_t size() const noexcept { return size_; }
    // The last n <= size() keys, oldest first.
    const uint64_t* keys(uint32_t n) const noexcept { return keys_.get() + head_ + capacity_ - n; }
    // Whether each of the last n calls joined its predecessor's repeat run, oldest first.
    const uint8_t* joins(uint32_t n) const noexcept { return joins_.get() + head_ + capacity_ - n; }
    size_t heap_bytes() const noexcept { return 2 * capacity_ * (sizeof(uint64_t) + 1); }

private:
    std::unique_ptr<uint64_t[]> keys_;
    std::unique_ptr<uint8_t[]> joins_;
    uint32_t capacity_;
    uint32_t head_ = 0;  // next slot to write
    uint32_t size_ = 0;
};

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

// alternating-tool-cycle: the last p*cycles calls are `cycles` laps of a p-call block.
struct CycleDetector {
    static constexpr uint32_t kMaxPeriod = 16;
    uint32_t max_period;
    uint32_t cycles;
    // XXH3 of the reported pattern's smallest rotation (a collision among the few patterns
    // of one session is as negligible as one among its canonical keys).
    uint64_t fingerprint = 0;
    bool armed = true;
    uint32_t period = 0;

    CycleDetector(uint32_t max_period_, uint32_t cycles_) : max_period(max_period_), cycles(cycles_) {}
    bool observe(const CallHistory& h) noexcept;
    void reset() noexcept { armed = true; period = 0; }
};

// dominant-tool-call: one canonical call is `threshold` of the last `window` calls.
struct DensityDetector {
    static constexpr uint32_t kReportedCapacity = 8;  // as DENSITY_REPORTED_CAPACITY
    uint32_t window;
    uint32_t threshold;
    int32_t defer_run;
    int32_t defer_cycle_period;
    uint64_t reported[kReportedCapacity] = {};
    uint32_t reported_size = 0;
    uint32_t reported_head = 0;  // oldest entry once full
    bool below = true;           // the last window's top count was under the threshold
    uint32_t count = 0, length = 0, first_age = 0;

    DensityDetector(uint32_t window_, uint32_t threshold_, int32_t defer_run_, int32_t defer_period_)
        : window(window_), threshold(threshold_), defer_run(defer_run_),
          defer_cycle_period(defer_period_) {}
    bool observe(const CallHistory& h) noexcept;
    void reset() noexcept { reported_size = reported_head = 0; below = true; count = length = first_age = 0; }

private:
    bool is_reported(uint64_t key) const noexcept;
    void add_reported(uint64_t key) noexcept;
    bool deferred(const uint64_t* w, const uint8_t* joins, uint32_t len, uint64_t dominant) const noexcept;
};

// repeated-tool-name (SPEC §10.1).
struct NameRunDetector {
    uint32_t threshold;
    uint32_t stand_down_run;  // the repeat threshold, 0 when repeat is disabled
    uint64_t name = 0;
    uint32_t run = 0;
    bool reported = false;

    NameRunDetector(uint32_t threshold_, uint32_t stand_down) : threshold(threshold_), stand_down_run(stand_down) {}
    bool observe(uint64_t name_hash, uint32_t repeat_run) noexcept;
    void reset() noexcept { name = 0; run = 0; reported = false; }
};

// tools-without-text.
struct SilenceDetector {
    uint32_t threshold;
    uint32_t run = 0;
    bool reported = false;

    explicit SilenceDetector(uint32_t threshold_) : threshold(threshold_) {}
    bool observe_call() noexcept {
        ++run;
        if (run >= threshold && !reported) { reported = true; return true; }
        return false;
    }
    void observe_text(bool has_words) noexcept { if (has_words) reset(); }
    void reset() noexcept { run = 0; reported = false; }
};

// A run of results with one property, one alert per run (failures, no-ops, stale payloads).
struct StreakDetector {
    uint32_t threshold;
    uint32_t run = 0;
    bool tripped = false;

    explicit StreakDetector(uint32_t threshold_) : threshold(threshold_) {}
    bool extend() noexcept {
        ++run;
        if (run >= threshold && !tripped) { tripped = true; return true; }
        return false;
    }
    void reset() noexcept { run = 0; tripped = false; }
};

}  // namespace tw
