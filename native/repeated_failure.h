// repeated-failure (SPEC §7.3): failed results of one tool carrying one error signature, with
// no productive result between them. Reference: tripwire/signals/repeated_failure.py (its
// docstring states the decisions this struct implements). The signature is the answer
// scanner's signature mode (answer.h error_signature_key): one scanner, not two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace tw {

// Per (tool, signature), the failures since the last productive success: one alert per pair
// until a productive success clears the memory. kMemory pairs, the least recently failed
// forgotten when a new pair arrives (the reference's OrderedDict, in a fixed array). A pair is
// one 64-bit key mixing the tool's hash into the signature's (a collision among the 8 pairs of
// a session is as negligible as one among its canonical keys), so the memory is 128 bytes.
struct RepeatedFailureDetector {
    static constexpr uint32_t kMemory = 8;
    struct Entry {
        uint64_t key;
        uint32_t count;
        uint32_t stamp;  // when it last failed (larger: more recent)
    };

    uint32_t threshold;
    uint32_t size = 0;
    uint32_t clock = 0;
    uint32_t last = 0;     // the count of the pair that failed last
    uint8_t reported = 0;  // bit k: entries[k] has alerted
    // kMemory entries, allocated at the session's first failure (most fleet sessions have
    // none yet), kept until reset
    std::unique_ptr<Entry[]> entries;

    explicit RepeatedFailureDetector(uint32_t threshold_) : threshold(threshold_) {}
    // The one 64-bit key of a (tool, signature) pair.
    static uint64_t pair_key(uint64_t tool, uint64_t signature) noexcept {
        return signature ^ ((tool | 1) * 0x9E3779B97F4A7C15ull);
    }
    // one failed result; true when its pair reaches `threshold_at` (its tool's threshold: a
    // per-tool rule's, else `threshold`) for the first time
    bool fail(uint64_t tool, uint64_t signature, uint32_t threshold_at) noexcept;
    bool fail(uint64_t tool, uint64_t signature) noexcept {
        return fail(tool, signature, threshold);
    }
    // a productive success: anything may have changed
    void succeed() noexcept {
        if (size) { size = 0; clock = 0; reported = 0; }  // most successes find it empty
    }
    void reset() noexcept {
        size = 0;
        clock = 0;
        last = 0;
        reported = 0;
        entries.reset();
    }
    size_t heap_bytes() const noexcept { return entries ? kMemory * sizeof(Entry) : 0; }
};

}  // namespace tw
