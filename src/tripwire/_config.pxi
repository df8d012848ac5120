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
    return c


cdef class _EngineConfig:
    """What an engine's Python side reads of its settings, derived once per (settings, config)
    and shared by every engine built from them: a fleet's sessions hold one reference each,
    not a copy of each field (and a call finds them in an object hot in cache)."""

    cdef Py_ssize_t ring              # the call ring's size, in calls
    cdef frozenset shell              # SPEC §11.2: these tools' identity is tool:program
    cdef frozenset exempt
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
    c.exempt = frozenset(settings.exempt_tools)
    c.shell = frozenset(settings.shell_tools)
    c.known = frozenset(settings.known_tools) or None
    c.keys = _answer_keys(settings.ignore_json_keys)
    c.keys_by_tool = {tool: _answer_keys(keys)
                      for tool, keys in settings.ignore_json_keys_by_tool} or None
    c.failure_threshold = settings.failure_threshold
    c.no_op_threshold = settings.no_op_threshold
    _last_config = c
    return c
