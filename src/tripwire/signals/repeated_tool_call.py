"""repeated-tool-call: N calls in a row with equivalent arguments (SPEC §1, §2.3), unless the
run is polling something that changes (SPEC §10.24).

Native twin: ``native/repeated_tool_call.*``.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, Any

from .._canonical import CanonicalCall, paths_suffix_match
from ._spec import (
    CRITICAL,
    SESSION,
    SignalSpec,
    quote_args,
    threshold,
    threshold_setting,
    tool_label,
)

if TYPE_CHECKING:
    from ..watchdog import Watchdog


class Poll(IntEnum):
    """What the results of the current run's calls have shown, in arrival order (SPEC §10.24).

    Native twin: ``tw::Poll`` (the same values). Only ``CHANGING`` exempts the run; the last
    four are the ways an exemption that held can end, which the alert's texts name.
    """

    AWAITING = 0  # no result of the run's tool yet
    ONE_PAYLOAD = 1  # one successful payload: nothing to compare it with yet
    CHANGING = 2  # every result a success with a payload, each differing from the one before
    ENDED = 3  # ended before the run ever observed change: an ordinary repeat
    STOPPED_CHANGING = 4
    FAILED = 5
    NO_OP = 6
    NO_PAYLOAD = 7


#: What changed, for an alert raised after the run's exemption ended.
POLL_ENDED = {
    Poll.STOPPED_CHANGING: "the output stopped changing",
    Poll.FAILED: "the last poll failed",
    Poll.NO_OP: "the last poll reported that it did nothing",
    Poll.NO_PAYLOAD: "the last poll returned no output",
}


def texts(wd: Watchdog, name: str, args: Any) -> tuple[str, str, int]:
    n = wd.repeat_run
    quoted = quote_args(args)
    tool = tool_label(name)
    ended = POLL_ENDED.get(Poll(wd.repeat_poll))
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


resolve = threshold_setting("repeat_threshold")


SPEC = SignalSpec(
    "repeated-tool-call", CRITICAL, SESSION,
    "calls in a row with equivalent arguments",
    (threshold(5, "calls in a row with equivalent args",
               "the read_file loop of the seed; five identical calls are no sweep"),),
    texts, resolve,
)


class RepeatDetector:
    """N calls in a row with equivalent args, run-consistent (SPEC §2.3), unless the run is
    observing change (SPEC §10.24).

    A result belongs to the current run when it is a result of the run's tool and arrives while
    the run is current (results carry a tool name, not the call they answer): a late result of
    a call before the run, of the same tool, counts for it too. Results are taken as they
    arrive; a call decides on those that have arrived by then.
    """

    def __init__(self, threshold: int, enabled: bool):
        self.threshold = threshold
        self.enabled = enabled
        self.reset()

    def reset(self) -> None:
        self.run = 0
        self.rest = 0
        self.is_object = False
        self.longest: list[str] = []  # the longest spelling seen in the run, per path key
        self.tripped = False
        self.name = ""
        self.poll = Poll.AWAITING
        self.last: bytes | None = None  # the previous payload digest of the run

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

    def observe(self, call: CanonicalCall, name: str) -> tuple[bool, bool]:
        """Returns (joined the current run, fired)."""
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
        if (self.enabled and self.run >= self.threshold and not self.tripped
                and self.poll != Poll.CHANGING):
            self.tripped = True
            return joined, True
        return joined, False

    def awaits(self, name: str) -> bool:
        """Whether a result of tool ``name`` arriving now is the current run's and can still
        change its exemption (then the engine digests its payload, exempt tool or not)."""
        return self.run > 0 and name == self.name and self.poll < Poll.ENDED

    def observe_result(self, failed: bool, no_op: bool, digest: bytes | None) -> None:
        """A result that ``awaits`` said is the run's: ``digest`` None when it has no payload."""
        if failed:
            end = Poll.FAILED
        elif no_op:
            end = Poll.NO_OP
        elif digest is None:
            end = Poll.NO_PAYLOAD
        elif self.poll == Poll.AWAITING:
            self.poll, self.last = Poll.ONE_PAYLOAD, digest
            return
        elif digest != self.last:
            self.poll, self.last = Poll.CHANGING, digest
            return
        else:
            end = Poll.STOPPED_CHANGING
        # sticky for the run: a poll that repeats itself once is not polling again later
        self.poll = end if self.poll == Poll.CHANGING else Poll.ENDED
