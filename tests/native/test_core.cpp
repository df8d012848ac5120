// The C++ core on its own, under AddressSanitizer and UndefinedBehaviorSanitizer: the
// canonicalizer, each detector and the session (ctest target of tests/native/CMakeLists.txt;
// .ci/run builds and runs it). The behaviour itself is pinned by the Python suite against the
// reference; this driver is for memory and UB errors the bindings would hide, plus a few
// facts the rest depends on.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "answer.h"
#include "canonical.h"
#include "digest_lru.h"
#include "hash.h"
#include "session.h"
#include "tokens.h"

namespace {

int failures = 0;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                        \
        }                                                                      \
    } while (0)

uint64_t key(tw::Canonicalizer& c, const std::string& name, const std::string& args) {
    return c.canonicalize(name.data(), name.size(), args.data(), args.size()).key;
}

tw::Settings defaults() {
    tw::Settings s{};
    s.enabled = 0xFF;
    s.repeat_threshold = 5;
    s.poll_plateau = 10;
    s.cycle_max_period = 4;
    s.cycle_cycles = 3;
    s.density_window = 12;
    s.density_threshold = 8;
    s.density_defer_run = 5;
    s.density_defer_cycle_period = 4;
    s.name_threshold = 15;
    s.failure_threshold = 3;
    s.no_op_threshold = 3;
    s.no_new_state_threshold = 6;
    s.silence_threshold = 12;
    s.digest_memory = 64;
    s.answer_volatile = tw::kAllClasses;
    s.recycled_threshold = 8;
    s.recycled_window = 64;
    s.unknown_tool_threshold = 3;
    s.repeated_text_threshold = 3;
    s.empty_responses_threshold = 3;
    s.compaction_per_turn = 3;
    s.compaction_in_a_row = 5;
    return s;
}

uint32_t call(tw::Session& s, tw::Canonicalizer& c, const std::string& name,
              const std::string& args) {
    const uint64_t name_hash = tw::xxh3_64(name.data(), name.size());
    return s.observe_call(c.canonicalize(name.data(), name.size(), args.data(), args.size()),
                          name_hash, name_hash);
}

void test_hash() {
    CHECK(tw::xxh3_64("", 0) == 0x2D06800538D394C2ull);  // the published XXH3-64 of ""
    const std::string big(10000, 'x');  // the long-input path
    CHECK(tw::xxh3_64(big.data(), big.size()) == tw::xxh3_64(big.data(), big.size()));
}

void test_canonicalizer() {
    tw::Canonicalizer c;
    // member order, whitespace, path spelling and number spelling do not change the key
    CHECK(key(c, "read_file", R"({"path": "./src/a.py", "limit": 200})") ==
          key(c, "read_file", R"({"limit":2e2,"path":"src/a.py"})"));
    CHECK(key(c, "read_file", R"({"path": "a"})") != key(c, "grep", R"({"path": "a"})"));
    // not objects: raw bytes
    const auto& raw = c.canonicalize("x", 1, "[1, 2]", 6);
    CHECK(!raw.is_object);
    CHECK(key(c, "x", "[1, 2]") != key(c, "x", "[1,2]"));
    // pathological input: deep nesting, truncated, invalid UTF-8, huge exponents
    std::string deep(1000, '[');
    deep = "{\"a\":" + deep;
    CHECK(!c.canonicalize("x", 1, deep.data(), deep.size()).is_object);
    const char* bad[] = {"{\"a\":", "{\"a\":\"\xff\"}", "{\"a\":1e99999999999999999}", "{", "",
                         "{\"path\":\"../../..//./x\"}", "{\"a\":\"\\ud800\"}"};
    for (const char* b : bad) c.canonicalize("x", 1, b, std::strlen(b));
    std::string out;
    CHECK(c.canonical_form(R"({"b":1,"a":[true,null]})", 23, out));
    CHECK(out == R"({"a":[true,null],"b":1})");
    CHECK(tw::clean_path_string("a/./b/../c//", 12) == "a/c");
    CHECK(tw::is_path_key("sourceFile", 10) && !tw::is_path_key("limit", 5));
    // the memo: many distinct calls through its 64 slots, then repeats
    for (int i = 0; i < 300; ++i) {
        const std::string args = "{\"path\":\"f" + std::to_string(i % 70) + "\"}";
        CHECK(key(c, "read_file", args) == key(c, "read_file", args));
    }
}

void test_detectors_through_the_session() {
    tw::Canonicalizer c;
    tw::Session s(defaults());
    uint32_t mask = 0;
    for (int i = 0; i < 5; ++i) mask = call(s, c, "read_file", R"({"path": "a.py"})");
    CHECK(mask == tw::kRepeat);  // the fifth identical call
    CHECK(s.repeat.run == 5);
    s.reset();
    mask = 0;
    for (int lap = 0; lap < 3; ++lap) {
        mask |= call(s, c, "read_file", R"({"path": "a.py"})");
        mask |= call(s, c, "grep", R"({"pattern": "x"})");
    }
    CHECK(mask & tw::kCycle);
    CHECK(s.cycle.period == 2);
    s.reset();
    mask = 0;
    for (int i = 0; i < 3; ++i) mask |= s.observe_result(0, true, false, nullptr, nullptr, 0, false);
    CHECK(mask == tw::kFailure);
    mask = 0;
    for (int i = 0; i < 3; ++i) mask |= s.observe_result(0, false, true, nullptr, nullptr, 0, false);
    CHECK(mask == tw::kNoOp);
    mask = 0;
    const std::string payload(4096, 'p');
    for (int i = 0; i < 7; ++i)
        mask |= s.observe_result(0, false, false, nullptr, payload.data(), payload.size(), true);
    CHECK(mask == tw::kNoNewState);
    s.turn_boundary();
    CHECK(s.stale.run == 0 && s.no_ops.run == 0);
    s.reset();
    mask = 0;
    for (int i = 0; i < 12; ++i)
        mask |= call(s, c, "bash", "{\"command\":\"step " + std::to_string(i) + "\"}");
    CHECK(mask == tw::kSilence);  // the name run (15) has not been reached
    s.observe_text(true);
    CHECK(s.silence.run == 0);
    for (int i = 12; i < 15; ++i)
        mask |= call(s, c, "bash", "{\"command\":\"step " + std::to_string(i) + "\"}");
    CHECK(mask & tw::kName);
    CHECK(s.state_bytes() > sizeof(tw::Session));
}

void test_polling_with_changing_output() {
    // SPEC §10.24: a poll whose output changes is no loop; once it stops changing, it is
    tw::Canonicalizer c;
    tw::Session s(defaults());
    const std::string tool = "wait_and_verify";  // exempt from no-new-state, not from this
    const uint64_t h = tw::xxh3_64(tool.data(), tool.size());
    // exempt_tools' rule (signals/tool_rules.py): the three result signals off for the tool
    const tw::ToolRule exempt{tw::kNoNewState | tw::kRepeatedFailure | tw::kRecycled, 5, 15, 3};
    uint32_t mask = 0;
    for (int i = 0; i < 20; ++i) {
        mask |= call(s, c, tool, R"({"deploy": "api"})");
        const std::string out = std::to_string(i) + " of 20 updated replicas";
        mask |= s.observe_result(h, false, false, &exempt, out.data(), out.size(), true);
        if (i % 5 == 4) s.observe_text(true);  // a word to the user now and then
    }
    CHECK(mask == 0);
    CHECK(s.repeat.run == 20 && s.repeat.poll == tw::kPollChanging);
    // SPEC §12.2: stuck at its last answer (only a timing differs), it trips at the call after
    // the poll_plateau-th (10th) result with that answer
    for (int i = 0; i < 10; ++i) {
        CHECK(call(s, c, tool, R"({"deploy": "api"})") == 0);
        const std::string same = "20 of 20 updated replicas in " + std::to_string(i) + ".5s";
        CHECK(s.observe_result(h, false, false, &exempt, same.data(), same.size(), true) == 0);
        CHECK(s.repeat.poll == (i < 9 ? tw::kPollChanging : tw::kPollStoppedChanging));
    }
    CHECK(s.repeat.plateau == 10);
    CHECK(call(s, c, tool, R"({"deploy": "api"})") == tw::kRepeat);
}

void test_density_and_rings_at_their_limits() {
    tw::Settings st = defaults();
    st.cycle_max_period = 16;
    st.cycle_cycles = 4;   // a 64-call history
    st.density_window = 64;
    st.density_threshold = 40;
    tw::Canonicalizer c;
    tw::Session s(st);
    uint32_t mask = 0;
    for (int i = 0; i < 500; ++i) {
        const std::string args = (i % 3) ? R"({"path":"hot"})" : "{\"n\":" + std::to_string(i) + "}";
        mask |= call(s, c, "read_file", args);
    }
    CHECK(mask & tw::kDensity);
}

void test_digest_lru() {
    tw::DigestLRU lru(4);
    tw::Hash128 d[6];
    for (int i = 0; i < 6; ++i) d[i] = tw::xxh3_128(&i, sizeof(i));
    for (int i = 0; i < 4; ++i) CHECK(!lru.seen_before(d[i]));
    CHECK(lru.seen_before(d[0]));   // refreshed: d[1] is now the least recent
    CHECK(!lru.seen_before(d[4]));  // evicts d[1]
    CHECK(!lru.seen_before(d[1]));
    CHECK(lru.seen_before(d[0]));
    for (int i = 0; i < 70000; ++i) lru.seen_before(d[i % 6]);  // the recency stamps wrap
    CHECK(lru.size() == 4);
}

void test_digest_lru_past_its_first_slots() {
    // Past its first kInline slots the LRU allocates the rest of its capacity, and frees them
    // with the turn's memory: it must remember exactly what a plain LRU of that capacity does.
    const uint32_t capacity = 20;
    tw::DigestLRU lru(capacity);
    const size_t small = lru.heap_bytes();
    std::vector<int> model;  // most recent last
    for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < 3000; ++i) {
            const int v = (i * 7919 + i / 37 + round) % (round == 1 ? 9 : 31);
            const tw::Hash128 d = tw::xxh3_128(&v, sizeof(v));
            auto at = std::find(model.begin(), model.end(), v);
            const bool seen = at != model.end();
            if (seen) model.erase(at);
            else if (model.size() == capacity) model.erase(model.begin());
            model.push_back(v);
            CHECK(lru.seen_before(d) == seen);
        }
        CHECK(lru.size() == model.size());
        CHECK(lru.heap_bytes() > small);
        lru.clear();  // the turn's later slots go
        model.clear();
        CHECK(lru.heap_bytes() == small && lru.size() == 0);
    }
}

void test_recycled_window_past_its_first_slots() {
    // The window's slots past the first kInline are allocated once written, freed by reset:
    // each answered call must find what a plain window of the last `window` calls holds.
    for (uint32_t window : {2u, 8u, 9u, 20u, 64u}) {
        tw::RecycledCallsDetector d(3, window);
        std::vector<std::pair<uint32_t, uint32_t>> model;  // oldest first
        uint32_t run = 0;
        for (int round = 0; round < 2; ++round) {
            for (uint32_t i = 0; i < 500; ++i) {
                const uint32_t key = (i * 2654435761u + round) % (window + 5);
                const uint32_t answer = (i / 7) % 3;
                bool repeat = false;
                for (auto at = model.rbegin(); at != model.rend(); ++at) {
                    if (at->first == key) {
                        repeat = at->second == answer;
                        break;
                    }
                }
                model.emplace_back(key, answer);
                if (model.size() > window) model.erase(model.begin());
                run = repeat ? run + 1 : 0;
                d.observe(key, answer);
                CHECK(d.run == run && d.size == model.size());
            }
            CHECK((d.heap_bytes() > 0) == (window > tw::RecycledCallsDetector::kInline));
            d.reset();
            model.clear();
            run = 0;
            CHECK(d.heap_bytes() == 0 && d.size == 0);
        }
    }
}

void test_tokens() {
    CHECK(tw::tokens_for_bytes(0) == 0 && tw::tokens_for_bytes(1) == 1 &&
          tw::tokens_for_bytes(3) == 1 && tw::tokens_for_bytes(4) == 2);
    const uint16_t ucs2[] = {0x41, 0x3B1, 0x4E2D, 0xD800};
    CHECK(tw::utf8_length_ucs2(ucs2, 4) == 1 + 2 + 3 + 3);
}

}  // namespace

void test_repeated_failure_and_retraction() {
    tw::Settings st = defaults();
    st.enabled = 0x1FF;
    st.repeated_failure_threshold = 3;
    tw::Canonicalizer c;
    tw::Session s(st);
    const std::string e1 = "ModuleNotFoundError at 2026-12-03T14:11:20Z in /tmp/x1/a.py:12";
    const std::string e2 = "ModuleNotFoundError at 2026-12-04T09:00:01Z in /tmp/y22/a.py:7";
    uint32_t mask = 0;
    mask |= s.observe_result(1, true, false, nullptr, nullptr, 0, false, e1.data(), e1.size());
    mask |= s.observe_result(1, true, false, nullptr, nullptr, 0, false, e2.data(), e2.size());
    CHECK((mask & tw::kRepeatedFailure) == 0);
    mask = s.observe_result(1, true, false, nullptr, nullptr, 0, false, e1.data(), e1.size());
    CHECK(mask & tw::kRepeatedFailure);
    CHECK(s.repeated_failure.last == 3);
    // nine pairs: the memory stays at eight entries, a null error is no text
    for (int k = 0; k < 20; ++k) {
        const std::string e = "error " + std::string(1, static_cast<char>('a' + k));
        s.observe_result(2, true, false, nullptr, nullptr, 0, false, e.data(), e.size());
    }
    CHECK(s.repeated_failure.size == tw::RepeatedFailureDetector::kMemory);
    s.observe_result(3, true, false, nullptr, nullptr, 0, false, nullptr, 0);
    std::string out;  // the signature: the answer scanner's signature mode (a NUL ends no path)
    tw::scan_answer("\0/tmp/x", 7, tw::kAllClasses, nullptr, true, out);
    CHECK(out == std::string("\0/tmp/#", 7));
    tw::scan_answer("", 0, tw::kAllClasses, nullptr, true, out);
    CHECK(out.empty());
    // retraction: more than the ring holds, then an empty session
    s.reset();
    for (int i = 0; i < 30; ++i) call(s, c, "read_file", R"({"path": "a.py"})");
    s.retract_calls(100);
    CHECK(s.repeat.run == 0 && s.history.size() == 0 && s.silence.run == 0);
    s.retract_calls(3);
    for (int i = 0; i < 4; ++i) call(s, c, "read_file", R"({"path": "a.py"})");
    s.retract_calls(1);
    CHECK(s.repeat.run == 3 && s.history.size() == 3 && s.name.run == 3);
}

void test_session_in_one_block() {
    // Session::create lays the rings out after the object in one block: it must see exactly
    // what a self-allocating session sees, past the rings' wrap, and free cleanly (ASan).
    tw::Canonicalizer c;
    tw::Settings st = defaults();
    st.digest_memory = 4;
    tw::Session own(st);
    tw::Session* block = tw::Session::create(st);
    const char* tools[] = {"read_file", "grep", "read_file", "bash", "read_file", "read_file"};
    for (int i = 0; i < 200; ++i) {
        const std::string name = tools[(i * 7 + i / 13) % 6];
        const std::string args = "{\"path\": \"f" + std::to_string(i % 5) + ".py\"}";
        CHECK(call(*block, c, name, args) == call(own, c, name, args));
        const std::string payload = "out " + std::to_string(i % 6);
        CHECK(block->observe_result(0, i % 11 == 0, i % 17 == 0, nullptr, payload.data(),
                                    payload.size(), true) ==
              own.observe_result(0, i % 11 == 0, i % 17 == 0, nullptr, payload.data(),
                                 payload.size(), true));
        if (i % 50 == 49) {
            block->turn_boundary();
            own.turn_boundary();
        }
        if (i == 120) {
            block->retract_calls(3);
            own.retract_calls(3);
        }
    }
    CHECK(block->repeat.run == own.repeat.run && block->stale.run == own.stale.run);
    CHECK(block->state_bytes() == own.state_bytes());
    CHECK(reinterpret_cast<uintptr_t>(block) % 64 == 0);
    block->reset();
    tw::Session::destroy(block);
    tw::Session::destroy(nullptr);
}

// The call ring against a plain list of every call pushed: its last n keys and join flags,
// oldest first, through every slide of its buffer and pops of up to more than it holds.
void test_call_history_slides() {
    for (uint32_t capacity : {1u, 2u, 5u, 12u, 28u, 64u}) {  // room for 4 more, and a quarter
        tw::CallHistory h(capacity);
        std::vector<uint64_t> all;
        uint32_t expected = 0;  // what it holds: up to capacity, less what was taken back
        for (uint64_t i = 1; i <= 200; ++i) {
            h.push(i * 7, i % 3 == 0 ? tw::kJoined : 0);
            all.push_back(i * 7);
            expected = std::min(expected + 1, capacity);
            if (i % 17 == 0) {  // take back some calls (at times more than the ring holds)
                const uint32_t n = static_cast<uint32_t>(i % 4 + (i % 34 == 0 ? capacity : 0));
                const uint32_t popped = std::min(n, expected);
                h.pop(n);
                all.resize(all.size() - popped);
                expected -= popped;
            }
            CHECK(h.size() == expected);
            const uint64_t* keys = h.keys(h.size());
            const uint8_t* flags = h.flags(h.size());
            for (uint32_t k = 0; k < h.size(); ++k) {
                const uint64_t key = all[all.size() - h.size() + k];
                CHECK(keys[k] == key);
                CHECK(flags[k] == ((key / 7) % 3 == 0 ? tw::kJoined : 0));
            }
        }
        h.clear();
        CHECK(h.size() == 0);
        h.push(5, tw::kJoined);
        CHECK(h.size() == 1 && h.keys(1)[0] == 5 && h.flags(1)[0] == tw::kJoined);
    }
}

std::string scanned(const std::string& in, bool signature = false,
                    const tw::AnswerKeys* keys = nullptr) {
    std::string out = "untouched";
    if (!tw::scan_answer(in.data(), in.size(), tw::kAllClasses, keys, signature, out))
        return "(none)";
    return out;
}

void test_answer_scanner() {
    const std::string P(1, tw::kPlaceholder);
    CHECK(scanned("1 failed in 0.53s") == "1 failed in " + P);
    CHECK(scanned("/bin/bash: line 11301: cd: x") == "/bin/bash: line " + P + ": cd: x");
    CHECK(scanned("<A at 0x7f3a9c2d> pid 42 /tmp/tmpab/o 2026-12-04T10:22:31Z") ==
          "<A at " + P + "> pid " + P + " /tmp/" + P + "/o " + P);
    CHECK(scanned("3 of 6 replicas") == "(none)");  // small integers stay
    CHECK(scanned("a  b 12 py3 7f3a9c", true) == "a b # py# #");
    CHECK(scanned("", true).empty());
    tw::AnswerKeys keys;
    keys.keys = {"request_id"};
    CHECK(scanned("{\"request_id\": [1, \"]\"], \"a\": 1}", false, &keys) ==
          "{\"request_id\": " + P + ", \"a\": 1}");
    // spans at the very end of the input, truncated spans, lone anchors: no read past the end
    const char* edges[] = {"0", "0x", "0x1234", "2026-", "2026-12-04T", "10:", "10:22:3",
                           "/tmp/", "/var/folders/a/", "\\Temp\\", "\\", "pid ", "1.", "1m",
                           "550e8400-e29b-41d4-a716-44665544", "\"request_id\": ", "\"",
                           "1712345678.", "bash: line 3"};
    for (const char* e : edges) {
        const std::string in(e);
        for (bool sig : {false, true}) {
            std::string out;
            tw::scan_answer(in.data(), in.size(), tw::kAllClasses, &keys, sig, out);
        }
        // heap copies, exactly sized, so ASan sees any read past the end
        std::vector<char> exact(in.begin(), in.end());
        std::string out;
        tw::scan_answer(exact.data(), exact.size(), tw::kAllClasses, &keys, true, out);
    }
    tw::Hash128 a{}, b{};
    const std::string x = "Ran 15 tests in 0.074s", y = "Ran 15 tests in 1.2s";
    CHECK(tw::answer_digest(x.data(), x.size(), tw::kAllClasses, nullptr, a));
    CHECK(tw::answer_digest(y.data(), y.size(), tw::kAllClasses, nullptr, b));
    CHECK(a.low64 == b.low64 && a.high64 == b.high64);
    const std::string clean = "3 of 6";
    CHECK(tw::answer_digest(clean.data(), clean.size(), tw::kAllClasses, nullptr, a));
    b = tw::xxh3_128(clean.data(), clean.size());
    CHECK(a.low64 == b.low64 && a.high64 == b.high64);  // a clean payload hashed in place
    CHECK(!tw::answer_digest(" \n\t", 3, tw::kAllClasses, nullptr, a));  // the empty answer
    CHECK(tw::error_signature_key("pid 1", 5, tw::kAllClasses, nullptr) ==
          tw::error_signature_key("pid 22", 6, tw::kAllClasses, nullptr));
}

void test_recycled_calls_and_the_failure_streak() {
    tw::Settings st = defaults();
    st.enabled = 0x3FF;
    st.repeated_failure_threshold = 3;
    tw::Canonicalizer c;
    tw::Session s(st);
    // a 6-call lap with identical answers: the eighth repeated call's answer trips, once
    uint32_t mask = 0;
    int fired_at = -1;
    for (int i = 0; i < 30; ++i) {
        const std::string tool = "t" + std::to_string(i % 6);
        const uint64_t h = tw::xxh3_64(tool.data(), tool.size());
        call(s, c, tool, R"({"a": 1})");
        const std::string out = "answer " + std::to_string(i % 6) + " in 0." +
                                std::to_string(10 + i) + "s";
        const uint32_t m = s.observe_result(h, false, false, nullptr, out.data(), out.size(), true);
        if ((m & tw::kRecycled) && fired_at < 0) fired_at = i;
        mask |= m;
        s.observe_text(true);
    }
    CHECK(fired_at == 13 && s.recycled.run == 24);
    CHECK((mask & ~(tw::kRecycled | tw::kNoNewState)) == 0);
    // more calls in flight than the pending calls hold: the oldest is forgotten, nothing breaks
    for (int i = 0; i < 20; ++i) call(s, c, "g", R"({"p": 2})");
    CHECK(s.pending.size == tw::PendingCalls::kPending);
    s.retract_calls(100);
    CHECK(s.pending.size == 0);
    // SPEC §12.3: three identical failures are repeated-failure's alone
    s.reset();
    const std::string e = "ModuleNotFoundError: No module named 'yaml' (pid 42)";
    mask = 0;
    for (int i = 0; i < 3; ++i)
        mask = s.observe_result(7, true, false, nullptr, nullptr, 0, false, e.data(), e.size());
    CHECK(mask == tw::kRepeatedFailure && s.failures.run == 3 && s.failures.same == 3);
    mask = s.observe_result(7, true, false, nullptr, nullptr, 0, false, "other", 5);
    CHECK(mask == 0);  // the streak it stood down on counts as reported
}

// SPEC §12.4: the four signals the anchors have, through the session (twins of
// tests/test_anchor_signals.py)
void test_anchor_signals() {
    tw::Settings st = defaults();
    st.enabled = 0x3FFF;
    tw::Canonicalizer c;
    tw::Session s(st);
    const std::string nope = "No such tool available: todo_write";
    uint32_t mask = 0;
    for (int i = 0; i < 3; ++i) {  // unknown-tool alone: the failure signals stand down
        call(s, c, "todo_write", "{}");
        mask = s.observe_result(9, true, false, nullptr, nullptr, 0, false, nope.data(),
                                nope.size(), nullptr, true);
        CHECK(mask == (i == 2 ? tw::kUnknownTool : 0u));
    }
    s.turn_boundary();
    CHECK(s.unknown_tool.run == 0);
    // repeated-text: whitespace collapsed, calls between
    const std::string a = "Run the  tests.\n", b = " Run the tests.";
    CHECK(tw::text_key(a.data(), a.size()) == tw::text_key(b.data(), b.size()));
    for (int i = 0; i < 3; ++i) {
        mask = s.observe_text(true, tw::text_key(a.data(), a.size()));
        CHECK(mask == (i == 2 ? tw::kRepeatedText : 0u));
        call(s, c, "bash", "{\"n\": " + std::to_string(i) + "}");
    }
    // empty-responses: the third empty gap between responses
    for (int i = 0; i < 4; ++i) CHECK(s.observe_response() == (i == 3 ? tw::kEmptyResponses : 0u));
    call(s, c, "read", "{}");
    CHECK(s.observe_response() == 0 && s.empty.run == 0);
    // a response that reported output tokens is an answer: it ends the run as a call does
    CHECK(s.observe_response() == 0 && s.empty.run == 1);
    CHECK(s.observe_response(true) == 0 && s.empty.run == 0);
    for (int i = 0; i < 3; ++i) CHECK(s.observe_response() == (i == 2 ? tw::kEmptyResponses : 0u));
    // compaction-storm: three in a turn; a turn that ends in agent text re-arms it
    for (int i = 0; i < 3; ++i)
        CHECK(s.observe_compaction() == (i == 2 ? tw::kCompactionStorm : 0u));
    s.observe_text(true, 1);
    s.end_turn();
    s.turn_boundary();
    CHECK(s.storm.run == 0 && s.storm.turn == 0 && !s.storm.tripped);
    // a new answer between compactions is work: the counts start again (issue 39)
    s.observe_compaction();
    s.observe_compaction();
    CHECK(s.observe_result(3, false, false, nullptr, "new", 3, true) == 0);
    CHECK(s.storm.run == 0 && s.storm.turn == 0);
    CHECK(s.observe_compaction() == 0 && s.observe_compaction() == 0);
    // a cycle whose laps bring new answers is progress; the same answers trip it
    for (int same = 0; same < 2; ++same) {
        s.reset();
        uint32_t got = 0;
        for (int lap = 0; lap < 5; ++lap) {
            got |= call(s, c, "edit", R"({"path": "a.py"})");
            got |= s.observe_result(1, false, false, nullptr, "ok", 2, true);
            got |= call(s, c, "test", R"({"k": 1})");
            const std::string out = std::to_string(same ? 1 : 9 - lap) + " failed";
            got |= s.observe_result(2, false, false, nullptr, out.data(), out.size(), true);
        }
        CHECK(((got & tw::kCycle) != 0) == (same == 1));
    }
    // the calls since the last result: a retry's attempt
    CHECK(s.attempt_calls == 0);
    call(s, c, "x", "{}");
    call(s, c, "y", "{}");
    CHECK(s.attempt_calls == 2);
    s.retract_calls(1);
    CHECK(s.attempt_calls == 1);
    CHECK(s.observe_response() == 0 && s.attempt_calls == 0);
}

// persistent-warnings: warn alerts with no new answer between them; a new answer re-arms it
void test_persistent_warnings() {
    tw::Settings st = defaults();
    st.enabled = tw::kRepeatedText | tw::kNoNewState | tw::kPersistentWarnings;
    st.warn_signals = tw::kRepeatedText | tw::kNoNewState;
    st.persistent_warnings_threshold = 2;
    tw::Session s(st);
    const std::string words = "Let me try again.";
    const uint64_t k = tw::text_key(words.data(), words.size());
    uint32_t mask = 0;
    for (int turn = 0; turn < 2; ++turn) {  // repeated-text re-arms at each turn
        for (int i = 0; i < 3; ++i) mask = s.observe_text(true, k);
        s.turn_boundary();
    }
    CHECK(mask == (tw::kRepeatedText | tw::kPersistentWarnings));
    CHECK(s.persistent.run == 2 && s.persistent.signals == tw::kRepeatedText);
    const std::string page = "fresh output";  // a new answer: progress
    CHECK(s.observe_result(7, false, false, nullptr, page.data(), page.size(), true) == 0);
    CHECK(s.persistent.run == 0 && !s.persistent.tripped);
    for (int i = 0; i < 3; ++i) mask = s.observe_text(true, k);
    CHECK(mask == tw::kRepeatedText);  // one warning since: below the threshold again
    s.reset();
    CHECK(s.persistent.run == 0 && s.persistent.signals == 0);
}

void test_looping_text() {
    // issue 39: how a message ends (the twin of tripwire/signals/looping_text.py tail_laps)
    std::string chant;
    const std::string lap = "Wait, I am confused.\nIs it `msubsup` or `msup`?\n";
    for (int i = 0; i < 9; ++i) chant += lap;
    tw::TextLaps t = tw::tail_laps(chant.data(), chant.size(), 512, 8);
    CHECK(t.laps == 9 && t.period == lap.size());  // counted to the chant's start
    t = tw::tail_laps(chant.data(), chant.size(), 512, 100);
    CHECK(t.laps == 9 && t.period == lap.size());  // under the threshold: the most laps
    const std::string dashes(300, '-');
    t = tw::tail_laps(dashes.data(), dashes.size(), 512, 8);
    CHECK(t.laps == 1 && t.period == 0);  // no letters: not a chant
    t = tw::tail_laps("short", 5, 512, 8);
    CHECK(t.laps == 0 && t.period == 0);
    tw::Settings st = defaults();
    st.enabled |= tw::kLoopingText;
    st.looping_text_threshold = 8;
    st.looping_text_max_period = 512;
    tw::Session s(st);
    CHECK(s.observe_text(true, 1, chant.data(), chant.size()) == tw::kLoopingText);
    CHECK(s.looping.last.laps == 9);
    CHECK(s.observe_text(true, 2, "fine.", 5) == 0);  // each message on its own
    CHECK(s.observe_text(true, 3) == 0);  // no bytes: not read
}

int main() {
    test_looping_text();
    test_persistent_warnings();
    test_hash();
    test_anchor_signals();
    test_answer_scanner();
    test_recycled_calls_and_the_failure_streak();
    test_canonicalizer();
    test_detectors_through_the_session();
    test_polling_with_changing_output();
    test_density_and_rings_at_their_limits();
    test_digest_lru();
    test_digest_lru_past_its_first_slots();
    test_recycled_window_past_its_first_slots();
    test_tokens();
    test_repeated_failure_and_retraction();
    test_session_in_one_block();
    test_call_history_slides();
    if (failures) {
        std::fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    std::puts("native core: all checks passed");
    return 0;
}
