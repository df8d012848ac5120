#include "repeated_failure.h"

#include <new>

namespace tw {

bool RepeatedFailureDetector::fail(uint64_t tool, uint64_t signature,
                                   uint32_t threshold_at) noexcept {
    if (!entries) {
        entries.reset(new (std::nothrow) Entry[kMemory]);
        if (!entries) return false;  // out of memory: the failure is not remembered
    }
    ++clock;
    const uint64_t key = pair_key(tool, signature);
    uint32_t at = size;
    for (uint32_t k = 0; k < size; ++k) {
        if (entries[k].key == key) {
            at = k;
            break;
        }
    }
    if (at == size) {
        if (size == kMemory) {  // forget the least recently failed pair
            at = 0;
            for (uint32_t k = 1; k < size; ++k)
                if (entries[k].stamp < entries[at].stamp) at = k;
        } else {
            ++size;
        }
        entries[at] = Entry{key, 0, 0};
        reported = static_cast<uint8_t>(reported & ~(1u << at));
    }
    Entry& e = entries[at];
    e.stamp = clock;
    if (e.count < UINT32_MAX) ++e.count;
    last = e.count;
    if (e.count >= threshold_at && !(reported & (1u << at))) {
        reported = static_cast<uint8_t>(reported | (1u << at));
        return true;
    }
    return false;
}

}  // namespace tw
