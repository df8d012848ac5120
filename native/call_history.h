// The call ring every call-pattern detector reads (reference: the deques of _reference.Engine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace tw {

// The last `capacity` calls' canonical keys, and whether each call joined the previous call's
// repeat run (the stand-downs measure runs with the repeat detector's own relation).
class CallHistory {
public:
    // The bytes of a ring of `capacity` calls: the keys, then the join flags.
    static size_t storage_bytes(uint32_t capacity) noexcept {
        return 2 * static_cast<size_t>(capacity) * (sizeof(uint64_t) + 1);
    }
    // storage: storage_bytes(capacity) bytes, 8-aligned, that outlive the ring (a Session's
    // own block, so that a call finds the ring beside the session); null: the ring allocates.
    explicit CallHistory(uint32_t capacity, void* storage = nullptr);
    CallHistory(const CallHistory&) = delete;
    CallHistory& operator=(const CallHistory&) = delete;
    void push(uint64_t key, bool joined) noexcept {
        // Each entry is written twice, at i and i + capacity, so the last `n` entries are
        // always contiguous: detectors index them directly, with no modulo on the hot path.
        keys_[head_] = keys_[head_ + capacity_] = key;
        joins_[head_] = joins_[head_ + capacity_] = joined ? 1 : 0;
        head_ = head_ + 1 == capacity_ ? 0 : head_ + 1;
        if (size_ < capacity_) ++size_;
    }
    void clear() noexcept { size_ = 0; }
    // Take back the last n entries (at most size()): the ones before them are still in place.
    void pop(uint32_t n) noexcept {
        if (n > size_) n = size_;
        head_ = (head_ + capacity_ - n % capacity_) % capacity_;
        size_ -= n;
    }
    uint32_t size() const noexcept { return size_; }
    // The last n <= size() keys, oldest first.
    const uint64_t* keys(uint32_t n) const noexcept { return keys_ + head_ + capacity_ - n; }
    // Whether each of the last n calls joined its predecessor's repeat run, oldest first.
    const uint8_t* joins(uint32_t n) const noexcept { return joins_ + head_ + capacity_ - n; }
    size_t heap_bytes() const noexcept { return storage_bytes(capacity_); }

private:
    std::unique_ptr<uint64_t[]> owned_;  // the storage when none was given
    uint64_t* keys_;
    uint8_t* joins_;
    uint32_t capacity_;
    uint32_t head_ = 0;  // next slot to write
    uint32_t size_ = 0;
};

}  // namespace tw
