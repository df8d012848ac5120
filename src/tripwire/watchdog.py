"""``Watchdog``: one session's eight signals, turning the engine's fired codes into ``Alert``s.

The engine (native or reference, see ``_engine``) counts and compares; it calls back into
``Watchdog._fired`` only when a signal trips, which is rare, so the texts cost nothing on the
common path. Every observation returns a tuple of alerts, ``()`` when nothing fired.
"""

from __future__ import annotations

import functools
from typing import Any

from . import _engine
from ._common import tool_identity
from .signals import (
    BY_ID,
    SIGNALS,
    Alert,
    WatchdogConfig,
    error_text,
    quote_args,
    tool_label,
    tool_list,
)

__all__ = ["Watchdog", "IMPLEMENTATION", "watchdog_class"]  # noqa: F822 (module __getattr__)



def __getattr__(name: str) -> Any:
    if name == "IMPLEMENTATION":  # the default implementation, chosen on first use
        return _engine.default()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_REPEAT, _CYCLE, _DENSITY, _NAME, _FAILURE, _NO_OP, _NO_NEW_STATE, _SILENCE = (
    s.id for s in SIGNALS
)


class Watchdog:
    """One session's watchdog. ``Watchdog()`` runs SPEC §1's eight signals with their defaults.

    ``Watchdog(config, implementation="python")`` picks an engine explicitly; by default it is
    ``TRIPWIRE_IMPLEMENTATION``'s. Instances are of a concrete subclass per implementation
    (``watchdog_class(...)``), and every one is an instance of ``Watchdog``.

    Methods (all return a tuple of ``Alert``; empty when nothing fired):

    - ``observe_call(name, args)``: args as JSON ``str``/``bytes``, a decoded value, or None;
    - ``observe_result(name, error=None, no_op=False, payload=None)``;
    - ``observe_text(text)``: the agent's own words;
    - ``end_turn()``: a turn boundary; ``reset()``: an operator reset of every detector.

    Not thread-safe on its own: ``Guardrails`` serializes access per session.
    """

    implementation: str
    __slots__ = ()  # the native class then has no per-instance __dict__ (a fleet has many)

    def __new__(cls, config: WatchdogConfig | None = None, *, implementation: str | None = None):
        target = watchdog_class(implementation) if cls is Watchdog else cls
        # the engine's constructor along the concrete class's MRO (native: the C type's tp_new)
        return super(Watchdog, target).__new__(target)

    def __init__(
        self, config: WatchdogConfig | None = None, *, implementation: str | None = None
    ):
        self.config = config if config is not None else WatchdogConfig()
        self._engine_init(self.config.engine_settings())

    def __repr__(self) -> str:
        return f"<Watchdog {self.implementation} events={self.events}>"

    def _fired(self, mask: int, name: str, detail: Any) -> tuple[Alert, ...]:
        event = self.events - 1
        alerts = []
        for spec in SIGNALS:
            if mask & spec.bit:
                reason, guidance, count = _TEXTS[spec.id](self, name, detail)
                alerts.append(
                    Alert(spec.id, spec.severity, spec.scope, reason, guidance, event, name, count)
                )
        return tuple(alerts)


@functools.cache
def watchdog_class(implementation: str | None = None) -> type[Watchdog]:
    """The concrete ``Watchdog`` class of an implementation ("native" or "python")."""
    name = _engine.resolve(implementation)
    engine = _engine.load(name).Engine
    return type(f"{name.capitalize()}Watchdog", (Watchdog, engine),
                {"__module__": __name__, "__slots__": ()})


# ------------------------------------------------------------------------------------------
# Texts, one builder per signal: (watchdog, tool name, args or error) -> (reason, guidance, n)
# ------------------------------------------------------------------------------------------


def _repeat(wd: Watchdog, name: str, args: Any) -> tuple[str, str, int]:
    n = wd.repeat_run
    quoted = quote_args(args)
    tool = tool_label(name)
    reason = (
        f"{tool} was called {n} times in a row with equivalent arguments ({quoted}): a likely "
        "loop, since the same call returns the same result."
    )
    guidance = (
        f"You called {tool} {n} times in a row with the same arguments ({quoted}). The same call "
        "with the same arguments returns the same result, so repeating it cannot make progress. "
        "Change the arguments, use a different tool, or, if you have no next step that differs, "
        "stop calling tools and say what you are stuck on. Do not repeat this call unchanged."
    )
    return reason, guidance, n


def _cycle(wd: Watchdog, name: str, args: Any) -> tuple[str, str, int]:
    p = wd.cycle_period
    laps = wd.settings.cycle_cycles
    shells = wd.settings.shell_tools
    names = [tool_label(tool_identity(*wd.recent_call(age), shells))
             for age in range(p - 1, -1, -1)]
    sequence = " \u2192 ".join(names)
    reason = (
        f"The same {p}-call sequence ({sequence}) ran {laps} times in a row with identical "
        "arguments each lap: a loop the consecutive-repeat detector cannot see."
    )
    guidance = (
        f"You ran the same sequence of {p} tool calls ({sequence}) {laps} times with identical "
        "arguments each lap. Nothing in the inputs changed, so nothing in the results can have: "
        "the loop cannot make progress. Break the pattern: change the arguments, use a different "
        "tool, or stop and say what you need."
    )
    return reason, guidance, laps


def _density(wd: Watchdog, name: str, args: Any) -> tuple[str, str, int]:
    count, window, age = wd.dominant
    tool_name, first_args = wd.recent_call(age)
    tool = tool_label(tool_name)
    quoted = quote_args(first_args)
    reason = (
        f"{tool} was called with equivalent arguments {count} of the last {window} tool calls "
        f"({quoted}): a loop with other calls interleaved, which resets the consecutive-repeat "
        "count."
    )
    guidance = (
        f"{count} of your last {window} tool calls were {tool} with the same arguments "
        f"({quoted}); the calls in between changed nothing. Use what it already told you, change "
        "the arguments, or stop and say what you are stuck on."
    )
    return reason, guidance, count


def _name(wd: Watchdog, name: str, args: Any) -> tuple[str, str, int]:
    n = wd.name_run
    tool = tool_label(tool_identity(name, args, wd.settings.shell_tools))
    reason = (
        f"{tool} was called {n} times in a row with no other tool in between (arguments vary): "
        "a reworded loop or a long sweep; the name alone cannot tell which."
    )
    guidance = (
        f"You have called {tool} {n} times in a row and nothing else has happened in between. "
        "If you are working through a list, say which list and how far along you are; if you are "
        "stuck, stop and say what is blocking you."
    )
    return reason, guidance, n


def _failure(wd: Watchdog, name: str, error: Any) -> tuple[str, str, int]:
    n = wd.failure_streak
    names = tool_list(wd.failure_names)
    last = error_text(error)
    reason = (
        f"{n} tool calls in a row failed with no success in between ({names}), so the agent "
        f"has no tool-verified evidence; watch its next answer. Last error: {last}"
    )
    guidance = (
        f"Your last {n} tool calls all failed ({names}) and none succeeded, so nothing has been "
        f"verified. Last error: {last}. Do not describe anything as healthy, fixed or resolved on "
        "this evidence. Find a call that works, or tell the user what you could not check and "
        "why, and stop."
    )
    return reason, guidance, n


def _no_op(wd: Watchdog, name: str, error: Any) -> tuple[str, str, int]:
    n = wd.no_op_run
    names = tool_list(wd.no_op_names)
    reason = (
        f"{n} tool results in a row reported no_op: nothing changed ({names}). The agent is "
        "repeating work its tools say is already done."
    )
    guidance = (
        f"Your last {n} tool calls each reported that they changed nothing ({names}). Repeating "
        "them cannot accomplish anything further. If the work is done, stop calling tools and "
        "give your answer; otherwise do something that changes state."
    )
    return reason, guidance, n


def _no_new_state(wd: Watchdog, name: str, error: Any) -> tuple[str, str, int]:
    n = wd.stale_results
    exempt = sorted(wd.settings.exempt_tools)
    reason = (
        f"{n} successful tool results in a row returned a payload already seen this turn (last "
        f"from {tool_label(name)}): no new information is arriving, a stall or a hand-rolled poll."
    )
    wait = (
        f" If you are waiting for something to change, use {exempt[0]} instead of polling by hand."
        if exempt
        else ""
    )
    guidance = (
        f"Your last {n} tool results returned information you already had this turn. Asking "
        "again, even reworded or with another tool, will not produce anything new. Use what you "
        f"have or change approach.{wait}"
    )
    return reason, guidance, n


def _silence(wd: Watchdog, name: str, args: Any) -> tuple[str, str, int]:
    n = wd.silent_calls
    reason = (
        f"{n} tool calls in a row with no text from the agent: grinding in silence (a long "
        "legitimate sweep looks the same; raise the threshold if that is routine here)."
    )
    guidance = (
        f"You have made {n} tool calls in a row without saying anything. Before the next call, "
        "state briefly what you have found so far and what you are trying to establish."
    )
    return reason, guidance, n


_TEXTS = {
    _REPEAT: _repeat,
    _CYCLE: _cycle,
    _DENSITY: _density,
    _NAME: _name,
    _FAILURE: _failure,
    _NO_OP: _no_op,
    _NO_NEW_STATE: _no_new_state,
    _SILENCE: _silence,
}
assert set(_TEXTS) == set(BY_ID)
