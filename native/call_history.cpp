#include "call_history.h"

namespace tw {

CallHistory::CallHistory(uint32_t capacity)
    : keys_(new uint64_t[2 * capacity]()), joins_(new uint8_t[2 * capacity]()), capacity_(capacity) {}

}  // namespace tw
