"""``EngineSettings``: every signal's knobs resolved and clamped, as both engines take them
(``WatchdogConfig.engine_settings()`` builds it; ``native/session.h``'s ``Settings`` is its twin,
checked by tests/test_parity.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .tool_rules import ToolRules


class EngineSettings(NamedTuple):
    """Resolved, clamped detector settings (built by ``WatchdogConfig.engine_settings()``)."""

    enabled: int  # bitmask: bit i = the i-th signal of the SPEC §1 table
    repeat_threshold: int
    poll_plateau: int  # SPEC §12.2: a poll's results in a row with one answer that trip it
    cycle_max_period: int
    cycle_cycles: int
    density_window: int
    density_threshold: int
    density_defer_run: int  # <= 0: no run stand-down
    density_defer_cycle_period: int  # < 2: no cycle stand-down
    name_threshold: int
    failure_threshold: int
    no_op_threshold: int
    no_new_state_threshold: int
    silence_threshold: int
    digest_memory: int
    repeated_failure_threshold: int
    answer_volatile: int  # SPEC §12.1: the classes of volatile spans an answer replaces
    recycled_threshold: int
    recycled_window: int
    unknown_tool_threshold: int  # SPEC §12.4
    repeated_text_threshold: int
    empty_responses_threshold: int
    compaction_per_turn: int
    compaction_in_a_row: int
    persistent_warnings_threshold: int
    warn_signals: int  # bitmask: the signals alerting as warn under the config (issue 39)
    looping_text_threshold: int  # issue 39: laps at the end of one message
    looping_text_max_period: int  # the longest lap, in bytes
    exempt_tools: frozenset[str]
    shell_tools: frozenset[str] = frozenset()  # SPEC §11.2: identity tool:program
    known_tools: frozenset[str] = frozenset()  # SPEC §12.4: empty = the host lists none
    # SPEC §12.1 [results] ignore_json_keys: for every tool, and per tool (the global ones
    # included), as (tool, keys) pairs sorted by tool
    ignore_json_keys: tuple[str, ...] = ()
    ignore_json_keys_by_tool: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # issue 39: [tools.<name>] and exempt_tools, resolved (None: no tool has a rule)
    tool_rules: ToolRules | None = None
