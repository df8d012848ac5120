"""The clocks a task reads its time from (SPEC §7.1: ``deadline_s``, ``tool_timeout_s``).

Time comes from the host's clock (a task's ``clock``: a callable returning seconds; the default
is the wall clock, never running backwards, so a deadline persisted by one process holds in the
next). Replay uses the events' ``ts``.
"""

from __future__ import annotations

import time

__all__ = ["WallClock", "ReplayClock", "WALL_CLOCK"]


class WallClock:
    """Seconds since the epoch, never running backwards (a clock stepped back by the system
    does not hand a task time back)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last = 0.0

    def __call__(self) -> float:
        now = time.time()
        if now < self._last:
            return self._last
        self._last = now
        return now


#: The default clock, shared (its only state is the latest reading).
WALL_CLOCK = WallClock()


class ReplayClock:
    """A recording's clock: the ``ts`` of the latest event that carried one (None before
    any did: time is then unknown, and nothing clock-based is judged)."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now: float | None = None

    def advance(self, ts: float | None) -> None:
        if ts is not None and (self.now is None or ts > self.now):
            self.now = ts

    def __call__(self) -> float | None:
        return self.now
