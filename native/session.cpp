#include "session.h"

#include <algorithm>
#include <new>
#include <string>

#include "answer.h"
#include "hash.h"

namespace tw {

uint32_t Session::ring_capacity(const Settings& s) noexcept {
    return std::max(s.density_window, s.cycle_max_period * s.cycle_cycles);
}

size_t Session::history_bytes(const Settings& s) noexcept {
    return (CallHistory::storage_bytes(ring_capacity(s)) + 15) & ~size_t{15};
}

size_t Session::block_bytes(const Settings& s) noexcept {
    return history_bytes(s) + DigestLRU::storage_bytes(s.digest_memory);
}

Session* Session::create(const Settings& s) {
    constexpr std::align_val_t align{64};  // the object starts a cache line
    char* block = static_cast<char*>(::operator new(head_bytes() + block_bytes(s), align));
    try {
        return new (block) Session(s, block + head_bytes());
    } catch (...) {
        ::operator delete(block, align);
        throw;
    }
}

void Session::destroy(Session* session) noexcept {
    if (session == nullptr) return;
    session->~Session();
    ::operator delete(static_cast<void*>(session), std::align_val_t{64});
}

// Members are built in declaration order: the call ring first, in the block's first bytes
// after the object, the digests after it (both null storage for a self-allocating session).
Session::Session(const Settings& s, void* storage)
    : enabled(s.enabled),
      answer_volatile(s.answer_volatile),
      history(ring_capacity(s), storage),
      name(s.name_threshold, (s.enabled & kRepeat) ? s.repeat_threshold : 0),
      silence(s.silence_threshold),
      poll_plateau(s.poll_plateau),
      repeat(s.repeat_threshold, (s.enabled & kRepeat) != 0),
      cycle(s.cycle_max_period, s.cycle_cycles),
      density(s.density_window, s.density_threshold, s.density_defer_run,
              s.density_defer_cycle_period),
      failures(s.failure_threshold),
      no_ops(s.no_op_threshold),
      stale(s.no_new_state_threshold),
      cycle_max_period(s.cycle_max_period),
      digests(s.digest_memory,
              storage ? static_cast<char*>(storage) + history_bytes(s) : nullptr),
      repeated_failure(s.repeated_failure_threshold),
      recycled(s.recycled_threshold, s.recycled_window),
      unknown_tool(s.unknown_tool_threshold),
      density_window(s.density_window),
      text(s.repeated_text_threshold),
      empty(s.empty_responses_threshold),
      storm(s.compaction_per_turn, s.compaction_in_a_row),
      warn_signals(s.warn_signals),
      persistent(s.persistent_warnings_threshold),
      looping(s.looping_text_threshold, s.looping_text_max_period) {}

uint32_t Session::observe_call(const CanonicalCall& c, uint64_t name_hash,
                               uint64_t identity, const ToolRule* rule) {
    const uint32_t on = enabled;
    bool fired;
    // issue 39: the tool's own thresholds; the name run stands down for a run its repeat
    // threshold reports (kRuleOff: never reached, so never)
    const uint32_t repeat_at = rule ? rule->repeat_threshold : repeat.threshold;
    const bool joined = repeat.observe(c, name_hash, fired, repeat_at);
    uint32_t mask = fired ? static_cast<uint32_t>(kRepeat) : 0u;
    const uint8_t flags = static_cast<uint8_t>(joined ? kJoined : 0) |
                          (rule ? call_flags(rule->off) : static_cast<uint8_t>(0));
    history.push(c.key, flags);
    cycle.called();
    ++attempt_calls;
    if ((on & kCycle) && cycle.observe(history)) mask |= kCycle;
    if ((on & kDensity) && density.observe(history)) mask |= kDensity;
    const bool named = rule ? name.observe(identity, repeat.run, rule->name_threshold,
                                           (on & kRepeat) ? repeat_at : 0u)
                            : name.observe(identity, repeat.run);
    if (named && (on & kName)) mask |= kName;
    if (silence.observe_call(!(flags & kSilenceOff)) && (on & kSilence)) mask |= kSilence;
    if (on & kRecycled) pending.push(name_hash, c.key);  // its result will say which call
    if (mask) mask = warned(mask);  // (a mask of 0, the common case, loads nothing more)
    if (stats) stats->after_call(*this);
    return mask;
}

uint32_t Session::observe_result(uint64_t name_hash, bool failed, bool no_op,
                                 const ToolRule* rule,
                                 const void* payload, size_t payload_len, bool has_payload,
                                 const char* error, size_t error_len, const AnswerKeys* keys,
                                 bool unknown) {
    attempt_calls = 0;  // a result: the response that made its call is over
    const uint32_t stale_before = stale.run;
    uint32_t mask = result_mask(name_hash, failed, no_op, rule, payload, payload_len,
                                has_payload, error, error_len, keys, unknown);
    // no-new-state's run going on for another threshold is its warning persisting (counted
    // by persistent-warnings, not alerted again)
    const uint32_t persisted = stale.run > stale_before && stale.run > stale.threshold &&
                               stale.run % stale.threshold == 0 && (enabled & kNoNewState)
                                   ? static_cast<uint32_t>(kNoNewState) : 0u;
    if (mask | persisted) mask = warned(mask, persisted);
    if (stats) stats->after_result(*this);
    return mask;
}

uint32_t Session::result_mask(uint64_t name_hash, bool failed, bool no_op,
                              const ToolRule* rule,
                              const void* payload, size_t payload_len, bool has_payload,
                              const char* error, size_t error_len, const AnswerKeys* keys,
                              bool unknown) {
    const uint32_t on = enabled;
    // issue 39: the signals the tool's rule turns off skip its result
    const uint32_t off = rule ? rule->off : 0u;
    const bool stale_off = (off & kNoNewState) != 0;
    const bool failure_off = (off & kRepeatedFailure) != 0;
    const uint32_t classes = answer_volatile;
    uint32_t mask = 0;
    // unknown-tool (SPEC §12.4); a failure it counts is its own (one behaviour, one alert)
    if (unknown_tool.observe(unknown) && (on & kUnknownTool)) mask |= kUnknownTool;
    const bool unknowns = unknown && failed && (on & kUnknownTool);
    // recycled-calls (SPEC §12.4): the call this result answers, the oldest pending call of its
    // tool (taken off for an exempt tool too, whose results neither count nor break the run)
    uint32_t call_key = 0;
    const bool recycles =
        (on & kRecycled) && pending.take(name_hash, call_key) && !(off & kRecycled);
    // the error signature, for repeated-failure, the failure streak's stand-down (SPEC §12.3)
    // and recycled-calls (a failure's answer)
    const bool signed_failure = failed && (on & kRepeatedFailure) && !failure_off;
    const uint64_t signature = failed && (signed_failure || recycles)
        ? error_signature_key(error, error ? error_len : 0, classes, keys) : 0;
    uint64_t pair = 0;
    if (unknowns) {
        pair = kUnknownPair;  // the streak stands down for unknown-tool (SPEC §12.3's rule)
    } else if ((on & kRepeatedFailure) && !failure_off) {  // SPEC §7.3
        if (failed) {
            pair = RepeatedFailureDetector::pair_key(name_hash, signature);
            if (repeated_failure.fail(name_hash, signature,
                                      rule ? rule->repeated_failure_threshold
                                           : repeated_failure.threshold))
                mask |= kRepeatedFailure;
        } else if (!no_op) {
            repeated_failure.succeed();  // a productive success may have changed it
        }
    }
    // one answer for its readers: the repeat run (SPEC §10.24), the seen-set (both take the
    // empty answer as no payload, SPEC §12.1) and recycled-calls
    const bool for_run = repeat.awaits(name_hash);
    Hash128 answer{};
    const bool answered = has_payload && !failed &&
                          ((!no_op && (for_run || !stale_off)) || recycles) &&
                          answer_digest(payload, payload_len, classes, keys, answer);
    if (for_run) {
        repeat.observe_result(failed, no_op, answered ? &answer : nullptr,
                              poll_plateau);
    }
    if (recycles) {
        using R = RecycledCallsDetector;
        const uint32_t tag = failed  ? R::answer_tag(R::kFailure, signature)
                             : no_op ? R::answer_tag(R::kNoOp, answered ? answer.low64 : 0)
                                     : R::answer_tag(R::kSuccess, answered ? answer.low64 : 0);
        if (recycled.observe(call_key, tag) &&
            !recycled.stands_down(history, (on & kRepeat) != 0,
                                  (on & kCycle) ? cycle_max_period : 0))
            mask |= kRecycled;  // (a run stood down on stays tripped: counted as reported)
    }
    // issue 39: a tool whose rule turns a streak off neither counts in it nor breaks it
    if (failed) {
        // a failure is neither a no-op nor progress: the other runs are untouched
        if (!(off & kFailure) && failures.fail(pair, signed_failure || unknowns) &&
            (on & kFailure))
            mask |= kFailure;
        return mask;
    }
    if (!(off & kFailure)) failures.reset();
    if (no_op) {
        if (!(off & kNoOp) && no_ops.extend() && (on & kNoOp)) mask |= kNoOp;
        return mask;
    }
    if (!(off & kNoOp)) no_ops.reset();
    if (stale_off) return mask;
    if (!answered) {
        stale.reset();  // no payload, or the empty answer: no evidence of a stall
    } else if (digests.seen_before(answer)) {
        if (stale.extend() && (on & kNoNewState)) mask |= kNoNewState;
    } else {
        stale.reset();  // new information breaks the run
        cycle.new_answer();  // and is a cycle's progress
        storm.new_answer();  // and work between compactions
        persistent.progress();  // and is progress (persistent-warnings)
    }
    return mask;
}

uint32_t Session::observe_text(bool has_words, uint64_t key, const char* words,
                               size_t len) noexcept {
    // repeated-text reads the calls since the last words before they end that run
    const bool fired = has_words &&
        text.observe(key, silence.run, (enabled & kRepeat) ? repeat.run : 0u);
    // looping-text (issue 39): each message on its own
    const bool loops = has_words && words && looping.observe(words, len);
    silence.observe_text(has_words);
    empty.observe_text(has_words);
    storm.observe_text(has_words);
    return after_event((fired && (enabled & kRepeatedText) ? kRepeatedText : 0u) |
                       (loops && (enabled & kLoopingText) ? kLoopingText : 0u));
}

uint32_t Session::observe_response(bool produced) noexcept {
    attempt_calls = 0;  // the response completed: its calls are no retry's
    const bool fired = empty.observe_response(silence.run, produced);
    return after_event(fired && (enabled & kEmptyResponses) ? kEmptyResponses : 0u);
}

uint32_t Session::observe_compaction() noexcept {
    const bool fired = storm.observe();
    return after_event(fired && (enabled & kCompactionStorm) ? kCompactionStorm : 0u);
}

uint32_t Session::after_event(uint32_t mask) noexcept {
    if (mask) mask = warned(mask);
    if (stats) stats->after_event(*this);
    return mask;
}

uint32_t Session::warned(uint32_t mask, uint32_t persisted) noexcept {
    // warn_signals and the detector sit past the call path's lines: read only when a signal
    // fired (persistent.observe ignores an event with no warn signal in it)
    if (persistent.observe((mask | persisted) & warn_signals) && (enabled & kPersistentWarnings))
        mask |= kPersistentWarnings;
    return mask;
}

void Session::end_turn() noexcept {
    storm.end_turn(silence.run);  // a turn that ends in agent text
}

void Session::turn_boundary() noexcept {
    attempt_calls = 0;
    no_ops.reset();
    digests.clear();
    stale.reset();
    unknown_tool.reset();
    text.reset();
    storm.turn_boundary();
}

void Session::reset() noexcept {
    history.clear();
    repeat.reset();
    cycle.reset();
    density.reset();
    name.reset();
    silence.reset();
    failures.reset();
    no_ops.reset();
    stale.reset();
    digests.clear();
    repeated_failure.reset();
    pending.clear();
    recycled.reset();
    unknown_tool.reset();
    text.reset();
    empty.reset();
    storm.reset();
    attempt_calls = 0;
    persistent.reset();
    looping.reset();
    if (stats) stats->after_reset();
}

void Session::retract_calls(uint32_t calls) noexcept {
    if (calls == 0) return;
    // the streak's uncounted calls among those taken back (the ring holds the newest)
    const uint32_t held = calls < history.size() ? calls : history.size();
    const uint8_t* flags = history.flags(held);
    uint32_t exempt = 0;
    for (uint32_t i = 0; i < held; ++i) exempt += (flags[i] & kSilenceOff) != 0;
    history.pop(calls);
    // density's fast path holds that only the newest key's count rose since the last window;
    // with calls taken back, older ones are in the window again: count it whole next time
    density.below = false;
    repeat.retract(calls);
    cycle.retract(calls);
    attempt_calls = attempt_calls > calls ? attempt_calls - calls : 0;
    name.retract(calls);
    silence.retract(calls, exempt);
    pending.retract(calls);
    if (stats) stats->after_reset();  // the history changed under its per-period counts
}

size_t Session::state_bytes() const noexcept {
    // the run's longest spellings are on the heap only past the string's own (inline) buffer,
    // which sizeof(Session) already counts
    static const size_t inline_capacity = std::string().capacity();
    const size_t longest = repeat.longest.capacity();
    return sizeof(Session) + history.heap_bytes() + digests.heap_bytes() + recycled.heap_bytes() +
           density.heap_bytes() + repeated_failure.heap_bytes() +
           (longest > inline_capacity ? longest + 1 : 0) +
           repeat.ends_bytes();
}

}  // namespace tw
