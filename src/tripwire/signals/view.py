"""``EngineView``: what a signal's texts read of the session's engine when the signal fires.

The signals sit below the engine (the engine composes their detectors), so their texts take
the engine by this shape, not by its class: both engines' ``Watchdog`` satisfy it (the native
one reads the counts from the C++ session, the reference one from its detectors).
"""

from __future__ import annotations

from typing import Any, Protocol

from .settings import EngineSettings

__all__ = ["EngineView"]


class EngineView(Protocol):
    """The counts and recent calls the alert texts state, read at trip time."""

    @property
    def settings(self) -> EngineSettings: ...

    def recent_call(self, age: int) -> tuple[str, Any]:
        """The (name, args) of the call ``age`` calls ago (0 = the latest)."""
        ...

    @property
    def calls_held(self) -> int: ...
    @property
    def repeat_run(self) -> int: ...
    @property
    def repeat_poll(self) -> int: ...
    @property
    def cycle_period(self) -> int: ...
    @property
    def dominant(self) -> tuple[int, int, int]: ...
    @property
    def name_run(self) -> int: ...
    @property
    def silent_calls(self) -> int: ...
    @property
    def failure_streak(self) -> int: ...
    @property
    def failure_names(self) -> list[str]: ...
    @property
    def no_op_run(self) -> int: ...
    @property
    def no_op_names(self) -> list[str]: ...
    @property
    def stale_results(self) -> int: ...
    @property
    def same_error_failures(self) -> int: ...
    @property
    def recycled_run(self) -> int: ...
