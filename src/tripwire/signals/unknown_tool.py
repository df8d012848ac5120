"""unknown-tool: calls in a row within a turn that name a tool the host says it does not have
(SPEC §12.4; OpenClaw's ``unknown_tool_repeat``, Claude Code's "No such tool available").
Native twin: ``native/unknown_tool.h``.

Decisions (SPEC §12.4 leaves them open):

- *It counts at the result*: a call is unknown when its result carries ``unknown_tool: true``
  or, with ``known_tools`` configured, its name is outside that list. The host's answer is the
  evidence (a call still waiting for it is not known to have missed), and the call path stays
  untouched. Any other result breaks the run and re-arms the signal; a turn boundary does too
  (the count is "within a turn").
- *One behaviour, one alert* (SPEC §12.3's rule): a failed result this signal counts is its
  own. ``repeated-failure`` does not count it, and ``tool-failure-streak`` stands down while
  the last ``threshold`` failures of its streak are such results (a streak it stood down on
  counts as reported), exactly as it stands down for ``repeated-failure``. Both only while
  this signal is enabled.
- Promotion: ``severity = "critical"`` makes it a turn-scoped critical alert.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..base.alert import WARN
from ._spec import Knob, SignalSpec, StreakDetector, threshold, tool_label

if TYPE_CHECKING:
    from .view import EngineView

__all__ = ["SPEC", "UNKNOWN_PAIR", "is_unknown", "UnknownToolDetector"]

#: The failure streak's pair tag for a failure this signal counts: all such failures are one
#: behaviour, whatever the tool (native: kUnknownPair; a real pair's low 32 bits equal it
#: about once in 2^32).
UNKNOWN_PAIR = 0x554E4B4E


def is_unknown(name: str, flagged: bool, known_tools: frozenset[str]) -> bool:
    """The result answers a call of a tool the host does not have."""
    return flagged or (bool(known_tools) and name not in known_tools)


def texts(wd: EngineView, name: str, error: Any) -> tuple[str, str, int]:
    n = wd.unknown_tool_run
    tool = tool_label(name)
    known = sorted(wd.settings.known_tools)
    listed = f" Its tools: {', '.join(known[:20])}{' ...' if len(known) > 20 else ''}." \
        if known else ""
    reason = (
        f"{n} calls in a row in this turn named tools that do not exist here (the last: "
        f"{tool}): the agent keeps calling a tool it does not have."
    )
    guidance = (
        f"Your last {n} tool calls named tools that do not exist here (the last: {tool}), and "
        f"each one failed for that reason. Calling it again will fail the same way.{listed} "
        "Use one of the tools you have, or say what you need that they cannot do."
    )
    return reason, guidance, n


def resolve(value: Callable[[str], Any], resolved: Mapping[str, Any]) -> dict[str, Any]:
    return {"unknown_tool_threshold": value("threshold"),
            "known_tools": frozenset(value("known_tools"))}


SPEC = SignalSpec(
    "unknown-tool", WARN, None,
    "calls in a row within a turn that name a tool the host does not have",
    (
        threshold(3, "calls of missing tools in a row within a turn",
                  "OpenClaw's unknown_tool_repeat; a model told three times that a tool does "
                  "not exist is not going to find it on the fourth"),
        Knob("severity", WARN, "warn, or critical to cut the turn (a turn-scoped critical)",
             maximum=None, kind=str, choices=("warn", "critical"),
             why="warn by default: the host already refuses the call, so nothing runs; "
                 "promote where a model that cannot find its tools should stop"),
        Knob("known_tools", (), "the host's tools: a call of any other name is unknown "
             "(empty: only results flagged unknown_tool count)", maximum=None, kind=tuple,
             why="a host that lists its tools needs no per-harness error text to tell"),
    ),
    texts, resolve,
)


class UnknownToolDetector(StreakDetector):
    """Results in a row that answer a call of a missing tool; a turn boundary ends the run."""

    def observe(self, unknown: bool) -> bool:
        if unknown:
            return self.extend()
        if self.run:
            self.reset()
        return False
