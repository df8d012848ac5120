"""The pure-Python reference of every hot path: the executable spec.

Selected with ``TRIPWIRE_IMPLEMENTATION=python``. The C++ core (``native/``, bound in
``_native.pyx``) implements exactly this behaviour; the test suite drives both with the same
traces and asserts identical alerts, keys and token counts. When the two disagree, the Python
side is the one that reads like SPEC.md, so read it first.

Where each part lives:

1. canonical call keys (SPEC §2): ``_canonical.py``, re-exported here;
2. the fifteen detectors (SPEC §1, §7.3, §12.4, issue 39): each in its signal's module
   (``signals/<signal>.py``);
3. ``Engine`` (here): one session's detectors, fanning observations out and returning a
   bitmask of fired signals (bit i = ``signals.SIGNALS[i]``);
4. ``TokenEstimator`` (here): streaming bytes -> tokens at 3 bytes per token (SPEC §6);
5. ``Batch`` (here): the batch-ingest contract, one event at a time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from ..base.inputs import (
    args_bytes,
    error_failed,
    name_str,
    no_op_flag,
    payload_bytes,
    remember_call_id,
    text_has_words,
)
from ..base.money import usage_cost_nano
from ..base.thresholds import context_crosses, cost_trips
from ..base.validate import check_id, check_no_op
from ..errors import InvalidEvent
from ..identity.answer import answer_digest, payload_answer
from ..identity.answer import scan as scan_answer
from ..identity.canonical import (
    canonical_form,
    canonical_key,
    canonicalize,
    clean_path,
    is_path_key,
    xxh3_64,
    xxh3_128,
)
from ..identity.shell import tool_identity
from ..signals import BY_ID, Alert
from ..signals._spec import CYCLE_OFF, DENSITY_OFF, JOINED, SILENCE_OFF, StreakDetector, one_run
from ..signals.alternating_tool_cycle import CycleDetector, smallest_rotation  # noqa: F401
from ..signals.compaction_storm import CompactionStormDetector
from ..signals.dominant_tool_call import DENSITY_REPORTED_CAPACITY, DensityDetector  # noqa: F401
from ..signals.empty_responses import EmptyResponsesDetector
from ..signals.no_new_state import DigestMemory
from ..signals.looping_text import LoopingTextDetector
from ..signals.persistent_warnings import PersistentWarningsDetector, persists
from ..signals.recycled_calls import FAILURE as FAILURE_ANSWER
from ..signals.recycled_calls import NO_OP as NO_OP_ANSWER
from ..signals.recycled_calls import SUCCESS as SUCCESS_ANSWER
from ..signals.recycled_calls import RecycledCallsDetector, answer_tag, stands_down
from ..signals.repeated_failure import (
    RepeatedFailureDetector,
    error_bytes,
    error_signature,
    pair_key,
)
from ..signals.repeated_text import RepeatedTextDetector, text_key
from ..signals.repeated_tool_call import RepeatDetector
from ..signals.repeated_tool_name import NameRunDetector
from ..signals.settings import EngineSettings
from ..signals.tool_failure_streak import FailureStreakDetector
from ..signals.tools_without_text import SilenceDetector
from ..signals.unknown_tool import UNKNOWN_PAIR, UnknownToolDetector, is_unknown
from .batch import BATCH_FIELDS, BatchChange, BatchSlot, BatchState, StopReason
from .readings import EngineReadings
from .tokens import BYTES_PER_TOKEN, TokenEstimator, estimate_tokens, utf8_length  # noqa: F401

IMPLEMENTATION = "python"

#: The engine API, the same in ``_native`` (tests/test_parity.py checks it).
__all__ = [
    "IMPLEMENTATION", "Engine", "TokenEstimator", "Batch", "canonical_key", "canonical_form",
    "is_path_key", "clean_path", "xxh3_64", "xxh3_128", "utf8_length", "estimate_tokens",
    "cost_trips", "context_crosses", "error_signature", "scan_answer",
    "answer_digest",
]

# --------------------------------------------------------------------------------------------
# 3. One session's engine
# --------------------------------------------------------------------------------------------

# Bit i of a fired mask is signals.SIGNALS[i] (the catalogue's order).
REPEAT = BY_ID["repeated-tool-call"].bit
CYCLE = BY_ID["alternating-tool-cycle"].bit
DENSITY = BY_ID["dominant-tool-call"].bit
NAME = BY_ID["repeated-tool-name"].bit
FAILURE = BY_ID["tool-failure-streak"].bit
NO_OP = BY_ID["no-op-streak"].bit
NO_NEW_STATE = BY_ID["no-new-state"].bit
SILENCE = BY_ID["tools-without-text"].bit
REPEATED_FAILURE = BY_ID["repeated-failure"].bit
RECYCLED = BY_ID["recycled-calls"].bit
UNKNOWN_TOOL = BY_ID["unknown-tool"].bit
REPEATED_TEXT = BY_ID["repeated-text"].bit
EMPTY_RESPONSES = BY_ID["empty-responses"].bit
COMPACTION_STORM = BY_ID["compaction-storm"].bit
PERSISTENT_WARNINGS = BY_ID["persistent-warnings"].bit
LOOPING_TEXT = BY_ID["looping-text"].bit


#: enough Nones to pad any batch row to its kind's fields
_NO_FIELDS = (None,) * max(BATCH_FIELDS.values())


def call_flags(off: int) -> int:
    """The call ring's flags for the ring-reading signals a rule turns off (its ``off``
    bits; native: session.h call_flags)."""
    return ((CYCLE_OFF if off & CYCLE else 0) | (DENSITY_OFF if off & DENSITY else 0)
            | (SILENCE_OFF if off & SILENCE else 0))


class SessionStats:
    """Statistics mode (``tripwire corpus stats``): per signal, in catalogue order, the largest
    value the session reached of the quantity its threshold is compared with, read from the
    detectors' state after each call and result. Stand-downs and one alert per pattern are not
    applied (they decide whether an alert is raised, not how far a pattern went)."""

    def __init__(self) -> None:
        self.peak = [0] * len(BY_ID)
        self._matches: dict[int, int] = {}  # period p -> calls in a row equal to the p-th before

    def after_call(self, engine: Engine) -> None:
        peak = self.peak
        peak[0] = max(peak[0], engine._repeat.run)
        keys, flags = engine._keys, engine._flags
        n = len(keys)
        for p in range(2, engine.settings.cycle_max_period + 1):
            matches = self._matches.get(p, 0) + 1 if n > p and keys[-1] == keys[-1 - p] else 0
            self._matches[p] = matches
            # SPEC §10.3: a block whose calls form one repeat run is not a cycle; laps count
            # only while no result brought a new answer (alternating_tool_cycle's rule)
            if matches >= p and not one_run(flags, p):
                peak[1] = max(peak[1], 1 + min(matches, engine._cycle.quiet) // p)
        # only the newest key's count rose: the highest window count is reached at its newest
        window = list(keys)[-engine.settings.density_window:]
        peak[2] = max(peak[2], window.count(window[-1]))
        peak[3] = max(peak[3], engine._name.run)
        peak[7] = max(peak[7], engine._silence.streak)
        self.after_warnings(engine)

    def after_result(self, engine: Engine) -> None:
        peak = self.peak
        peak[4] = max(peak[4], engine._failures.run)
        peak[5] = max(peak[5], engine._no_ops.run)
        peak[6] = max(peak[6], engine._stale.run)
        # only the pair that just failed rose: the peak is the highest count it reached
        peak[8] = max(peak[8], engine._repeated_failure.last)
        peak[9] = max(peak[9], engine._recycled.run)
        peak[10] = max(peak[10], engine._unknown.run)
        self.after_warnings(engine)

    def after_event(self, engine: Engine) -> None:
        """After a text, a model response or a compaction."""
        peak = self.peak
        peak[11] = max(peak[11], engine._text.run)
        peak[12] = max(peak[12], engine._empty.run)
        peak[13] = max(peak[13], engine._storm.run)  # a turn's count is never above it
        peak[15] = max(peak[15], engine._looping.last[0])
        self.after_warnings(engine)

    def after_warnings(self, engine: Engine) -> None:
        """After any event's warn alerts were counted (they follow calls and results too)."""
        self.peak[14] = max(self.peak[14], engine._persistent.run)

    def after_reset(self) -> None:
        self._matches.clear()  # the history was cleared


class Engine(EngineReadings):
    """One session's detector state. Observations return ``()`` or ``self._fired(...)``.

    ``_fired(mask, name, args_or_error)`` is supplied by the subclass that builds alert texts
    (``tripwire.engine.watchdog.Watchdog``); the engine itself only counts and compares.
    """

    implementation = IMPLEMENTATION
    _keys: deque[int]
    _flags: deque[int]  # the call ring's flags (JOINED, the rule-off bits)

    def __init__(self, settings: EngineSettings):
        self._engine_init(settings)

    def _engine_init(self, settings: EngineSettings, config: Any = None) -> None:
        """(Re)build the engine for ``settings``, which came from ``config`` (a WatchdogConfig,
        or None)."""
        self.settings = settings
        if config is not None:
            self.config = config
        on = settings.enabled
        self._repeat = RepeatDetector(settings.repeat_threshold, bool(on & REPEAT),
                                      settings.poll_plateau)
        self._cycle = CycleDetector(
            settings.cycle_max_period, settings.cycle_cycles, bool(on & CYCLE)
        )
        self._density = DensityDetector(
            settings.density_window,
            settings.density_threshold,
            settings.density_defer_run,
            settings.density_defer_cycle_period,
        )
        stand_down = settings.repeat_threshold if on & REPEAT else 0
        self._name = NameRunDetector(settings.name_threshold, stand_down)
        self._silence = SilenceDetector(settings.silence_threshold)
        self._failures = FailureStreakDetector(settings.failure_threshold)
        self._no_ops = StreakDetector(settings.no_op_threshold)
        self._stale = StreakDetector(settings.no_new_state_threshold)
        self._digests = DigestMemory(settings.digest_memory)
        self._repeated_failure = RepeatedFailureDetector(settings.repeated_failure_threshold)
        self._recycled = RecycledCallsDetector(settings.recycled_threshold,
                                               settings.recycled_window)
        self._unknown = UnknownToolDetector(settings.unknown_tool_threshold)
        self._text = RepeatedTextDetector(settings.repeated_text_threshold)
        self._empty = EmptyResponsesDetector(settings.empty_responses_threshold)
        self._storm = CompactionStormDetector(settings.compaction_per_turn,
                                              settings.compaction_in_a_row)
        self._persistent = PersistentWarningsDetector(settings.persistent_warnings_threshold)
        self._looping = LoopingTextDetector(settings.looping_text_threshold,
                                            settings.looping_text_max_period)
        self._history = max(
            settings.density_window, settings.cycle_max_period * settings.cycle_cycles
        )
        # SPEC §12.1 [results] ignore_json_keys, as the scanner reads them (bytes)
        self._answer_keys = tuple(
            k.encode("utf-8", "surrogatepass") for k in settings.ignore_json_keys)
        self._answer_keys_by_tool = {
            tool: tuple(k.encode("utf-8", "surrogatepass") for k in keys)
            for tool, keys in settings.ignore_json_keys_by_tool}
        self.events = 0
        self._stats: SessionStats | None = None
        self._clear()

    # -- observations ------------------------------------------------------------------------

    def observe_call(self, name: str, args: Any = None) -> tuple[Alert, ...]:
        if type(name) is not str:
            name = name_str(name)
        self.events += 1
        on = self.settings.enabled
        call = canonicalize(name, args)
        rules = self.settings.tool_rules  # issue 39: the tool's own thresholds, if any
        rule = rules.lookup(name) if rules is not None and rules.for_calls else None
        joined, fired = self._repeat.observe(
            call, name, None if rule is None else rule.repeat_threshold)
        mask = REPEAT if fired else 0
        flags = (JOINED if joined else 0) | (0 if rule is None else call_flags(rule.off))
        self._keys.append(call.key)
        self._flags.append(flags)
        self._calls.append((name, args))
        self._cycle.called()
        self._attempt_calls += 1
        if on & CYCLE and self._cycle.observe(self._keys, self._flags):
            mask |= CYCLE
        if on & DENSITY and self._density.observe(self._keys, self._flags):
            mask |= DENSITY
        identity = tool_identity(name, args, self.settings.shell_tools)
        named = self._name.observe(identity, self._repeat.run) if rule is None else \
            self._name.observe(identity, self._repeat.run, rule.name_threshold,  # stands down
                               rule.repeat_threshold if on & REPEAT else 0)  # at the tool's
        if named and on & NAME:
            mask |= NAME
        if self._silence.observe_call(not flags & SILENCE_OFF) and on & SILENCE:
            mask |= SILENCE
        if on & RECYCLED:  # its result will say which call it answers
            self._recycled.push_call(hash(name), call.key)
        mask = self._warned(mask) if mask else 0
        if self._stats is not None:
            self._stats.after_call(self)
        if mask:
            return self._fired(mask, name, args)
        return ()

    def observe_result(
        self, name: str = "", error: Any = None, no_op: bool = False, payload: Any = None,
        unknown_tool: bool = False,
    ) -> tuple[Alert, ...]:
        if type(name) is not str:
            name = name_str(name)
        self.events += 1
        self._attempt_calls = 0  # a result: the response that made its call is over
        on = self.settings.enabled
        failed = error_failed(error)
        no_op = no_op_flag(no_op, failed)
        mask = persisted = 0
        # unknown-tool (SPEC §12.4); a failure it counts is its own (one behaviour, one alert)
        unknown = is_unknown(name, bool(unknown_tool), self.settings.known_tools)
        if self._unknown.observe(unknown) and on & UNKNOWN_TOOL:
            mask |= UNKNOWN_TOOL
        unknowns = unknown and failed and bool(on & UNKNOWN_TOOL)
        repeat = self._repeat
        # issue 39: the signals the tool's rule turns off (exempt_tools: three of them)
        rules = self.settings.tool_rules
        rule = rules.lookup(name) if rules is not None else None
        off = 0 if rule is None else rule.off
        stale_off = bool(off & NO_NEW_STATE)
        failure_off = bool(off & REPEATED_FAILURE)
        classes = self.settings.answer_volatile
        keys = self._answer_keys
        if self._answer_keys_by_tool:
            keys = self._answer_keys_by_tool.get(name, keys)
        # recycled-calls (SPEC §12.4): the call this result answers, the oldest pending call
        # of its tool (taken off for an exempt tool too, whose results neither count nor break)
        call_key = self._recycled.take(hash(name)) if on & RECYCLED else None
        recycles = call_key is not None and not off & RECYCLED
        # one answer for its readers: the repeat run (SPEC §10.24), the seen-set (both take no
        # payload and the empty answer, None here, as nothing to compare: SPEC §12.1) and
        # recycled-calls
        answer = None
        for_run = repeat.awaits(name)
        if not failed and ((not no_op and (for_run or not stale_off)) or recycles):
            answer = payload_answer(payload, classes, keys)
        if for_run:
            repeat.observe_result(failed, bool(no_op), answer)  # SPEC §10.24
        # the error signature: repeated-failure, the streak's stand-down, recycled-calls
        signature = 0
        if failed and ((on & REPEATED_FAILURE and not failure_off) or recycles):
            signature = xxh3_64(error_signature(error_bytes(error), classes, keys))
        if recycles:
            assert call_key is not None
            if failed:
                tag = answer_tag(FAILURE_ANSWER, signature)
            else:
                low = 0 if answer is None else int.from_bytes(answer[8:], "big")
                tag = answer_tag(NO_OP_ANSWER if no_op else SUCCESS_ANSWER, low)
            if self._recycled.observe(call_key, tag) and not stands_down(
                    self._keys, self._flags, self._recycled.threshold, bool(on & REPEAT),
                    self.settings.cycle_max_period if on & CYCLE else 0):
                mask |= RECYCLED  # (a run stood down on stays tripped: counted as reported)
        pair = None  # a failure repeated-failure counts: its pair key, read by the streak
        if unknowns:
            pair = UNKNOWN_PAIR  # the streak stands down for unknown-tool (SPEC §12.3's rule)
        elif on & REPEATED_FAILURE and not failure_off:  # SPEC §7.3
            if failed:
                pair = pair_key(hash(name), signature)
                if self._repeated_failure.fail(
                        name, signature,
                        None if rule is None else rule.repeated_failure_threshold):
                    mask |= REPEATED_FAILURE
            elif not no_op:
                self._repeated_failure.succeed()  # a productive success may have changed it
        # issue 39: a tool whose rule turns a streak off neither counts in it nor breaks it
        if failed:
            if not off & FAILURE:
                if self._failures.fail(pair) and on & FAILURE:  # SPEC §12.3
                    mask |= FAILURE
                if len(self._failure_names) < self.settings.failure_threshold:
                    self._failure_names.append(name)
        else:
            if not off & FAILURE:
                self._failures.reset()
                self._failure_names = []
            if off & NO_OP:
                pass
            elif no_op:
                if self._no_ops.extend() and on & NO_OP:
                    mask |= NO_OP
                if len(self._no_op_names) < self.settings.no_op_threshold:
                    self._no_op_names.append(name)
            else:
                self._no_ops.reset()
                self._no_op_names = []
            if not no_op and not stale_off:
                if answer is None:
                    self._stale.reset()  # no payload, or the empty answer: no stall shown
                elif self._digests.seen_before(answer):
                    if self._stale.extend() and on & NO_NEW_STATE:
                        mask |= NO_NEW_STATE
                    elif on & NO_NEW_STATE and persists(self._stale):
                        persisted = NO_NEW_STATE  # counted by persistent-warnings, not alerted
                else:
                    self._stale.reset()  # new information breaks the run
                    self._cycle.new_answer()  # and is a cycle's progress
                    self._storm.new_answer()  # and work between compactions
                    self._persistent.progress()  # and is progress (persistent-warnings)
        mask = self._warned(mask, persisted) if mask or persisted else 0
        if self._stats is not None:
            self._stats.after_result(self)
        if mask:
            return self._fired(mask, name, error)
        return ()

    def observe_text(self, text: Any) -> tuple[Alert, ...]:
        self.events += 1
        words = text_has_words(text)
        on = self.settings.enabled
        mask = 0
        # repeated-text reads the calls since the last words before they end that run
        if words and self._text.observe(text_key(text), self._silence.run,
                                        self._repeat.run if on & REPEAT else 0) \
                and on & REPEATED_TEXT:
            mask = REPEATED_TEXT
        # looping-text (issue 39): each message on its own
        if words and self._looping.observe(text) and on & LOOPING_TEXT:
            mask |= LOOPING_TEXT
        self._silence.observe_text(words)
        self._empty.observe_text(words)
        self._storm.observe_text(words)
        return self._after_event(mask)

    def observe_response(self, produced: bool = False) -> tuple[Alert, ...]:
        """One model response (a usage event, or the host's ``on_response``); ``produced``:
        its usage reported output tokens."""
        self.events += 1
        self._attempt_calls = 0  # the response completed: its calls are no retry's
        fired = self._empty.observe_response(self._silence.run, produced)
        return self._after_event(EMPTY_RESPONSES if fired and self.settings.enabled
                                 & EMPTY_RESPONSES else 0)

    def observe_compaction(self) -> tuple[Alert, ...]:
        """The history was compacted (a recorded event, or ``Guardrails.compact``)."""
        self.events += 1
        fired = self._storm.observe()
        return self._after_event(COMPACTION_STORM if fired and self.settings.enabled
                                 & COMPACTION_STORM else 0)

    def _after_event(self, mask: int) -> tuple[Alert, ...]:
        mask = self._warned(mask) if mask else 0
        if self._stats is not None:
            self._stats.after_event(self)
        return self._fired(mask, "", None) if mask else ()

    def _warned(self, mask: int, persisted: int = 0) -> int:
        """persistent-warnings counts an event's warn alerts (and the ``persisted`` runs)."""
        if self._persistent.observe((mask | persisted) & self.settings.warn_signals) \
                and self.settings.enabled & PERSISTENT_WARNINGS:
            mask |= PERSISTENT_WARNINGS
        return mask

    def end_turn(self) -> tuple[Alert, ...]:
        self.events += 1
        self._storm.end_turn(self._silence.run)  # a turn that ends in agent text
        self.turn_boundary()
        return ()

    def turn_boundary(self) -> None:
        """SPEC §10.5: the no-op run and the seen-set (with its run) are turn-scoped; §12.4:
        unknown-tool's run, the repeated text and the compactions of a turn."""
        self._no_ops.reset()
        self._no_op_names = []
        self._digests.clear()
        self._stale.reset()
        self._unknown.reset()
        self._text.reset()
        self._storm.turn_boundary()
        self._attempt_calls = 0

    def reset(self) -> tuple[Alert, ...]:
        """SPEC §10.8: clear every detector's state, the seen-set included."""
        self.events += 1
        self._clear()
        return ()

    def _clear(self) -> None:
        for detector in (
            self._repeat, self._cycle, self._density, self._name, self._silence,
            self._failures, self._no_ops, self._stale, self._repeated_failure,
            self._recycled, self._unknown, self._text, self._empty, self._storm,
            self._persistent, self._looping,
        ):
            detector.reset()
        self._digests.clear()
        if self._stats is not None:
            self._stats.after_reset()
        self._keys = deque(maxlen=self._history)
        self._flags = deque(maxlen=self._history)
        self._calls = deque(maxlen=self._history)
        self._failure_names = []
        self._no_op_names = []
        self._attempt_calls = 0

    def count_event(self) -> None:
        """Advance the event index for an event the watchdog does not observe."""
        self.events += 1

    def _retract_calls(self, calls: int) -> None:
        """The last `calls` calls were refused by the host's gate and the turn ended: they come
        off the call-pattern state (``Watchdog.retract_calls`` states what, and what not)."""
        if calls <= 0:
            return
        # the streak's uncounted calls among those taken back (the ring holds the newest)
        held = min(calls, len(self._flags))
        exempt = sum(1 for f in list(self._flags)[len(self._flags) - held:] if f & SILENCE_OFF)
        for ring in (self._keys, self._flags, self._calls):
            for _ in range(min(calls, len(ring))):
                ring.pop()
        self._repeat.retract(calls)
        self._cycle.retract(calls)
        self._attempt_calls = max(self._attempt_calls - calls, 0)
        self._name.retract(calls)
        self._silence.retract(calls, exempt)
        self._recycled.retract(calls)
        if self._stats is not None:
            self._stats.after_reset()  # the history changed under its per-period counts

    def enable_stats(self) -> None:
        """Keep, from now on, the peak of each signal's compared quantity (``stats``)."""
        if self._stats is None:
            self._stats = SessionStats()

    @property
    def stats(self) -> tuple[int, ...] | None:
        """Per signal, in SPEC §1 order, the largest value its threshold was compared with;
        None unless ``enable_stats()`` was called."""
        return None if self._stats is None else tuple(self._stats.peak)

    def _fired(self, mask: int, name: str, detail: Any,
               ) -> tuple[Alert, ...]:  # pragma: no cover - abstract
        raise NotImplementedError


# --------------------------------------------------------------------------------------------
# 4. Streaming token estimate (SPEC §6)
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# 5. Batch ingest (the same contract as the native Batch, one event at a time)

class Batch:
    """Many sessions' events observed in order, one at a time; the contract of
    ``tripwire._native.Batch`` (there, the class docstring), usage rows included: charged here
    unless Python must decide, exactly as the native core does."""

    def __init__(self, rows: Iterable[Any],
                 convert: Callable[[Any, int], Any] | None = None):
        self.rows = list(rows)
        self.slot_of: dict[str, int] = {}
        self.session_ids: list[str] = []
        self.slots: list[int] = []
        # per slot, the task's charge for the rows observed since the last take
        # (task_charges()): [model steps, their tokens, their cost (nano-dollars), tool calls]
        self.charges: list[list[int]] = []
        self.bound = False
        i = 0
        try:
            for i, row in enumerate(self.rows):
                self.rows[i] = self._check(row, i, convert)
        except InvalidEvent as e:
            raise InvalidEvent(f"event {i}: {e.message}") from None

    def _check(self, row: Any, i: int, convert: Callable[[Any, int], Any] | None,
               ) -> tuple[Any, ...]:
        """The checks the native batch makes up front, so a bad row fails before any is seen."""
        if (not isinstance(row, tuple) or len(row) < 2
                or (not isinstance(row[1], str) and convert is not None)):
            if convert is not None:
                row = convert(row, i)
            if isinstance(row, list):
                row = tuple(row)
            if not isinstance(row, tuple) or len(row) < 2:
                raise InvalidEvent(f"expected (session_id, kind, *fields), not {row!r}")
        sid, kind = row[0], row[1]
        nfields = BATCH_FIELDS.get(kind) if isinstance(kind, str) else None
        if nfields is None:
            raise InvalidEvent(f"unknown kind {kind!r} (known: {', '.join(BATCH_FIELDS)})")
        if len(row) - 2 > nfields:
            raise InvalidEvent(f"a {kind} takes at most {nfields} fields")
        slot = self.slot_of.get(sid)
        if slot is None:
            if not isinstance(sid, str) or not sid:
                raise InvalidEvent(f"a session id is a non-empty str, not {sid!r}")
            slot = self.slot_of[sid] = len(self.session_ids)
            self.session_ids.append(sid)
        self.slots.append(slot)
        fields = (*row[2:], None, None, None, None, None)
        if kind == "call":
            name_str(fields[0])
            args_bytes(fields[1])
            check_id(fields[2])  # the API's validation, field by field (validate.py)
        elif kind == "result":
            if fields[0] is not None:
                name_str(fields[0])
            if fields[1] is not None and not isinstance(
                    fields[1], (str, bytes, bytearray, memoryview)):
                payload_bytes(fields[1])
            error_failed(fields[2])
            check_no_op(fields[3])  # the API's validation, field by field (validate.py)
            check_id(fields[4])
        elif kind == "text":
            text_has_words(fields[0])
        elif kind == "usage":
            usage_cost_nano(fields[1], fields[2], fields[3])
        return row

    def bind(self, states: list[BatchState]) -> None:
        if len(states) != len(self.session_ids):
            raise ValueError(f"bind: {len(states)} states for {len(self.session_ids)} sessions")
        self.engines = [s.engine for s in states]
        self.states = [BatchSlot(s) for s in states]
        self.ids = [dict(s.ids) for s in states]
        self.ids_changed = [False] * len(states)
        self.charges = [[0, 0, 0, 0] for _ in states]
        self.items: list[tuple[Any, ...]] = []
        self.blocked_rows: list[int] = []
        self.pos = 0
        for i, row in enumerate(self.rows):
            slot = self.slots[i]
            kind = row[1]
            names = self.ids[slot]
            if kind == "turn_start":
                names.clear()
                self.ids_changed[slot] = True
            fields = (*row[2:], *_NO_FIELDS)  # a short row's missing fields are None
            if kind == "call":
                name = fields[0]
                if fields[2] is not None:
                    remember_call_id(names, fields[2], name)
                    self.ids_changed[slot] = True
            elif kind == "result":
                name = fields[0]
                if name is None:
                    name = names.get(fields[4], "") if fields[4] is not None else ""
            if kind not in ("call", "result", "text", "usage") or self.engines[slot] is None:
                self.items.append(("p", slot))
            elif kind == "usage":
                nano = usage_cost_nano(fields[1], fields[2], fields[3])
                model = fields[0]
                self.items.append(("u", slot, nano, model, fields[1],
                                   (fields[1] or 0) + (fields[2] or 0), bool(fields[2]))
                                  if model is None
                                  or isinstance(model, str) else ("p", slot))
            elif kind == "text":
                self.items.append(("t", slot, fields[0]))
            elif kind == "call":
                self.items.append(("c", slot, name, fields[1]))
            else:
                self.items.append(("r", slot, name, fields[1], fields[2], bool(fields[3]),
                                   bool(fields[5])))
        self.bound = True

    def run(self) -> tuple[int, tuple[Alert, ...], StopReason]:
        if not self.bound:
            raise RuntimeError("Batch.bind() first")
        n = len(self.items)
        while self.pos < n:
            i = self.pos
            item = self.items[i]
            self.pos += 1
            if item[0] == "p":
                return i, (), StopReason.PYTHON
            slot = item[1]
            st = self.states[slot]
            engine = self.engines[slot]
            if item[0] == "u":  # counted and charged even while blocked, as on_usage does
                if not st.take_usage(item[2], item[3], item[4], item[5]):
                    return i, (), StopReason.PYTHON  # Guardrails decides
                charge = self.charges[slot]  # its task's step, tokens, dollars (task_charges())
                charge[0] += 1
                charge[1] += item[5]
                charge[2] += item[2]
                if st.blocked:
                    engine.count_event()
                    self.blocked_rows.append(i)
                    continue
                alerts = engine.observe_response(item[6])  # empty-responses (SPEC §12.4)
                if alerts:
                    return i, alerts, StopReason.POLICY
                continue
            if st.blocked:
                self.blocked_rows.append(i)
                continue
            if item[0] == "t":
                alerts = engine.observe_text(item[2])
                if alerts or (st.words and text_has_words(item[2])):
                    return i, alerts, StopReason.POLICY  # and withdraws the notes answered
                continue
            if item[0] == "c":
                if st.calls_python:
                    return i, (), StopReason.PYTHON
                self.charges[slot][3] += 1  # its task's tool call (task_charges())
                alerts = engine.observe_call(item[2], item[3])
                if alerts:
                    return i, alerts, StopReason.POLICY
                continue
            _, _, name, payload, error, no_op, unknown = item
            alerts = engine.observe_result(name, error=error, no_op=no_op, payload=payload,
                                           unknown_tool=unknown)
            if st.has_context:
                size = 0 if payload is None else utf8_length(payload) if isinstance(payload, (
                    str, bytes, bytearray, memoryview)) else len(payload_bytes(payload) or b"")
                st.added += size
                # every result is checked, as on_result checks the context after each (a limit
                # already crossed, say since a turn started, cuts here too)
                if st.crosses(st.tokens()):
                    return i, alerts, StopReason.POLICY
            if alerts:
                return i, alerts, StopReason.POLICY
        return n, (), StopReason.END

    def row(self, i: int) -> tuple[Any, ...]:
        row: tuple[Any, ...] = self.rows[i]
        return row + (None,) * (BATCH_FIELDS[row[1]] + 2 - len(row))

    def slot(self, i: int) -> int:
        return self.slots[i]

    def update_slot(self, slot: int, state: BatchState) -> None:
        self.states[slot] = BatchSlot(state)

    def take_blocked(self) -> list[int]:
        rows, self.blocked_rows = self.blocked_rows, []
        return rows

    def changes(self, slot: int = -1) -> list[BatchChange]:
        slots = (slot,) if slot >= 0 else range(len(self.states))
        return [c for k in slots if (c := self.states[k].change(k)) is not None]

    def task_charges(self, slot: int = -1) -> list[tuple[int, int, int, int, int]]:
        out = []
        for k in ((slot,) if slot >= 0 else range(len(self.charges))):
            charge = self.charges[k]
            if charge[0] or charge[3]:
                out.append((k, charge[0], charge[1], charge[2], charge[3]))
                charge[:] = [0, 0, 0, 0]
        return out

    def call_ids(self) -> list[tuple[int, dict[Any, str]]]:
        return [(k, ids) for k, ids in enumerate(self.ids)
                if self.ids_changed[k] and self.engines[k] is not None]
