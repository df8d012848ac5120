"""What the alert texts read of the reference engine (``signals.view.EngineView``): each
detector's counts, as properties over the detectors ``engine.reference.Engine`` builds. Kept
apart from the engine's observations so that each stays a house of its own size; the native
twin is ``NativeWatchdog``'s readings of the core's session."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..signals._spec import StreakDetector
    from ..signals.alternating_tool_cycle import CycleDetector
    from ..signals.compaction_storm import CompactionStormDetector
    from ..signals.dominant_tool_call import DensityDetector
    from ..signals.empty_responses import EmptyResponsesDetector
    from ..signals.looping_text import LoopingTextDetector
    from ..signals.persistent_warnings import PersistentWarningsDetector
    from ..signals.recycled_calls import RecycledCallsDetector
    from ..signals.repeated_failure import RepeatedFailureDetector
    from ..signals.repeated_text import RepeatedTextDetector
    from ..signals.repeated_tool_call import RepeatDetector
    from ..signals.repeated_tool_name import NameRunDetector
    from ..signals.tool_failure_streak import FailureStreakDetector
    from ..signals.tools_without_text import SilenceDetector
    from ..signals.unknown_tool import UnknownToolDetector

__all__ = ["EngineReadings"]


class EngineReadings:
    """The engine's detectors, as the texts read them (built by ``Engine._engine_init``)."""

    _calls: deque[tuple[str, Any]]
    _failure_names: list[str]
    _no_op_names: list[str]
    _attempt_calls: int
    _repeat: RepeatDetector
    _cycle: CycleDetector
    _density: DensityDetector
    _name: NameRunDetector
    _silence: SilenceDetector
    _failures: FailureStreakDetector
    _no_ops: StreakDetector
    _stale: StreakDetector
    _repeated_failure: RepeatedFailureDetector
    _recycled: RecycledCallsDetector
    _unknown: UnknownToolDetector
    _text: RepeatedTextDetector
    _empty: EmptyResponsesDetector
    _storm: CompactionStormDetector
    _persistent: PersistentWarningsDetector
    _looping: LoopingTextDetector

    def recent_call(self, age: int) -> tuple[str, Any]:
        """The (name, args) of the call `age` calls ago (0 = the latest)."""
        return self._calls[-1 - age]

    @property
    def calls_held(self) -> int:
        """How many recent calls ``recent_call`` can return (the call ring's size)."""
        return len(self._calls)

    @property
    def repeat_run(self) -> int:
        return self._repeat.run

    @property
    def repeat_poll(self) -> int:
        """What the current run's results have shown (``signals.repeated_tool_call.Poll``)."""
        return int(self._repeat.poll)

    @property
    def attempt_calls(self) -> int:
        """Calls since the last result, model response or turn: a retry replaces them."""
        return self._attempt_calls

    @property
    def cycle_period(self) -> int:
        return self._cycle.period

    @property
    def dominant(self) -> tuple[int, int, int]:
        """(count, window length, age of the dominant key's earliest window entry)."""
        d = self._density
        return d.count, d.length, d.first_age

    @property
    def name_run(self) -> int:
        return self._name.run

    @property
    def silent_calls(self) -> int:
        return self._silence.streak

    @property
    def failure_streak(self) -> int:
        return self._failures.run

    @property
    def failure_names(self) -> list[str]:
        return list(self._failure_names)

    @property
    def no_op_run(self) -> int:
        return self._no_ops.run

    @property
    def no_op_names(self) -> list[str]:
        return list(self._no_op_names)

    @property
    def stale_results(self) -> int:
        return self._stale.run

    @property
    def same_error_failures(self) -> int:
        """Failures of the last failed result's (tool, error signature) since a success."""
        return self._repeated_failure.last

    @property
    def recycled_run(self) -> int:
        """Results in a row each answering a repeated call with its earlier answer."""
        return self._recycled.run

    @property
    def unknown_tool_run(self) -> int:
        return self._unknown.run

    @property
    def repeated_text_run(self) -> int:
        return self._text.run

    @property
    def empty_responses(self) -> int:
        return self._empty.run

    @property
    def compaction_storm(self) -> tuple[int, int]:
        """(compactions in this turn, since a turn last ended in agent text)."""
        return self._storm.turn, self._storm.run

    @property
    def persistent_warnings(self) -> tuple[int, int]:
        """(warn alerts since the last new answer, the bits of the signals they were)."""
        return self._persistent.run, self._persistent.signals

    @property
    def looping_text(self) -> tuple[int, int]:
        """(laps, period in bytes) of the last message's end."""
        return self._looping.last
