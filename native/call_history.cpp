#include "call_history.h"

#include <cstring>

namespace tw {

CallHistory::CallHistory(uint32_t capacity, void* storage)
    : capacity_(capacity), span_(span(capacity)) {
    if (storage == nullptr) {  // the keys' words hold the join flags too (rounded up)
        owned_.reset(new uint64_t[(storage_bytes(capacity) + 7) / 8]);
        storage = owned_.get();
    }
    std::memset(storage, 0, storage_bytes(capacity));
    keys_ = static_cast<uint64_t*>(storage);
}

void CallHistory::slide() noexcept {
    // the next push drops the oldest of a full ring: capacity - 1 entries are enough
    const uint32_t keep = size_ < capacity_ ? size_ : capacity_ - 1;
    std::memmove(keys_, keys_ + end_ - keep, keep * sizeof(uint64_t));
    std::memmove(flags(), flags() + end_ - keep, keep);
    end_ = keep;
}

}  // namespace tw
