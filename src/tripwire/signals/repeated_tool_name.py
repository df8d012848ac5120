"""repeated-tool-name: N calls in a row with the same tool name, whatever the args (SPEC §1,
§10.1). Native twin: ``native/repeated_tool_name.*``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..base.alert import WARN
from ..identity.shell import SHELL_TOOLS, tool_identity
from ._spec import Knob, SignalSpec, threshold, tool_label
from .tool_rules import PER_TOOL_THRESHOLD

if TYPE_CHECKING:
    from .view import EngineView


def texts(wd: EngineView, name: str, args: Any) -> tuple[str, str, int]:
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


def resolve(value: Callable[[str], Any], resolved: Mapping[str, Any]) -> dict[str, Any]:
    return {"name_threshold": value("threshold"),
            "shell_tools": frozenset(value("shell_tools"))}


SPEC = SignalSpec(
    "repeated-tool-name", WARN, None,
    "calls in a row with the same tool name, whatever the args",
    (threshold(15, "calls in a row with one tool name",
               "a name is almost no evidence; 12 distinct reads are work, so 15 clears that "
               "with margin and still fires before a 20-call grind"),
     Knob("shell_tools", SHELL_TOOLS, "shell tools: their identity is tool:program, the "
          "first word of the command (SPEC §11.2)", maximum=None, kind=tuple,
          why="bash running pytest, then grep, is two tools, not one name repeated")),
    texts, resolve, per_tool=PER_TOOL_THRESHOLD,
)


class NameRunDetector:
    """N calls in a row with the same name; stands down for a run the repeat detector counts."""

    def __init__(self, threshold: int, stand_down_run: int):
        self.threshold = threshold
        self.stand_down_run = stand_down_run  # the repeat threshold; 0 when nothing to defer to
        self.reset()

    def reset(self) -> None:
        self.name: str | None = None
        self.run = 0
        self.reported = False

    def retract(self, calls: int) -> None:
        """The last `calls` calls are taken back: as ``RepeatDetector.retract``."""
        if self.run > calls:
            self.run -= calls
        else:
            self.reset()

    def observe(self, name: str, repeat_run: int, threshold: int | None = None,
                stand_down_run: int | None = None) -> bool:
        """``threshold``, ``stand_down_run``: the call's tool's own (a per-tool rule), else
        the detector's."""
        if threshold is None:
            threshold = self.threshold
        if stand_down_run is None:
            stand_down_run = self.stand_down_run
        if self.run and name == self.name:
            self.run += 1
        else:
            self.name, self.run, self.reported = name, 1, False
        if self.run >= threshold and not self.reported:
            self.reported = True  # a stood-down run counts as reported
            return not (stand_down_run and repeat_run >= stand_down_run)
        return False
