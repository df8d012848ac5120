#include "digest_lru.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <numeric>
#include <vector>

namespace tw {

namespace {

// Hash128s enough for n digests followed by their n stamps (rounded up).
Hash128* new_slots(uint32_t n) noexcept {
    const size_t bytes = static_cast<size_t>(n) * (sizeof(Hash128) + sizeof(uint16_t));
    return new (std::nothrow) Hash128[(bytes + sizeof(Hash128) - 1) / sizeof(Hash128)];
}

}  // namespace

DigestLRU::DigestLRU(uint32_t capacity, void* storage)
    : capacity_(capacity), first_(capacity < kInline ? capacity : kInline) {
    if (storage == nullptr) {  // the digests' slots hold the stamps too (rounded up)
        owned_.reset(new Hash128[(storage_bytes(capacity) + sizeof(Hash128) - 1) / sizeof(Hash128)]);
        storage = owned_.get();
    }
    std::memset(storage, 0, storage_bytes(capacity));
    digests_ = static_cast<Hash128*>(storage);
    stamps_ = reinterpret_cast<uint16_t*>(digests_ + first_);
}

bool DigestLRU::grow() noexcept {
    const uint32_t n = capacity_ - first_;
    more_.reset(new_slots(n));
    if (!more_) return false;
    more_stamps_ = reinterpret_cast<uint16_t*>(more_.get() + n);
    return true;
}

bool DigestLRU::seen_before(const Hash128& d) noexcept {
    if (tick_ == UINT16_MAX) renumber();
    const uint16_t now = ++tick_;
    // A linear scan: 64 slots of 16 bytes is a few cache lines, cheaper than any hash table.
    const uint32_t first = size_ < first_ ? size_ : first_;
    for (uint32_t i = 0; i < first; ++i) {
        if (digests_[i].low64 == d.low64 && digests_[i].high64 == d.high64) {
            stamps_[i] = now;
            return true;
        }
    }
    for (uint32_t i = first_; i < size_; ++i) {
        const Hash128& held = more_[i - first_];
        if (held.low64 == d.low64 && held.high64 == d.high64) {
            more_stamps_[i - first_] = now;
            return true;
        }
    }
    uint32_t slot = size_;
    // full (or out of memory for the later slots: then the first ones are all it has)
    if (size_ == capacity_ || (size_ == first_ && !more_ && !grow())) {
        slot = 0;
        for (uint32_t i = 1; i < size_; ++i)
            if (stamp(i) < stamp(slot)) slot = i;
    } else {
        ++size_;
    }
    digest(slot) = d;
    stamp(slot) = now;
    return false;
}

void DigestLRU::renumber() noexcept {
    // Rank the stamps 1..size in their current order (once per 65,535 lookups; size <= 1024).
    std::vector<uint32_t> order(size_);
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(),
              [this](uint32_t a, uint32_t b) { return stamp(a) < stamp(b); });
    for (uint32_t rank = 0; rank < size_; ++rank) stamp(order[rank]) = static_cast<uint16_t>(rank + 1);
    tick_ = static_cast<uint16_t>(size_);
}

}  // namespace tw
