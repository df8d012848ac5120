// The turn's last N distinct payload digests, least recently seen evicted (SPEC §1 no-new-state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "hash.h"

namespace tw {

class DigestLRU {
public:
    // The bytes of `capacity` digests and their stamps.
    static size_t storage_bytes(uint32_t capacity) noexcept {
        return static_cast<size_t>(capacity) * (sizeof(Hash128) + sizeof(uint16_t));
    }
    // storage: storage_bytes(capacity) bytes, 8-aligned, that outlive it (a Session's own
    // block); null: it allocates its own.
    explicit DigestLRU(uint32_t capacity, void* storage = nullptr);
    DigestLRU(const DigestLRU&) = delete;
    DigestLRU& operator=(const DigestLRU&) = delete;

    // Remember `d`; true if it was already remembered (and it becomes the most recent).
    bool seen_before(const Hash128& d) noexcept;
    void clear() noexcept { size_ = 0; tick_ = 0; }
    uint32_t size() const noexcept { return size_; }
    size_t heap_bytes() const noexcept { return storage_bytes(capacity_); }

private:
    void renumber() noexcept;  // keeps recency stamps from wrapping

    std::unique_ptr<Hash128[]> owned_;  // the storage when none was given
    Hash128* digests_;
    uint16_t* stamps_;  // last-seen tick of each slot (renumbered on wrap)
    uint32_t capacity_;
    uint32_t size_ = 0;
    uint16_t tick_ = 0;
};

}  // namespace tw
