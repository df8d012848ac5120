"""recycled-calls: calls in a row that each repeat a call made among the last ``window`` calls
and get the same answer that call got the time before (SPEC §12.4).

The period-free form of the cycle rule — nothing new in, nothing new out. Real runs cycle
through 6, 7 or 14 calls with identical arguments and identical answers until the call limit,
invisible to the 2..4 cycle detector and to density. Native twin: ``native/recycled_calls.*``.

Decisions (SPEC §12.4 leaves them open):

- *It counts at each result* (the answer is what it reads). Results carry a tool name, not a
  call: a result answers the oldest still-unanswered call of its tool, among the last
  ``PENDING`` (8) calls without a result (an older one is forgotten). A call with no answer yet
  neither counts nor breaks the run; a result with no pending call of its tool neither either.
- *Repeat*: the answered call's canonical key is the key of one of the last ``window``
  answered calls, and the answer that call got the time before (the most recent one) equals
  this one. Anything else breaks the run and re-arms the signal.
- *Answers* (SPEC §12.1): a success's answer, the empty answer included (the same call getting
  nothing back again is a repeat: real runs alternate two ``grep``s that find nothing until
  their limit); a no-op's, marked as a no-op's; a failure's error signature (SPEC §7.3), marked
  as a failure's, so a failure and a success never compare equal.
- *Exempt tools* (``wait_and_verify``, no-new-state's ``exempt_tools``): their results neither
  count nor break the run.
- *One loop, one alert* (SPEC §1, §12.4): it stands down while the last ``threshold`` calls are
  one run of the repeat detector (the call ring's join flags: the repeat relation itself) or a
  clean 2..max_period cycle (the cycle detector's: periodic, its block not one run), each only
  while that detector is enabled (SPEC §10.19); and, like the name detector (SPEC §10.1), a
  run it stood down on counts as reported.
- *Memory*: keys, tools and answers are kept as 32-bit tags (the low 32 bits of the canonical
  key, of the tool name's hash, of the answer's digest or the error's signature, with the
  answer's kind in its 2 low bits), the same truncation in both engines: a collision among the
  64 entries of a session is about one in 10^7 lookups. The window is 64 entries of 8 bytes
  (512 native bytes), the pending calls 8 of 8 bytes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..base.alert import CRITICAL, SESSION
from ..identity.shell import tool_identity
from ._spec import Knob, SignalSpec, one_run, threshold, tool_label
from .tool_rules import PER_TOOL_OFF

if TYPE_CHECKING:
    from .view import EngineView

__all__ = ["SPEC", "PENDING", "MAX_WINDOW", "SUCCESS", "NO_OP", "FAILURE", "answer_tag",
           "stands_down", "RecycledCallsDetector"]

#: Calls without a result yet that a result can answer (native: kPending).
PENDING = 8
#: The largest window (native: kMaxWindow, the ring's fixed size).
MAX_WINDOW = 64
#: The kind of an answer, in its tag's 2 low bits (0: none).
SUCCESS, NO_OP, FAILURE = 1, 2, 3

_TAG = 0xFFFFFFFF


def answer_tag(kind: int, value: int) -> int:
    """An answer's 32-bit tag: the low 32 bits of ``value`` (the answer digest's low 64 bits,
    or the error signature; 0 for the empty answer) with ``kind`` in the 2 low bits."""
    return (value & _TAG & ~3) | kind


def stands_down(keys: Sequence[int], flags: Sequence[int], threshold: int,
                repeat_on: bool, cycle_max_period: int) -> bool:
    """The last ``threshold`` calls (of ``keys`` / ``flags``, the call ring, oldest first) are
    one repeat run (when the repeat detector is on) or a clean 2..``cycle_max_period`` cycle
    whose block is not one run (the cycle detector's; ``cycle_max_period`` 0 when it is off)."""
    n = min(len(keys), threshold)
    if n < 2:
        return False
    keys = list(keys)[-n:]
    if repeat_on and one_run(flags, n):
        return True
    for p in range(2, cycle_max_period + 1):
        if p >= n:
            break
        if all(keys[i] == keys[i - p] for i in range(p, n)) and not one_run(flags, p):
            return True
    return False


def texts(wd: EngineView, name: str, detail: Any) -> tuple[str, str, int]:
    n = wd.recycled_run
    shells = wd.settings.shell_tools
    recent = [tool_label(tool_identity(*wd.recent_call(age), shells))
              for age in range(min(n, wd.calls_held) - 1, -1, -1)]  # the calls still held
    tools = ", ".join(dict.fromkeys(recent)) or "calls taken back since"
    window = wd.settings.recycled_window
    reason = (
        f"The last {n} calls ({tools}) each repeated a call made among the last {window} "
        "calls, with the same arguments, and got the same answer that call got before: a loop "
        "longer than a simple cycle, with nothing new going in or coming out."
    )
    guidance = (
        f"Your last {n} tool calls ({tools}) each repeated an earlier call with the same "
        "arguments and got exactly the answer it got the first time: you are going round in a "
        "circle, and no new information is coming in. Do not repeat these calls. Use what they "
        "already told you, try something different, or stop calling tools and say what you are "
        "stuck on."
    )
    return reason, guidance, n


def resolve(value: Callable[[str], Any], resolved: Mapping[str, Any]) -> dict[str, Any]:
    return {"recycled_threshold": value("threshold"), "recycled_window": value("window")}


SPEC = SignalSpec(
    "recycled-calls", CRITICAL, SESSION,
    "calls in a row that each repeat a recent call and get the answer it got before",
    (
        threshold(8, "calls in a row each repeating a recent call with its earlier answer",
                  "more than one lap of the 6- and 7-call cycles real runs repeated until "
                  "their limit, and density's 8; a sweep that re-reads a file or two between "
                  "new calls breaks the run long before 8"),
        Knob("window", MAX_WINDOW, "answered calls a repeat is looked for among", minimum=2,
             maximum=MAX_WINDOW, clamps=False,
             why="four laps of the 14-call cycles seen in real runs; 64 entries of 8 bytes are "
                 "512 native bytes per session"),
    ),
    texts, resolve, per_tool=PER_TOOL_OFF,
)


class RecycledCallsDetector:
    """The run of results each answering a repeated call with its earlier answer (the module
    docstring's decisions); the stand-down is the engine's (it reads the call ring)."""

    def __init__(self, threshold: int, window: int):
        self.threshold = threshold
        self.window = window
        self.reset()

    def reset(self) -> None:
        self.pending: deque[tuple[int, int]] = deque()  # (tool tag, key tag), oldest first
        self.answered: deque[tuple[int, int]] = deque(maxlen=self.window)  # (key, answer)
        self.run = 0
        self.tripped = False

    def push_call(self, tool_hash: int, key: int) -> None:
        """A call (the call path's only work: two tags into the pending calls)."""
        if len(self.pending) == PENDING:
            self.pending.popleft()  # the oldest is forgotten
        self.pending.append((tool_hash & _TAG, key & _TAG))

    def retract(self, calls: int) -> None:
        """The last ``calls`` calls are taken back: the newest pending calls go."""
        for _ in range(min(calls, len(self.pending))):
            self.pending.pop()

    def take(self, tool_hash: int) -> int | None:
        """The key tag of the oldest pending call of a result's tool, now answered; None when
        the tool has no pending call."""
        tool = tool_hash & _TAG
        for i, (t, key) in enumerate(self.pending):
            if t == tool:
                del self.pending[i]
                return key
        return None

    def observe(self, key: int, answer: int) -> bool:
        """The answered call's key tag and its answer's tag; True when the run reaches the
        threshold for the first time (before the stand-down)."""
        previous = next((a for k, a in reversed(self.answered) if k == key), None)
        self.answered.append((key, answer))
        if previous is not None and previous == answer:
            self.run += 1
            if self.run >= self.threshold and not self.tripped:
                self.tripped = True
                return True
            return False
        self.run = 0
        self.tripped = False
        return False
