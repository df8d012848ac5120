// The watchdog detectors (SPEC §1, §10): one unit per signal, each the twin of its Python
// module in tripwire/signals/. This header gathers them for the session and the bindings.
#pragma once

#include "alternating_tool_cycle.h"
#include "call_history.h"
#include "compaction_storm.h"
#include "dominant_tool_call.h"
#include "looping_text.h"
#include "persistent_warnings.h"
#include "empty_responses.h"
#include "recycled_calls.h"
#include "repeated_failure.h"
#include "repeated_text.h"
#include "repeated_tool_call.h"
#include "repeated_tool_name.h"
#include "streak.h"
#include "tool_failure_streak.h"
#include "tools_without_text.h"
#include "unknown_tool.h"
