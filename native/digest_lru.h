// The turn's last N distinct payload digests, least recently seen evicted (SPEC §1 no-new-state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "hash.h"

namespace tw {

class DigestLRU {
public:
    explicit DigestLRU(uint32_t capacity);

    // Remember `d`; true if it was already remembered (and it becomes the most recent).
    bool seen_before(const Hash128& d) noexcept;
    void clear() noexcept { size_ = 0; tick_ = 0; }
    uint32_t size() const noexcept { return size_; }
    size_t heap_bytes() const noexcept { return capacity_ * (sizeof(Hash128) + sizeof(uint16_t)); }

private:
    void renumber() noexcept;  // keeps recency stamps from wrapping

    std::unique_ptr<Hash128[]> digests_;
    std::unique_ptr<uint16_t[]> stamps_;  // last-seen tick of each slot (renumbered on wrap)
    uint32_t capacity_;
    uint32_t size_ = 0;
    uint16_t tick_ = 0;
};

}  // namespace tw
