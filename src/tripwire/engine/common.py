"""What both engine implementations share: resolved settings and input normalization.

Both the native and the reference engine turn observed values into bytes and flags the same
way, through these functions (the native one only for types its fast path does not take), so
they cannot disagree about what an input *is*.
"""

from __future__ import annotations

import enum
import json
from typing import Any, NamedTuple

from ..base.validate import check_no_op, check_text
from ..errors import InvalidEvent

#: Batch ingest rows: (session, kind, *fields), the fields of each kind in order (SPEC §0).
BATCH_KINDS: dict[str, tuple[str, ...]] = {
    "call": ("name", "args", "id"),
    "result": ("name", "payload", "error", "no_op", "id"),
    "text": ("text",),
    "usage": ("model", "input_tokens", "output_tokens", "cost_usd"),
    "turn_start": (),
    "turn_end": (),
    "reset": ("guardrail", "additional_budget_usd"),
}
BATCH_FIELDS = {kind: len(fields) for kind, fields in BATCH_KINDS.items()}

#: Call ids remembered per session for results named by id; a harness that never starts a
#: turn (which forgets them) still stays bounded.
MAX_CALL_IDS = 512


def remember_call_id(ids: dict[Any, str], ident: Any, name: str) -> None:
    """Record a call id's tool name, as ``Guardrails.on_call`` does (inlined there)."""
    if len(ids) >= MAX_CALL_IDS:
        ids.clear()
    ids[ident] = name


# -- the batch boundary: what Fleet hands the batch core per session, and why it stops ---------


class StopReason(enum.IntEnum):
    """Why ``Batch.run()`` returned at row ``i``."""

    END = 0     # every row was observed
    POLICY = 1  # row i was observed and needs policy: a signal fired, a context limit was
    #             crossed, or agent words answer queued notes
    PYTHON = 2  # row i was not observed: Python takes it whole (a usage that trips a ceiling,
    #             changes the model or crosses a context limit; a turn boundary; a reset; a
    #             session the batch does not drive)


class ContextState(NamedTuple):
    """The context guard as the batch core needs it (token counts; ``carried``: estimate
    bytes not yet measured)."""

    measured: int
    carried: int
    compact_at: int
    cut_tokens: int
    pending: bool
    cut: bool
    model: str | None


class CostState(NamedTuple):
    """The cost ceiling as the batch core needs it (nano-dollars; ``baseline`` None until a
    turn starts; ``frozen``: halted or tripped this turn, so no bound is checked)."""

    spent: int
    baseline: int | None
    max_turn: int
    ceiling: int
    frozen: bool


class BatchState(NamedTuple):
    """One session, as ``SessionBatch.state()`` hands it to the batch core. ``engine`` is
    None when the batch must hand every row of the session to Python; ``cost`` is None when
    its usage rows must go to Python (its task charges each one)."""

    engine: Any
    blocked: bool
    context: ContextState | None
    ids: dict[Any, str]
    words_matter: bool
    cost: CostState | None


class BatchChange(NamedTuple):
    """What the batch core changed in a session since the last hand-back: the new spend, a
    context a usage measured (the estimate starts again from it), estimate bytes added."""

    slot: int
    spent: int | None
    measured: int | None
    added: int


class EngineSettings(NamedTuple):
    """Resolved, clamped detector settings (built by ``WatchdogConfig.engine_settings()``)."""

    enabled: int  # bitmask: bit i = the i-th signal of the SPEC §1 table
    repeat_threshold: int
    poll_plateau: int  # SPEC §12.2: a poll's results in a row with one answer that trip it
    cycle_max_period: int
    cycle_cycles: int
    density_window: int
    density_threshold: int
    density_defer_run: int  # <= 0: no run stand-down
    density_defer_cycle_period: int  # < 2: no cycle stand-down
    name_threshold: int
    failure_threshold: int
    no_op_threshold: int
    no_new_state_threshold: int
    silence_threshold: int
    digest_memory: int
    repeated_failure_threshold: int
    answer_volatile: int  # SPEC §12.1: the classes of volatile spans an answer replaces
    recycled_threshold: int
    recycled_window: int
    exempt_tools: frozenset[str]
    shell_tools: frozenset[str] = frozenset()  # SPEC §11.2: identity tool:program
    # SPEC §12.1 [results] ignore_json_keys: for every tool, and per tool (the global ones
    # included), as (tool, keys) pairs sorted by tool
    ignore_json_keys: tuple[str, ...] = ()
    ignore_json_keys_by_tool: tuple[tuple[str, tuple[str, ...]], ...] = ()


def name_str(name: Any) -> str:
    """A tool name as str: None is the unnamed tool, anything else but str is an error."""
    if isinstance(name, str):
        return str(name)
    if name is None:
        return ""
    if isinstance(name, (bytes, bytearray)):
        return bytes(name).decode("utf-8", "replace")
    raise InvalidEvent(f"tool name must be a str, not {type(name).__name__}")


#: Nesting the standard encoder is trusted with; deeper values take the iterative encoder, so a
#: 10,000-level dict is observed like any other call instead of raising RecursionError.
_RECURSIVE_DEPTH = 200


def safe_repr(value: Any) -> str:
    """repr() that cannot raise: an object whose __repr__ fails is named by its type."""
    try:
        return repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__name__}>"


def _to_json(value: Any, *, sort_keys: bool) -> bytes:
    # Values JSON cannot express are rendered with repr() so the call is still observed
    # (the reference bridge does the same with a placeholder); NaN stays NaN, which makes the
    # args non-JSON and so compared as raw bytes.
    if _nests_deeper(value, _RECURSIVE_DEPTH):
        text = _iterative_json(value, sort_keys)
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                              sort_keys=sort_keys, default=safe_repr)
        except (TypeError, ValueError, RecursionError):
            text = safe_repr(value)
    return text.encode("utf-8", "surrogatepass")


def json_text(value: Any) -> str:
    """A decoded value as compact JSON text in the caller's key order (for quoting)."""
    return _to_json(value, sort_keys=False).decode("utf-8", "surrogatepass")


def _nests_deeper(value: Any, limit: int) -> bool:
    """Whether containers nest more than ``limit`` levels (an iterative walk: no recursion)."""
    if not isinstance(value, (dict, list, tuple)):
        return False
    stack = [(value, 1)]
    seen: set[int] = set()
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if id(item) in seen:
            continue
        seen.add(id(item))
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list, tuple)))
    return False


def _scalar_json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=safe_repr)
    except (TypeError, ValueError):
        return json.dumps(safe_repr(value), ensure_ascii=False)


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)
    return safe_repr(key)


def _iterative_json(value: Any, sort_keys: bool) -> str:
    """Compact JSON of any depth with an explicit stack (the shape json.dumps writes); a
    container met again on its own path is written as the string "<circular>"."""
    out: list[str] = []
    on_path: set[int] = set()
    # work items: ("v", value) writes a value; ("s", text) writes text; ("x", id) leaves a path
    work: list[tuple[str, Any]] = [("v", value)]
    while work:
        op, item = work.pop()
        if op == "s":
            out.append(item)
            continue
        if op == "x":
            on_path.discard(item)
            continue
        if isinstance(item, (dict, list, tuple)):
            if id(item) in on_path:
                out.append('"<circular>"')
                continue
            on_path.add(id(item))
            if isinstance(item, dict):
                members = [(_key_text(k), v) for k, v in item.items()]
                if sort_keys:
                    members.sort(key=lambda kv: kv[0])
                pushed: list[tuple[str, Any]] = [("s", "{")]
                for i, (k, v) in enumerate(members):
                    pushed.append(("s", ("," if i else "") + json.dumps(k, ensure_ascii=False)
                                   + ":"))
                    pushed.append(("v", v))
                pushed += [("s", "}"), ("x", id(item))]
            else:
                pushed = [("s", "[")]
                for i, v in enumerate(item):
                    if i:
                        pushed.append(("s", ","))
                    pushed.append(("v", v))
                pushed += [("s", "]"), ("x", id(item))]
            work.extend(reversed(pushed))
        else:
            out.append(_scalar_json(item))
    return "".join(out)


def args_bytes(args: Any) -> bytes:
    """Call args as the bytes to canonicalize.

    ``str`` is encoded as UTF-8 (lone surrogates pass through and make it non-JSON), buffers are
    taken as they are, ``None`` is the empty args, and decoded values (dict, list, numbers) are
    serialized to JSON first.
    """
    if isinstance(args, str):
        return args.encode("utf-8", "surrogatepass")
    if isinstance(args, (bytes, bytearray, memoryview)):
        return bytes(args)
    if args is None:
        return b""
    return _to_json(args, sort_keys=False)


def payload_bytes(payload: Any) -> bytes | None:
    """A tool result's payload as bytes, or None when it has none (it cannot be fingerprinted).

    An empty string is a payload (SPEC §10.7). A decoded JSON value is digested as its compact
    JSON text, keys in their given order (SPEC §10.21), so ``{"b":2,"a":1}`` and the string
    ``'{"b":2,"a":1}'`` are one payload.
    """
    if payload is None:
        return None
    if isinstance(payload, str):
        return payload.encode("utf-8", "surrogatepass")
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    return _to_json(payload, sort_keys=False)


def error_failed(error: Any) -> bool:
    """A result is a failure when its error is true or a non-empty text (or any other truthy
    value, such as a structured error object); False, None and "" are successes."""
    if error is None or error is False:
        return False
    if isinstance(error, str):
        return error != ""
    try:
        return bool(error)
    except Exception:
        return True


def text_has_words(text: Any) -> bool:
    """Agent text counts when it holds a non-whitespace character (SPEC §10.11); it must be
    a str (``validate.check_text``)."""
    if type(text) is not str:
        text = check_text(text)
    return bool(text) and not text.isspace()


def no_op_flag(no_op: Any, failed: bool) -> bool:
    """A result is a no-op when it says ``no_op: True`` and did not fail (SPEC §10.7); the
    claim must be a bool (``validate.check_no_op``)."""
    if no_op is not True and no_op is not False:
        no_op = check_no_op(no_op)
    return no_op and not failed


# -- shell-tool identity (SPEC §11.2) -------------------------------------------------------------
# The python twin of native/shell.cpp, over the same args bytes, byte for byte.

#: tools whose identity for the name-level signals is ``tool:program``
SHELL_TOOLS = ("bash", "Bash", "shell", "sh", "terminal", "run_command", "execute_command",
               "exec_command", "run_shell_command", "local_shell")
_COMMAND_KEYS = (b"command", b"cmd", b"script")
_WS = b" \t\n\r"
_ENDS_WORD = frozenset(b" \t\n\r;&|<>()`")
_ESCAPES = {ord('"'): b'"', ord("\\"): b"\\", ord("/"): b"/", ord("b"): b"\b",
            ord("f"): b"\f", ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t"}


class _Malformed(Exception):
    pass


def _json_string(s: bytes, i: int) -> tuple[bytes, int]:
    """At ``s[i] == '"'``: the decoded bytes (UTF-8; lone surrogates as their 3 bytes) and the
    index past the closing quote."""
    out = bytearray()
    i += 1
    n = len(s)
    while i < n:
        c = s[i]
        i += 1
        if c == 0x22:
            return bytes(out), i
        if c != 0x5C:
            out.append(c)
            continue
        if i >= n:
            break
        e = s[i]
        i += 1
        if e == 0x75:  # \uXXXX
            cp = _hex4(s, i)
            i += 4
            if 0xD800 <= cp < 0xDC00 and s[i:i + 2] == b"\\u":
                try:
                    lo = _hex4(s, i + 2)
                except _Malformed:
                    lo = -1
                if 0xDC00 <= lo < 0xE000:
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                    i += 6
            out += chr(cp).encode("utf-8", "surrogatepass")
        elif e in _ESCAPES:
            out += _ESCAPES[e]
        else:
            break
    raise _Malformed


def _hex4(s: bytes, i: int) -> int:
    digits = s[i:i + 4]
    if len(digits) != 4 or not all(chr(d) in "0123456789abcdefABCDEF" for d in digits):
        raise _Malformed
    return int(digits, 16)


def _skip_ws(s: bytes, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


def _skip_value(s: bytes, i: int) -> int:
    i = _skip_ws(s, i)
    if i >= len(s):
        raise _Malformed
    if s[i] == 0x22:
        return _json_string(s, i)[1]
    if s[i] in b"{[":
        depth = 0
        while i < len(s):
            d = s[i]
            if d == 0x22:
                i = _json_string(s, i)[1]
                continue
            i += 1
            if d in b"{[":
                depth += 1
            elif d in b"}]":
                depth -= 1
                if depth == 0:
                    return i
        raise _Malformed
    start = i
    while i < len(s) and s[i] not in b",}]" and s[i] not in _WS:
        i += 1
    if i == start:
        raise _Malformed
    return i


def _json_strings(s: bytes, i: int) -> list[bytes]:
    """At ``s[i] == '['``: the elements, if every one is a string."""
    out: list[bytes] = []
    i = _skip_ws(s, i + 1)
    if s[i:i + 1] == b"]":
        return out
    while True:
        i = _skip_ws(s, i)
        if s[i:i + 1] != b'"':
            raise _Malformed
        value, i = _json_string(s, i)
        out.append(value)
        i = _skip_ws(s, i)
        if s[i:i + 1] == b",":
            i += 1
        elif s[i:i + 1] == b"]":
            return out
        else:
            raise _Malformed


def _argv_text(argv: list[bytes]) -> bytes:
    """``["bash", "-lc", SCRIPT]`` is SCRIPT; any other argv is its words joined by spaces."""
    if len(argv) >= 3:
        shell = argv[0].rsplit(b"/", 1)[-1]
        flag = argv[1]
        if shell in (b"bash", b"sh", b"zsh") and len(flag) >= 2 and flag[:1] == b"-" \
                and flag[-1:] == b"c":
            return argv[2]
    return b" ".join(argv)


def _command_text(s: bytes) -> bytes | None:
    i = _skip_ws(s, 0)
    if i >= len(s):
        return None
    first = s[i]
    if first == 0x22:
        return _json_string(s, i)[0]
    if first == 0x5B:
        return _argv_text(_json_strings(s, i))
    if first != 0x7B:
        return s  # plain text: the whole args
    found: dict[bytes, int] = {}
    i = _skip_ws(s, i + 1)
    if s[i:i + 1] == b"}":
        return None
    while True:
        i = _skip_ws(s, i)
        if s[i:i + 1] != b'"':
            raise _Malformed
        key, i = _json_string(s, i)
        i = _skip_ws(s, i)
        if s[i:i + 1] != b":":
            raise _Malformed
        i = _skip_ws(s, i + 1)
        if key in _COMMAND_KEYS and key not in found:
            found[key] = i
        i = _skip_ws(s, _skip_value(s, i))
        if s[i:i + 1] == b",":
            i += 1
        elif s[i:i + 1] == b"}":
            break
        else:
            raise _Malformed
    for key in _COMMAND_KEYS:
        if key in found:
            at = found[key]
            if s[at] == 0x22:
                return _json_string(s, at)[0]
            if s[at] == 0x5B:
                return _argv_text(_json_strings(s, at))
            return None
    return None


def _is_assignment(word: bytes) -> bool:
    eq = word.find(b"=")
    if eq <= 0:
        return False
    for k, c in enumerate(word[:eq]):
        letter = 65 <= c <= 90 or 97 <= c <= 122 or c == 95
        if not letter and not (k > 0 and 48 <= c <= 57):
            return False
    return True


class _Words:
    def __init__(self, text: bytes):
        self.t = text
        self.i = 0

    def ws(self) -> None:
        while self.i < len(self.t) and self.t[self.i] in _WS:
            self.i += 1

    def word(self) -> bytes:
        self.ws()
        start = self.i
        while self.i < len(self.t) and self.t[self.i] not in _ENDS_WORD:
            self.i += 1
        return self.t[start:self.i]

    def flags(self) -> None:
        while True:
            back = self.i
            w = self.word()
            if not w or w[:1] != b"-":
                self.i = back
                return


def shell_program(args: Any) -> bytes:
    """The program word of a shell tool's call args (b"" when there is none): the command under
    ``command``, ``cmd`` or ``script`` (a string, or an argv array where ``["bash", "-lc",
    SCRIPT]`` is SCRIPT), a JSON string, or the whole args when they are plain text; leading
    ``cd DIR &&`` / ``cd DIR;`` steps, ``VAR=value`` assignments and ``sudo``/``env``/
    ``timeout N``/``time`` wrappers skipped."""
    try:
        text = _command_text(args_bytes(args))
    except (_Malformed, IndexError):
        return b""
    if text is None:
        return b""
    words = _Words(text)
    while True:
        word = words.word()
        if not word:
            return b""
        if word == b"cd":
            words.word()  # the directory
            words.ws()
            t, i = words.t, words.i
            if t[i:i + 2] == b"&&":
                words.i += 2
                continue
            if t[i:i + 1] == b";":
                words.i += 1
                continue
            return word
        if _is_assignment(word):
            continue
        if word in (b"sudo", b"env", b"time"):
            words.flags()
            continue
        if word == b"timeout":
            words.flags()
            words.word()  # the duration
            continue
        return word


def tool_identity(name: str, args: Any, shell_tools: frozenset[str]) -> str:
    """The identity the name-level signals use: ``tool:program`` for a shell tool whose command
    has a program word, else the tool name."""
    if name in shell_tools:
        program = shell_program(args)
        if program:
            return name + ":" + program.decode("utf-8", "surrogateescape")
    return name
