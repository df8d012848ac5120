"""repeated-failure: failed results of one tool carrying one error signature, with no
successful result between them (SPEC §7.3). Native twin: ``native/repeated_failure.*``.

The signature is the error text through the answer scanner (``tripwire.identity.answer``,
SPEC §12.1) in its *signature* mode, hashed (XXH3-64), so the same failure reported at another
time, under another temporary directory or by another process is one signature, and the call's
spelling does not matter (results carry no args). One scanner serves results and errors:

1. the *volatile spans* of an answer are replaced (durations, timestamps, ``0x``/UUID/long hex
   ids, PIDs, a shell's line counter, temporary path components, configured JSON members);
2. *numbers and hex ids* — every remaining word (a run of ASCII letters and digits) made only of
   hex digits and holding a decimal digit (``42``, ``7f3a9c``), or ``0x`` and hex digits,
   becomes ``#``; in any other word each run of digits becomes ``#`` (``py3`` -> ``py#``);
3. *versions, line:column, dates* — a number directly after ``#`` and one of ``.:-/`` joins it
   (``v1.2.3`` -> ``v#.#``, ``a.py:12:5`` -> ``a.py:#``, ``2026-12-03`` -> ``#``);
4. *layout* — every run of whitespace becomes one space; leading and trailing whitespace goes.

Bytes outside ASCII are kept as they are. The error's bytes are its text as UTF-8 (a structured
error: its compact JSON; ``error=True``: no text, one signature for all such failures of a tool).

Decisions (SPEC §7.3 leaves them open):

- *No successful mutation between* is read as: no productive result (a success that is not a
  no-op) of any non-exempt tool since. tripwire cannot tell a read from a write, so any
  productive success may have changed something and clears the memory (and re-arms); a no-op is
  the tool saying nothing changed, so it neither counts nor clears; results of exempt tools
  (``wait_and_verify``) neither count nor clear.
- *Alternating errors*: the count is per (tool, signature), not a run, since SPEC's condition is
  "3 failed results of the same tool with the same signature, no success between". Errors A, B,
  A, B, A of one tool trip at the fifth result (A's third); B's third, the sixth, trips once more
  (another error, another pattern). Each (tool, signature) alerts once until a productive success
  re-arms it. The memory holds the 8 most recently failed pairs (the least recently failed is
  forgotten), a fixed 8 * 24 native bytes.
- It fires alongside ``tool-failure-streak`` when both trip at one result: the streak says
  nothing has been verified, this says the same error came back with nothing changed; the
  supervisor (SPEC §7.4) takes either as a trigger.
- Promotion: ``severity = "critical"`` makes it a turn-scoped critical alert (under ``enforce`` it
  cuts the turn; three turns in a row cut by it halt the session, as for any turn-scoped cut).
- The memory is session-lived (a turn boundary does not clear it, like the failure streak);
  a reset clears it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..base.alert import WARN
from ..base.inputs import json_text
from ..identity.answer import ALL_CLASSES, signature
from ..identity.canonical import xxh3_64
from ._spec import Knob, SignalSpec, error_text, threshold, tool_label
from .tool_rules import PER_TOOL_THRESHOLD

if TYPE_CHECKING:
    from .view import EngineView

__all__ = ["SPEC", "MEMORY", "error_bytes", "error_signature", "signature_key", "pair_key",
           "RepeatedFailureDetector"]

#: (tool, signature) pairs remembered since the last productive success (native: kMemory).
MEMORY = 8


def error_bytes(error: Any) -> bytes:
    """The bytes an error's signature is read from: its text as UTF-8, a structured error's
    compact JSON, nothing for ``True``."""
    if error is True:
        return b""
    if isinstance(error, str):
        return error.encode("utf-8", "surrogatepass")
    if isinstance(error, (bytes, bytearray, memoryview)):
        return bytes(error)
    return json_text(error).encode("utf-8", "surrogatepass")


def error_signature(data: bytes, classes: int = ALL_CLASSES, keys: Iterable[bytes] = ()
                    ) -> bytes:
    """The error text in the answer scanner's signature mode (the module docstring's rules 1-4);
    ``signature_key`` hashes it. Native: ``answer.h`` ``error_signature_key``."""
    return signature(data, classes, keys)


def pair_key(tool_hash: int, signature: int) -> int:
    """The one 64-bit key of a (tool, signature) pair, as the native detector keys it:
    ``tool_hash`` is ``hash(tool name)`` (the bindings' name hash, as an unsigned 64-bit
    integer). Native twin: ``RepeatedFailureDetector::pair_key``."""
    mixed = (((tool_hash & _MASK64) | 1) * 0x9E3779B97F4A7C15) & _MASK64
    return (signature ^ mixed) & _MASK64


_MASK64 = (1 << 64) - 1


def signature_key(error: Any) -> int:
    """The 64-bit signature of a failed result's error (XXH3-64 of ``error_signature``)."""
    return xxh3_64(error_signature(error_bytes(error)))


def texts(wd: EngineView, name: str, error: Any) -> tuple[str, str, int]:
    n = wd.same_error_failures
    tool = tool_label(name)
    quoted = error_text(error)
    reason = (
        f"{tool} failed {n} times with the same error and no successful change in between, "
        f"however the calls were spelled: the agent is retrying an unchanged failure. "
        f"Error: {quoted}"
    )
    guidance = (
        f"{tool} has now failed {n} times with the same error, and nothing changed in between: "
        f"{quoted}. Running it again, even spelled differently, will fail the same way. Find "
        "out why it fails (the environment, a missing dependency, the input) and change that "
        "before you run it again, or say what is blocking you."
    )
    return reason, guidance, n


def resolve(value: Callable[[str], Any], resolved: Mapping[str, Any]) -> dict[str, Any]:
    return {"repeated_failure_threshold": value("threshold")}


SPEC = SignalSpec(
    "repeated-failure", WARN, None,
    "failed results of one tool with one error signature, no success between",
    (
        threshold(3, "failures of one tool with one error signature",
                  "the seed's case: the same test run three times, the same missing-dependency "
                  "error, nothing changed; three matches tool-failure-streak's count"),
        Knob("severity", WARN, "warn, or critical to cut the turn (a turn-scoped critical)",
             maximum=None, kind=str, choices=("warn", "critical"),
             why="warn by default: an unchanged error is strong evidence of a stuck agent but "
                 "a retry can be legitimate (a flaky service); promote where it cannot"),
    ),
    texts, resolve, per_tool=PER_TOOL_THRESHOLD,
)


class RepeatedFailureDetector:
    """Per (tool, signature), the failures since the last productive success; one alert each
    until a productive success clears them (the module docstring's decisions)."""

    def __init__(self, threshold: int):
        self.threshold = threshold
        self.counts: OrderedDict[tuple[str, int], list[int]] = OrderedDict()
        self.last = 0  # the count of the pair that failed last

    def reset(self) -> None:
        self.counts.clear()
        self.last = 0

    def fail(self, name: str, signature: int, threshold: int | None = None) -> bool:
        """One failed result; True when its pair reaches the threshold (``threshold``: its
        tool's own, a per-tool rule) for the first time."""
        if threshold is None:
            threshold = self.threshold
        key = (name, signature)
        entry = self.counts.get(key)
        if entry is None:
            if len(self.counts) >= MEMORY:
                self.counts.popitem(last=False)  # the least recently failed
            entry = self.counts[key] = [0, 0]  # [count, reported]
        else:
            self.counts.move_to_end(key)
        entry[0] += 1
        self.last = entry[0]
        if entry[0] >= threshold and not entry[1]:
            entry[1] = 1
            return True
        return False

    def succeed(self) -> None:
        """A productive success: anything may have changed."""
        if self.counts:
            self.counts.clear()

    @property
    def peak(self) -> int:
        """The highest same-signature count in memory (the statistics mode's quantity)."""
        return max((e[0] for e in self.counts.values()), default=0)
