"""How a hook fails closed under ``enforce`` (issue 36): an event it cannot decide.

A hook that cannot decide a tool call used to let it run ("fail open"): an internal error, a
``MemoryError`` on a hostile transcript, a payload over ``MAX_STDIN``, a read that never ends.
Each of those an agent can cause, to turn the guard off. So, once the event is known to be a
tool call and the mode is ``enforce`` (the config's, or the command's ``--mode`` when the
config itself cannot be read), such an event is a **denial**: a reason for the model
(``undecided``) and one line for the operator; below ``enforce``, and for every other event
(results, prompts: nothing to deny), it is still no decision and one line.

``Deadline`` bounds an invocation in time: the command arms a timer thread that, when the event
is not decided within ``seconds``, writes the fallback answer itself and ends the process; a
resident server waits for the request's thread as long and answers the fallback in its place.
``top_members`` reads what it can of a payload too large to decode whole: its leading
top-level members (``session_id`` and ``hook_event_name`` come first in every harness's), so
an over-size call is still recognized, and a halt recorded for its session still denies it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Deadline", "top_members", "undecided", "DENIED", "SLACK"]

#: What the operator line of a denied, undecided call says after its reason.
DENIED = "the call is denied: under enforce a call tripwire cannot decide does not run"
#: Seconds an invocation may take past its ``--wait`` (every lock and write of the store is
#: bounded by it) before its deadline answers for it: well under the 10 s the installed block
#: gives the hook with the default 2 s wait.
SLACK = 3.0


def undecided(problem: str, *, store: bool = False) -> str:
    """The reason a model reads for a call tripwire could not decide (``store``: its store
    could not record it)."""
    what = ("tripwire cannot record this tool call (its guardrail store is unavailable: "
            f"{problem}), so it is denied: a call that is not recorded could repeat unseen."
            if store else
            f"tripwire could not decide on this tool call ({problem}), so it is denied: under "
            "enforce a call that is not observed does not run.")
    return (f"[watchdog] {what} Do not retry it now; end your turn with a short summary of "
            "where you are.")


class Deadline:
    """An invocation's last resort. ``configure``: its time and harness, once its options are
    read; ``arm(deny)``: the event is known; ``deny(reason)`` renders its denial (None: it is
    no call under enforce, so no decision is its fallback). ``settle()`` before the decided
    answer is written; ``fire()`` when the time is up: the fallback ``(stdout, stderr)``, or
    None when the answer was settled first."""

    def __init__(self, seconds: float = 5.0, harness: str = "?", empty: str = ""):
        self.seconds = seconds
        self.harness = harness
        self.empty = empty
        self.deny: Callable[[str], tuple[str, str, int]] | None = None
        self._lock = threading.Lock()
        self._state = "running"

    def configure(self, seconds: float, harness: str, empty: str) -> None:
        self.seconds, self.harness, self.empty = seconds, harness, empty

    def arm(self, deny: Callable[[str], tuple[str, str, int]] | None) -> None:
        self.deny = deny

    def answer(self, reason: str) -> tuple[str, str, int]:
        """The fallback answer for ``reason``, ``(stdout, stderr, exit status)``: a denial
        (under enforce, a call: the harness's reply, its stderr before the operator's line),
        else none."""
        prefix = f"tripwire hook {self.harness}: {reason}"
        if self.deny is not None:
            out, said, code = self.deny(reason)
            return out, f"{said}{prefix}; {DENIED}\n", code
        return self.empty, f"{prefix}; no decision\n", 0

    def settle(self) -> bool:
        with self._lock:
            if self._state == "fired":
                return False
            self._state = "settled"
            return True

    def fire(self) -> tuple[str, str, int] | None:
        with self._lock:
            if self._state == "settled":
                return None
            self._state = "fired"
        return self.answer(f"no decision within {self.seconds:g} s")

    def start(self) -> None:
        """The command's timer: at the deadline, the fallback on fds 1 and 2, and exit 0 (the
        thread that is stuck cannot be waited for)."""
        def expire() -> None:
            answer = self.fire()
            if answer is None:
                return
            out, err, code = answer
            for fd, text in ((1, out), (2, err)):
                try:
                    os.write(fd, text.encode("utf-8", "replace"))
                except OSError:
                    pass
            os._exit(code)

        timer = threading.Timer(self.seconds, expire)
        timer.daemon = True
        timer.start()


def top_members(text: str) -> dict[str, Any]:
    """The leading top-level members of the JSON object ``text`` begins, each decoded whole,
    up to the first that does not decode within ``text`` (it is cut short, or too large to
    decode): what can be read of a payload too large to decode whole."""
    from json.decoder import scanstring  # type: ignore[attr-defined]

    decoder = json.JSONDecoder()
    out: dict[str, Any] = {}
    n = len(text)

    def blank(i: int) -> int:
        while i < n and text[i] in " \t\r\n":
            i += 1
        return i

    i = blank(0)
    if text[i:i + 1] != "{":
        return out
    i += 1
    while True:
        i = blank(i)
        if text[i:i + 1] != '"':
            return out
        try:
            key, i = scanstring(text, i + 1)
            i = blank(i)
            if text[i:i + 1] != ":":
                return out
            value, i = decoder.raw_decode(text, blank(i + 1))
        except (ValueError, RecursionError, MemoryError):
            return out
        out[key] = value
        i = blank(i)
        if text[i:i + 1] != ",":
            return out
        i += 1
