"""persistent-warnings: warnings that keep coming back with no progress between them (issue
39). Native twin: ``native/persistent_warnings.h``.

A warn signal reports a pattern once and re-arms when the pattern breaks; an agent that hears
the warning, changes nothing and falls into the same pattern (or into another warned one) gets
the warning again, and again. This signal counts those warnings: every warn alert (each warn
signal that fires on an event counts once) since the session last made progress, and trips,
as a critical of its own, at ``threshold`` of them.

Decisions, from the recorded sessions (``docs/watchdog.md``, "persistent-warnings"):

- *A warning*: an alert of a signal that alerts as ``warn`` under the session's config (a
  ``repeated-failure`` or ``unknown-tool`` promoted to critical already cuts the turn, and is
  not counted); the built-in signals only (a host-defined signal runs after the engines).
- *A warning that persists*: ``no-new-state``'s run of already-seen answers going on to
  twice its threshold (and every further multiple) counts as its warning again, not alerted
  again (a navigate to another URL each time, every page the same 404: one run, one alert,
  and without this no second strike ever).
- *Progress*: a successful result whose answer the turn had not seen yet (the one answer the
  engines compute, the same one ``no-new-state``'s seen-set reads; a no-op, a failure, an
  exempt tool's result, an empty payload and an answer already seen are not progress). Text
  is not: the agent's words changing topic re-arm ``repeated-text`` but show nothing done
  (the measured runaways narrate each failed attempt in new words). A mutating tool's success
  is progress when its payload is new, and only then (an edit that answers ``success: true``
  the same way every time changed nothing the watchdog can see).
- *One behaviour, one alert*: it trips once; progress re-arms it (the count starts again) and
  so does an operator reset. A turn boundary does not: warnings that persist across turns are
  the pattern (a new turn's first answers are new to its seen-set, so real work in it counts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.alert import CRITICAL, SESSION
from ._spec import SignalSpec, StreakDetector, threshold, threshold_setting

if TYPE_CHECKING:
    from .view import EngineView

__all__ = ["SPEC", "PersistentWarningsDetector", "persists"]


def texts(wd: EngineView, name: str, detail: Any) -> tuple[str, str, int]:
    n, mask = wd.persistent_warnings
    which = ", ".join(wd.signal_ids(mask)) or "warn signals"
    reason = (
        f"{n} warnings ({which}) with no new tool result between them: the agent keeps "
        "falling back into the patterns it was warned about, so the warnings are not being "
        "acted on."
    )
    guidance = (
        f"You have been warned {n} times ({which}) and no tool result since the first of "
        "those warnings has told you anything new. Stop repeating the approach: state what "
        "you have established, what exactly is failing, and take one different step (another "
        "file, another command, a smaller test), or stop and report what blocks you."
    )
    return reason, guidance, n


resolve = threshold_setting("persistent_warnings_threshold")


SPEC = SignalSpec(
    "persistent-warnings", CRITICAL, SESSION,
    "warn alerts that keep coming back with no new tool result between them",
    (threshold(4, "warn alerts with no new answer between them",
               "on 770 recorded sessions (500 mini-swe-agent runs that submitted) the most "
               "warn alerts with no new answer between them is 2; 4 is twice that, and a "
               "fourth warning on nothing new means the first three were not acted on"),),
    texts, resolve,
)


def persists(streak: StreakDetector) -> bool:
    """A warned streak (no-new-state's) just went on to another multiple of its threshold: its
    warning persisting, counted again without a second alert (native: ``Session::
    observe_result``)."""
    return streak.run > streak.threshold and streak.run % streak.threshold == 0


class PersistentWarningsDetector:
    """Warn alerts since the last progress (a new answer); one alert until progress."""

    def __init__(self, threshold: int):
        self.threshold = threshold
        self.reset()

    def reset(self) -> None:
        self.run = 0  # warn alerts since the last progress
        self.signals = 0  # which warn signals they were (a mask of their bits)
        self.tripped = False

    def progress(self) -> None:
        """A new answer: the warnings before it were heeded, or at least not idle."""
        self.run, self.signals, self.tripped = 0, 0, False

    def observe(self, warned: int) -> bool:
        """An event's fired warn signals (``warned``: their bits); True when it trips."""
        if not warned:
            return False
        self.run += bin(warned).count("1")
        self.signals |= warned
        if self.run >= self.threshold and not self.tripped:
            self.tripped = True
            return True
        return False
