// recycled-calls (SPEC §12.4): calls in a row that each repeat a call made among the last
// `window` calls and get the same answer that call got the time before. Reference:
// tripwire/signals/recycled_calls.py (its docstring states the decisions this unit implements).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "call_history.h"

namespace tw {

// The calls without a result yet, as a result finds the one it answers (results carry a tool
// name, not a call): written on the call path, so it is one cache line of integer work.
struct PendingCalls {
    static constexpr uint32_t kPending = 8;  // as recycled_calls.PENDING
    uint64_t slots[kPending];                 // (tool tag << 32) | key tag, circular
    uint8_t head = 0;                         // the oldest
    uint8_t size = 0;

    void push(uint64_t tool_hash, uint64_t key) noexcept {
        const uint64_t entry = (tool_hash << 32) | (key & 0xFFFFFFFFull);
        slots[(head + size) & (kPending - 1)] = entry;
        if (size < kPending) {
            ++size;
        } else {
            head = (head + 1) & (kPending - 1);  // the oldest is forgotten
        }
    }
    // The key tag of the oldest pending call of `tool_hash`'s tool, taken off; false if none.
    bool take(uint64_t tool_hash, uint32_t& key) noexcept;
    void retract(uint32_t calls) noexcept { size = calls >= size ? 0 : size - calls; }
    void clear() noexcept { head = size = 0; }
};

struct RecycledCallsDetector {
    static constexpr uint32_t kMaxWindow = 64;  // as recycled_calls.MAX_WINDOW
    // The window's first answered calls are held here; the rest, up to the window, are
    // allocated when the session has answered that many calls (most in a fleet have not),
    // and freed by reset.
    static constexpr uint32_t kInline = 8;
    // An answer's kind, in its tag's 2 low bits (recycled_calls.SUCCESS, NO_OP, FAILURE).
    enum Kind : uint32_t { kSuccess = 1, kNoOp = 2, kFailure = 3 };
    static uint32_t answer_tag(uint32_t kind, uint64_t value) noexcept {
        return (static_cast<uint32_t>(value) & ~3u) | kind;
    }

    uint32_t threshold;
    uint32_t window;
    uint32_t run = 0;
    bool tripped = false;
    uint32_t size = 0;  // answered calls held (at most window)
    uint32_t next = 0;  // where the next one goes
    uint64_t first[kInline];  // (key tag << 32) | answer tag, circular over the window...
    std::unique_ptr<uint64_t[]> more;  // ...its slots from kInline on, once written

    RecycledCallsDetector(uint32_t threshold_, uint32_t window_)
        : threshold(threshold_), window(window_ < kMaxWindow ? window_ : kMaxWindow) {}
    // The answered call's key tag and its answer's tag: true when the run reaches the
    // threshold for the first time (before the stand-down).
    bool observe(uint32_t key, uint32_t answer) noexcept;
    // One loop, one alert: the last `threshold` calls are one repeat run (repeat_on) or a
    // clean 2..cycle_max_period cycle (0: the cycle detector is off) whose block is not one run.
    bool stands_down(const CallHistory& h, bool repeat_on,
                     uint32_t cycle_max_period) const noexcept;
    void reset() noexcept {
        run = 0;
        tripped = false;
        size = 0;
        next = 0;
        more.reset();
    }
    size_t heap_bytes() const noexcept {
        return more ? (window - kInline) * sizeof(uint64_t) : 0;
    }

private:
    uint64_t& slot(uint32_t i) noexcept { return i < kInline ? first[i] : more[i - kInline]; }
};

}  // namespace tw
