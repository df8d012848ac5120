"""repeated-tool-call: N calls in a row with equivalent arguments (SPEC §1, §2.3), unless the
run is polling something that changes (SPEC §10.24, §12.2): results compare by their answer
(SPEC §12.1), and a poll whose answer has not changed for ``poll_plateau`` results trips.

Native twin: ``native/repeated_tool_call.*``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from ..base.alert import CRITICAL, SESSION
from ..identity.canonical import CanonicalCall, paths_suffix_match
from ._spec import Knob, SignalSpec, quote_args, threshold, tool_label
from .tool_rules import PER_TOOL_THRESHOLD

if TYPE_CHECKING:
    from .view import EngineView


class Poll(IntEnum):
    """What the results of the current run's calls have shown, in arrival order (SPEC §10.24,
    §12.2).

    Native twin: ``tw::Poll`` (the same values). Only ``CHANGING`` exempts the run (a *poll*:
    its answer changed at least once, and has not stayed the same for ``poll_plateau``
    results); the last four are the ways an exemption that held can end, which the alert's
    texts name.
    """

    AWAITING = 0  # no result of the run's tool yet
    ONE_PAYLOAD = 1  # one successful payload: nothing to compare it with yet
    CHANGING = 2  # a poll: every result a success with a payload, its answer changed at least
    #               once and has been the same for fewer than poll_plateau results
    ENDED = 3  # ended before the run ever observed change: an ordinary repeat
    STOPPED_CHANGING = 4  # the same answer for poll_plateau results in a row
    FAILED = 5
    NO_OP = 6
    NO_PAYLOAD = 7


#: What changed, for an alert raised after the run's exemption ended ({polls}: the knob).
POLL_ENDED = {
    Poll.STOPPED_CHANGING: "the output has not changed for the last {polls} polls",
    Poll.FAILED: "the last poll failed",
    Poll.NO_OP: "the last poll reported that it did nothing",
    Poll.NO_PAYLOAD: "the last poll returned no output",
}


def texts(wd: EngineView, name: str, args: Any) -> tuple[str, str, int]:
    n = wd.repeat_run
    quoted = quote_args(args)
    tool = tool_label(name)
    ended = POLL_ENDED.get(Poll(wd.repeat_poll))
    if ended is not None:
        ended = ended.format(polls=wd.settings.poll_plateau)
    if ended is None:
        reason = (
            f"{tool} was called {n} times in a row with equivalent arguments ({quoted}): a likely "
            "loop, since the same call returns the same result."
        )
        why = ("The same call with the same arguments returns the same result, so repeating it "
               "cannot make progress.")
    else:
        reason = (
            f"{tool} was called {n} times in a row with equivalent arguments ({quoted}); its "
            f"output kept changing, as when polling, until {ended}: a likely loop now."
        )
        why = (f"While its output kept changing you were waiting on something, but {ended}, so "
               "repeating the call now cannot make progress.")
    guidance = (
        f"You called {tool} {n} times in a row with the same arguments ({quoted}). {why} "
        "Change the arguments, use a different tool, or, if you have no next step that differs, "
        "stop calling tools and say what you are stuck on. Do not repeat this call unchanged."
    )
    return reason, guidance, n


def resolve(value: Callable[[str], Any], resolved: Mapping[str, Any]) -> dict[str, Any]:
    return {"repeat_threshold": value("threshold"), "poll_plateau": value("poll_plateau")}


SPEC = SignalSpec(
    "repeated-tool-call", CRITICAL, SESSION,
    "calls in a row with equivalent arguments",
    (threshold(5, "calls in a row with equivalent args",
               "the read_file loop of the seed; five identical calls are no sweep"),
     Knob("poll_plateau", 10, "results of a poll in a row with the same answer", minimum=2,
          why="twice the threshold: a poll has shown it is waiting on something, so it gets "
              "longer than a plain repeat before its unchanged answer counts as stuck; "
              "OpenClaw's no-progress poll rule warns at 10 identical results (and blocks at "
              "20), and a rollout sitting at '5 of 6 replicas' for a few polls is healthy")),
    texts, resolve, per_tool=PER_TOOL_THRESHOLD,
)


class RepeatDetector:
    """N calls in a row with equivalent args, run-consistent (SPEC §2.3), unless the run is
    observing change (SPEC §10.24).

    A result belongs to the current run when it is a result of the run's tool and arrives while
    the run is current (results carry a tool name, not the call they answer): a late result of
    a call before the run, of the same tool, counts for it too. Results are taken as they
    arrive; a call decides on those that have arrived by then.
    """

    def __init__(self, threshold: int, enabled: bool, poll_plateau: int = 10):
        self.threshold = threshold
        self.enabled = enabled
        self.poll_plateau = poll_plateau
        self.reset()

    def reset(self) -> None:
        self.run = 0
        self.rest = 0
        self.is_object = False
        self.longest: list[str] = []  # the longest spelling seen in the run, per path key
        self.tripped = False
        self.name = ""
        self.poll = Poll.AWAITING
        self.last: bytes | None = None  # the previous answer of the run
        self.plateau = 0  # results in a row carrying that answer

    def retract(self, calls: int) -> None:
        """The last `calls` calls are taken back (``Watchdog.retract_calls``): the run loses
        them; a run made only of them is forgotten (the run before it cannot be resumed)."""
        if self.run > calls:
            self.run -= calls
        else:
            self.reset()

    def continues(self, call: CanonicalCall) -> bool:
        return (
            self.run > 0
            and call.rest == self.rest
            and call.is_object == self.is_object
            and all(paths_suffix_match(p, q) for p, q in zip(call.paths, self.longest, strict=True))
        )

    def observe(self, call: CanonicalCall, name: str,
                threshold: int | None = None) -> tuple[bool, bool]:
        """Returns (joined the current run, fired). ``threshold``: the call's tool's own
        (a per-tool rule, ``tool_rules.OFF`` when off), else the signal's."""
        joined = self.continues(call)
        if joined:
            self.run += 1
            self.longest = [
                p if len(p) > len(q) else q for p, q in zip(call.paths, self.longest, strict=True)
            ]
        else:
            self.run = 1
            self.rest = call.rest
            self.is_object = call.is_object
            self.longest = list(call.paths)
            self.tripped = False
            self.name = name
            self.poll = Poll.AWAITING
            self.plateau = 0
        if threshold is None:
            threshold = self.threshold
        if (self.enabled and self.run >= threshold and not self.tripped
                and self.poll != Poll.CHANGING):
            self.tripped = True
            return joined, True
        return joined, False

    def awaits(self, name: str) -> bool:
        """Whether a result of tool ``name`` arriving now is the current run's and can still
        change its exemption (then the engine digests its payload, exempt tool or not)."""
        return self.run > 0 and name == self.name and self.poll < Poll.ENDED

    def observe_result(self, failed: bool, no_op: bool, answer: bytes | None) -> None:
        """A result that ``awaits`` said is the run's: ``answer`` None when it has no payload
        or the empty answer (SPEC §12.1)."""
        if failed:
            end = Poll.FAILED
        elif no_op:
            end = Poll.NO_OP
        elif answer is None:
            end = Poll.NO_PAYLOAD
        elif self.poll == Poll.AWAITING:
            self.poll, self.last, self.plateau = Poll.ONE_PAYLOAD, answer, 1
            return
        elif answer != self.last:
            self.poll, self.last, self.plateau = Poll.CHANGING, answer, 1
            return
        else:
            self.plateau += 1
            if self.poll == Poll.CHANGING and self.plateau < self.poll_plateau:
                return  # a poll waiting (SPEC §12.2)
            end = Poll.STOPPED_CHANGING
        # sticky for the run: a run that ended is not polling again later
        self.poll = end if self.poll == Poll.CHANGING else Poll.ENDED
