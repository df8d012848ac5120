# Included by _native.pyx: an engine's configuration — the C++ core's Settings struct, and
# what the Python side of every engine built from one settings object reads (_EngineConfig).


cdef Settings _settings(object s) except *:
    cdef Settings c
    c.enabled = s.enabled
    c.repeat_threshold = s.repeat_threshold
    c.poll_plateau = s.poll_plateau
    c.cycle_max_period = s.cycle_max_period
    c.cycle_cycles = s.cycle_cycles
    c.density_window = s.density_window
    c.density_threshold = s.density_threshold
    c.density_defer_run = s.density_defer_run
    c.density_defer_cycle_period = s.density_defer_cycle_period
    c.name_threshold = s.name_threshold
    c.failure_threshold = s.failure_threshold
    c.no_op_threshold = s.no_op_threshold
    c.no_new_state_threshold = s.no_new_state_threshold
    c.silence_threshold = s.silence_threshold
    c.digest_memory = s.digest_memory
    c.repeated_failure_threshold = s.repeated_failure_threshold
    c.answer_volatile = s.answer_volatile
    c.recycled_threshold = s.recycled_threshold
    c.recycled_window = s.recycled_window
    c.unknown_tool_threshold = s.unknown_tool_threshold
    c.repeated_text_threshold = s.repeated_text_threshold
    c.empty_responses_threshold = s.empty_responses_threshold
    c.compaction_per_turn = s.compaction_per_turn
    c.compaction_in_a_row = s.compaction_in_a_row
    c.persistent_warnings_threshold = s.persistent_warnings_threshold
    c.warn_signals = s.warn_signals
    c.looping_text_threshold = s.looping_text_threshold
    c.looping_text_max_period = s.looping_text_max_period
    return c


cdef class _EngineConfig:
    """What an engine's Python side reads of its settings, derived once per (settings, config)
    and shared by every engine built from them: a fleet's sessions hold one reference each,
    not a copy of each field (and a call finds them in an object hot in cache)."""

    cdef Py_ssize_t ring              # the call ring's size, in calls
    cdef frozenset shell              # SPEC §11.2: these tools' identity is tool:program
    cdef object rules                 # issue 39: the ToolRules (None: no tool has a rule)
    cdef bint call_rules              # some rule changes how calls are judged
    cdef bint exact_rules             # every rule names its tool exactly (no glob)
    cdef dict rule_cache              # tool name -> its _Rule, or None for no rule
    cdef bint rules_filled            # without globs: the cache holds every rule
    cdef frozenset known              # SPEC §12.4: the host's tools (None: it lists none)
    cdef _AnswerKeys keys             # [results] ignore_json_keys for every tool (None: none)...
    cdef dict keys_by_tool            # ...and per tool (None: no tool has its own)
    cdef Py_ssize_t failure_threshold
    cdef Py_ssize_t no_op_threshold
    cdef object settings
    cdef object config                # the WatchdogConfig the settings came from (or None)


# The last configuration built: a fleet builds all its engines from one settings object and
# one config, so one entry finds them all (and holds no more than one stale configuration).
cdef _EngineConfig _last_config = None


cdef _EngineConfig _engine_config(object settings, object config):
    """The shared configuration of ``settings`` (and the ``config`` they came from)."""
    global _last_config
    cdef _EngineConfig c = _last_config
    if c is not None and c.settings is settings and c.config is config:
        return c
    c = _EngineConfig.__new__(_EngineConfig)
    c.settings = settings
    c.config = config
    c.ring = max(settings.density_window, settings.cycle_max_period * settings.cycle_cycles)
    c.rules = settings.tool_rules
    c.call_rules = c.rules is not None and c.rules.for_calls
    c.exact_rules = c.rules is None or c.rules.exact_only
    c.rule_cache = {}
    if c.rules is not None and c.exact_rules:
        for tool in c.rules.named:  # every rule there is: a miss is then no rule
            _tool_rule(c, tool)
    c.rules_filled = True
    c.shell = frozenset(settings.shell_tools)
    c.known = frozenset(settings.known_tools) or None
    c.keys = _answer_keys(settings.ignore_json_keys)
    c.keys_by_tool = {tool: _answer_keys(keys)
                      for tool, keys in settings.ignore_json_keys_by_tool} or None
    c.failure_threshold = settings.failure_threshold
    c.no_op_threshold = settings.no_op_threshold
    _last_config = c
    return c


cdef class _Rule:
    """One tool's per-tool rule as the C++ core reads it (a ToolRule struct), made once per
    tool name and configuration (_EngineConfig.rule_cache)."""
    cdef ToolRule c


#: The result readers that need a payload's answer besides the repeat run: a rule turning
#: both off lets a result's payload go unread.
cdef uint32_t _PAYLOAD_READERS = SIGNAL_BITS["no-new-state"] | SIGNAL_BITS["recycled-calls"]
#: The streaks a rule may turn off, whose quoted names the binding keeps (Engine._note_result).
cdef uint32_t _FAILURE_BIT = SIGNAL_BITS["tool-failure-streak"]
cdef uint32_t _NO_OP_BIT = SIGNAL_BITS["no-op-streak"]
#: How many tool names one configuration's cache holds (names come from the agent).
cdef Py_ssize_t _RULE_CACHE_LIMIT = 4096


cdef object _NO_RULE_YET = object()


cdef object _tool_rule(_EngineConfig conf, object name):
    """The _Rule of tool ``name`` (a str) under ``conf``'s rules, or None: the one resolver
    (ToolRules.lookup, whose precedence both engines share) asked once per name."""
    cdef object r = conf.rule_cache.get(name, _NO_RULE_YET)
    cdef object rule
    cdef _Rule made
    if r is not _NO_RULE_YET:
        return r
    if conf.exact_rules and conf.rules_filled:
        return None  # without globs, the cache holds every rule (_engine_config)
    rule = conf.rules.lookup(name)
    if rule is None:
        r = None
    else:
        made = _Rule.__new__(_Rule)
        made.c.off = rule.off
        made.c.repeat_threshold = rule.repeat_threshold
        made.c.name_threshold = rule.name_threshold
        made.c.repeated_failure_threshold = rule.repeated_failure_threshold
        r = made
    # without globs, a name without an exact rule has none: not remembered (the cache then
    # holds the configured names only)
    if (r is not None or not conf.exact_rules) and (
            len(conf.rule_cache) < _RULE_CACHE_LIMIT or conf.exact_rules):
        conf.rule_cache[name] = r
    return r


cdef inline const ToolRule* _rule_ptr(object r) noexcept:
    if r is None:
        return NULL
    return &(<_Rule>r).c
