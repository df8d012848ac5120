// The call ring every call-pattern detector reads (reference: the deques of _reference.Engine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace tw {

// A call's flags in the ring: whether it joined the previous call's repeat run (the
// stand-downs measure runs with the repeat detector's own relation), and the ring-reading
// signals its tool's per-tool rule turns off (issue 39: zero for a tool without one).
enum CallFlag : uint8_t {
    kJoined = 1,
    kCycleOff = 2,    // alternating-tool-cycle: a cycle with this call in its block is not reported
    kDensityOff = 4,  // dominant-tool-call: this call's key is never reported as dominant
    kSilenceOff = 8,  // tools-without-text: this call is not counted in the streak
};

// The last `capacity` calls' canonical keys and their flags (CallFlag).
class CallHistory {
public:
    // The entries a ring of `capacity` calls holds in its buffer: the calls, and room for
    // some more before it slides (a quarter of them, at least 4: a slide moves capacity - 1
    // entries, a few nanoseconds once every few calls; room for as many again would double
    // the buffer, a fleet session's largest part).
    static uint32_t span(uint32_t capacity) noexcept {
        return capacity + (capacity / 4 > 4 ? capacity / 4 : 4);
    }
    // The bytes of a ring of `capacity` calls: the keys, then the flags.
    static size_t storage_bytes(uint32_t capacity) noexcept {
        return static_cast<size_t>(span(capacity)) * (sizeof(uint64_t) + 1);
    }
    // storage: storage_bytes(capacity) bytes, 8-aligned, that outlive the ring (a Session's
    // own block, so that a call finds the ring beside the session); null: the ring allocates.
    explicit CallHistory(uint32_t capacity, void* storage = nullptr);
    CallHistory(const CallHistory&) = delete;
    CallHistory& operator=(const CallHistory&) = delete;
    void push(uint64_t key, uint8_t call_flags) noexcept {
        // A sliding buffer of span(capacity) entries: each call is written once, at the end;
        // when the end reaches the buffer's, the last entries move to its front. The last `n`
        // entries are then always contiguous: detectors index them directly, with no modulo
        // on the hot path, and a call on a session cold in cache writes one line of keys (a
        // mirrored ring wrote two).
        if (end_ == span_) slide();
        keys_[end_] = key;
        flags()[end_] = call_flags;
        ++end_;
        if (size_ < capacity_) ++size_;
    }
    void clear() noexcept { size_ = 0; }
    // Take back the last n entries (at most size()): the ones before them are still in place.
    void pop(uint32_t n) noexcept {
        if (n > size_) n = size_;
        end_ -= n;
        size_ -= n;
    }
    uint32_t size() const noexcept { return size_; }
    // The last n <= size() keys, oldest first.
    const uint64_t* keys(uint32_t n) const noexcept { return keys_ + end_ - n; }
    // The last n calls' flags (CallFlag), oldest first.
    const uint8_t* flags(uint32_t n) const noexcept { return flags() + end_ - n; }
    // Whether the last n <= size() calls form one repeat run (each joined its predecessor).
    bool one_run(uint32_t n) const noexcept {
        const uint8_t* f = flags(n);
        for (uint32_t k = 1; k < n; ++k)
            if (!(f[k] & kJoined)) return false;
        return true;
    }
    size_t heap_bytes() const noexcept { return storage_bytes(capacity_); }
    const void* next_key() const noexcept { return keys_ + end_; }
    const void* next_flags() const noexcept { return flags() + end_; }

private:
    void slide() noexcept;  // the entries the ring still holds to the buffer's front
    // the flags, right after the keys (computed: a pointer a session less)
    uint8_t* flags() const noexcept { return reinterpret_cast<uint8_t*>(keys_ + span_); }

    std::unique_ptr<uint64_t[]> owned_;  // the storage when none was given
    uint64_t* keys_;
    uint32_t capacity_;
    uint32_t span_;     // span(capacity_): the buffer's entries
    uint32_t end_ = 0;  // next slot to write; the last size_ entries end here
    uint32_t size_ = 0;
};

}  // namespace tw
