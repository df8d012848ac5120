#include "detectors.h"

#include "hash.h"

namespace tw {

CallHistory::CallHistory(uint32_t capacity)
    : keys_(new uint64_t[2 * capacity]()), joins_(new uint8_t[2 * capacity]()), capacity_(capacity) {}

// ---------------------------------------------------------------------------------------------

void RepeatDetector::start_run(const CanonicalCall& c) {
    run = 1;
    rest = c.rest;
    is_object = c.is_object;
    tripped = false;
    longest.clear();
    ends.clear();
    for (std::string_view p : c.paths) {
        longest.append(p);
        ends.push_back(static_cast<uint32_t>(longest.size()));
    }
}

bool RepeatDetector::observe(const CanonicalCall& c, bool& fired) {
    fired = false;
    bool joined = run > 0 && c.rest == rest && c.is_object == is_object &&
                  c.paths.size() == ends.size();
    bool longer = false;
    for (size_t i = 0; joined && i < c.paths.size(); ++i) {
        const std::string_view have = slot(i);
        joined = paths_suffix_match(c.paths[i], have);
        longer = longer || c.paths[i].size() > have.size();
    }
    if (joined) {
        ++run;
        if (longer) {
            // the run's longest spelling grows (SPEC §2.3 run consistency)
            // double buffers shared by the thread's sessions: growing allocates nothing
            thread_local std::string scratch;
            thread_local std::vector<uint32_t> scratch_ends;
            scratch.clear();
            scratch_ends.clear();
            for (size_t i = 0; i < c.paths.size(); ++i) {
                const std::string_view have = slot(i);
                scratch.append(c.paths[i].size() > have.size() ? c.paths[i] : have);
                scratch_ends.push_back(static_cast<uint32_t>(scratch.size()));
            }
            longest.swap(scratch);
            ends.swap(scratch_ends);
        }
    } else {
        start_run(c);
    }
    if (enabled && run >= threshold && !tripped) {
        tripped = true;
        fired = true;
    }
    return joined;
}

// ---------------------------------------------------------------------------------------------

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
        const uint8_t* joins = h.joins(p);
        bool one_run = true;
        for (uint32_t k = 1; one_run && k < p; ++k) one_run = joins[k] != 0;
        if (one_run) continue;
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
        period = p;
        return true;
    }
    armed = true;  // any call that breaks the pattern re-arms
    return false;
}

// ---------------------------------------------------------------------------------------------

bool DensityDetector::is_reported(uint64_t key) const noexcept {
    for (uint32_t i = 0; i < reported_size; ++i)
        if (reported[i] == key) return true;
    return false;
}

void DensityDetector::add_reported(uint64_t key) noexcept {
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
    if (deferred(w, h.joins(len), len, dominant)) return false;
    if (is_reported(dominant)) return false;
    add_reported(dominant);
    count = best;
    length = len;
    first_age = len - 1 - first;
    return true;
}

bool DensityDetector::deferred(const uint64_t* w, const uint8_t* joins, uint32_t len,
                               uint64_t dominant) const noexcept {
    if (defer_run > 0) {
        // SPEC §10.2: the longest stretch the repeat detector counted as one run, containing
        // the dominant key.
        uint32_t stretch = 0, best = 0;
        bool has = false;
        for (uint32_t i = 0; i < len; ++i) {
            if (i == 0 || !joins[i]) { stretch = 0; has = false; }
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

// ---------------------------------------------------------------------------------------------

bool NameRunDetector::observe(uint64_t name_hash, uint32_t repeat_run) noexcept {
    if (run && name_hash == name) {
        ++run;
    } else {
        name = name_hash;
        run = 1;
        reported = false;
    }
    if (run >= threshold && !reported) {
        reported = true;  // a stood-down run counts as reported
        return !(stand_down_run && repeat_run >= stand_down_run);
    }
    return false;
}

}  // namespace tw
