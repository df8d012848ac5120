// The turn's last N distinct payload digests, least recently seen evicted (SPEC §1 no-new-state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "hash.h"

namespace tw {

// The first kInline slots are a Session's own (in its block); the rest, up to the capacity,
// are allocated when a turn's distinct answers outgrow them, and freed when the turn's
// memory is (clear): most turns of most sessions see a few distinct answers, and an idle
// session of a fleet holds the few slots alone. Which digests it remembers is the same.
class DigestLRU {
public:
    static constexpr uint32_t kInline = 8;
    // The bytes of the first slots (a Session's block holds them): their digests and stamps.
    static size_t storage_bytes(uint32_t capacity) noexcept {
        return slot_bytes(capacity < kInline ? capacity : kInline);
    }
    // storage: storage_bytes(capacity) bytes, 8-aligned, that outlive it (a Session's own
    // block); null: it allocates its own.
    explicit DigestLRU(uint32_t capacity, void* storage = nullptr);
    DigestLRU(const DigestLRU&) = delete;
    DigestLRU& operator=(const DigestLRU&) = delete;

    // Remember `d`; true if it was already remembered (and it becomes the most recent).
    bool seen_before(const Hash128& d) noexcept;
    void clear() noexcept {
        size_ = 0;
        tick_ = 0;
        more_.reset();  // the turn's later slots: allocated again when a turn needs them
    }
    uint32_t size() const noexcept { return size_; }
    // The first slots, and the later ones while allocated.
    size_t heap_bytes() const noexcept {
        return slot_bytes(first_) + (more_ ? slot_bytes(capacity_ - first_) : 0);
    }

private:
    static size_t slot_bytes(uint32_t n) noexcept {
        return static_cast<size_t>(n) * (sizeof(Hash128) + sizeof(uint16_t));
    }
    Hash128& digest(uint32_t i) noexcept {
        return i < first_ ? digests_[i] : more_[i - first_];
    }
    uint16_t& stamp(uint32_t i) noexcept {
        return i < first_ ? stamps_[i] : more_stamps_[i - first_];
    }
    bool grow() noexcept;      // the later slots; false if they could not be allocated
    void renumber() noexcept;  // keeps recency stamps from wrapping

    std::unique_ptr<Hash128[]> owned_;  // the first slots' storage when none was given
    std::unique_ptr<Hash128[]> more_;   // the later slots' digests, then their stamps
    Hash128* digests_;
    uint16_t* stamps_;  // last-seen tick of each slot (renumbered on wrap)
    uint16_t* more_stamps_ = nullptr;
    uint32_t capacity_;
    uint32_t first_;  // the slots in storage (min(capacity, kInline))
    uint32_t size_ = 0;
    uint16_t tick_ = 0;
};

}  // namespace tw
