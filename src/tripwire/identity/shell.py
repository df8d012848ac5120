"""A shell tool's identity for the name-level signals (SPEC §11.2): ``tool:program``, the program
being the first word of the command after ``cd DIR &&`` steps, ``VAR=value`` assignments and
``sudo``/``env``/``timeout N``/``time`` wrappers. The Python twin of ``native/shell.cpp``, over the
same args bytes, byte for byte."""

from __future__ import annotations

from typing import Any

from ..base.inputs import args_bytes

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
