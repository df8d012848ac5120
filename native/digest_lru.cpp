#include "digest_lru.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

namespace tw {

DigestLRU::DigestLRU(uint32_t capacity, void* storage) : capacity_(capacity) {
    if (storage == nullptr) {  // the digests' slots hold the stamps too (rounded up)
        owned_.reset(new Hash128[(storage_bytes(capacity) + sizeof(Hash128) - 1) / sizeof(Hash128)]);
        storage = owned_.get();
    }
    std::memset(storage, 0, storage_bytes(capacity));
    digests_ = static_cast<Hash128*>(storage);
    stamps_ = reinterpret_cast<uint16_t*>(digests_ + capacity);
}

bool DigestLRU::seen_before(const Hash128& d) noexcept {
    if (tick_ == UINT16_MAX) renumber();
    const uint16_t now = ++tick_;
    // A linear scan: 64 slots of 16 bytes is a few cache lines, cheaper than any hash table.
    for (uint32_t i = 0; i < size_; ++i) {
        if (digests_[i].low64 == d.low64 && digests_[i].high64 == d.high64) {
            stamps_[i] = now;
            return true;
        }
    }
    uint32_t slot = size_;
    if (size_ == capacity_) {
        slot = 0;
        for (uint32_t i = 1; i < size_; ++i)
            if (stamps_[i] < stamps_[slot]) slot = i;
    } else {
        ++size_;
    }
    digests_[slot] = d;
    stamps_[slot] = now;
    return false;
}

void DigestLRU::renumber() noexcept {
    // Rank the stamps 1..size in their current order (once per 65,535 lookups; size <= 1024).
    std::vector<uint32_t> order(size_);
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(),
              [this](uint32_t a, uint32_t b) { return stamps_[a] < stamps_[b]; });
    for (uint32_t rank = 0; rank < size_; ++rank) stamps_[order[rank]] = static_cast<uint16_t>(rank + 1);
    tick_ = static_cast<uint16_t>(size_);
}

}  // namespace tw
