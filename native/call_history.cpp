#include "call_history.h"

#include <cstring>

namespace tw {

CallHistory::CallHistory(uint32_t capacity, void* storage) : capacity_(capacity) {
    if (storage == nullptr) {  // the keys' words hold the join flags too (rounded up)
        owned_.reset(new uint64_t[(storage_bytes(capacity) + 7) / 8]);
        storage = owned_.get();
    }
    std::memset(storage, 0, storage_bytes(capacity));
    keys_ = static_cast<uint64_t*>(storage);
    joins_ = reinterpret_cast<uint8_t*>(keys_ + 2 * static_cast<size_t>(capacity));
}

}  // namespace tw
