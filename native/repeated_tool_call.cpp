#include "repeated_tool_call.h"

namespace tw {

void RepeatDetector::start_run(const CanonicalCall& c) {
    run = 1;
    rest = c.rest;
    is_object = c.is_object;
    tripped = false;
    longest.clear();
    ends.clear();
    for (std::string_view p : c.paths) {
        longest.append(p);
        ends.push_back(static_cast<uint32_t>(longest.size()));
    }
}

bool RepeatDetector::observe(const CanonicalCall& c, bool& fired) {
    fired = false;
    bool joined = run > 0 && c.rest == rest && c.is_object == is_object &&
                  c.paths.size() == ends.size();
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
            // double buffers shared by the thread's sessions: growing allocates nothing
            thread_local std::string scratch;
            thread_local std::vector<uint32_t> scratch_ends;
            scratch.clear();
            scratch_ends.clear();
            for (size_t i = 0; i < c.paths.size(); ++i) {
                const std::string_view have = slot(i);
                scratch.append(c.paths[i].size() > have.size() ? c.paths[i] : have);
                scratch_ends.push_back(static_cast<uint32_t>(scratch.size()));
            }
            longest.swap(scratch);
            ends.swap(scratch_ends);
        }
    } else {
        start_run(c);
    }
    if (enabled && run >= threshold && !tripped) {
        tripped = true;
        fired = true;
    }
    return joined;
}

}  // namespace tw
