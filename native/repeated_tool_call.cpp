#include "repeated_tool_call.h"

namespace tw {

void RepeatDetector::start_run(const CanonicalCall& c, uint64_t name_hash) {
    run = 1;
    rest = c.rest;
    name = name_hash;
    is_object = c.is_object;
    tripped = false;
    poll = kPollAwaiting;
    plateau = 0;
    longest.clear();
    reserve_ends(c.paths.size());
    for (std::string_view p : c.paths) {
        longest.append(p);
        ends[paths++] = static_cast<uint32_t>(longest.size());
    }
}

bool RepeatDetector::observe(const CanonicalCall& c, uint64_t name_hash, bool& fired,
                             uint32_t at) {
    fired = false;
    bool joined = run > 0 && c.rest == rest && c.is_object == is_object &&
                  c.paths.size() == paths;
    bool longer = false;
    for (size_t i = 0; joined && i < c.paths.size(); ++i) {
        const std::string_view have = slot(i);
        joined = paths_suffix_match(c.paths[i], have);
        longer = longer || c.paths[i].size() > have.size();
    }
    if (joined) {
        ++run;
        if (longer) {
            // the run's longest spelling grows (SPEC §2.3 run consistency)
            // a double buffer shared by the thread's sessions: growing allocates nothing; the
            // ends are rewritten in place, each old one read before it is
            thread_local std::string scratch;
            scratch.clear();
            uint32_t begin = 0;  // slot i's start in the old spelling
            for (size_t i = 0; i < c.paths.size(); ++i) {
                const uint32_t end = ends[i];
                const std::string_view have(longest.data() + begin, end - begin);
                scratch.append(c.paths[i].size() > have.size() ? c.paths[i] : have);
                ends[i] = static_cast<uint32_t>(scratch.size());
                begin = end;
            }
            longest.swap(scratch);
        }
    } else {
        start_run(c, name_hash);
    }
    if (enabled && run >= at && !tripped && poll != kPollChanging) {
        tripped = true;
        fired = true;
    }
    return joined;
}

void RepeatDetector::observe_result(bool failed, bool no_op, const Hash128* answer,
                                    uint32_t poll_plateau) noexcept {
    uint8_t end;
    if (failed) {
        end = kPollFailed;
    } else if (no_op) {
        end = kPollNoOp;
    } else if (answer == nullptr) {
        end = kPollNoPayload;
    } else if (poll == kPollAwaiting) {
        poll = kPollOnePayload;
        last = *answer;
        plateau = 1;
        return;
    } else if (answer->low64 != last.low64 || answer->high64 != last.high64) {
        poll = kPollChanging;
        last = *answer;
        plateau = 1;
        return;
    } else {
        if (plateau < UINT32_MAX) ++plateau;
        if (poll == kPollChanging && plateau < poll_plateau) return;  // a poll waiting (§12.2)
        end = kPollStoppedChanging;
    }
    // sticky for the run: a run that ended is not polling again later
    poll = poll == kPollChanging ? end : static_cast<uint8_t>(kPollEnded);
}

}  // namespace tw
