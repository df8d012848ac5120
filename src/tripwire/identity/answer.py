"""The answer of a tool result (SPEC §12.1): the reference of ``native/answer.*``.

Real tool output carries parts that change on every call and mean nothing (``1 failed in
0.53s``, a PID, ``<Foo object at 0x7f3a...>``, ``/tmp/tmpab12cd/out.log``, a timestamp, a
request id). Every comparison of results uses the result's *answer*: the payload with those
spans replaced by one placeholder byte, hashed (XXH3-128). ``scan`` is the one scanner, in two
modes:

- *answer* (the default): the volatile spans below are replaced, everything else is kept byte
  for byte (small integers stay: ``3 of 6`` and ``4 of 6`` are different answers). When no span
  is found the payload is its own scan (``scan`` returns None), so a clean payload's answer is
  the digest of its bytes, as before answers existed;
- *signature* (``repeated-failure``'s error signature, SPEC §7.3): the same spans, and then
  every remaining number too, become ``#`` (a number or span right after ``#`` and one of
  ``.:-/`` joins it: ``a.py:12:5`` -> ``a.py:#``), and whitespace runs collapse to one space,
  leading and trailing whitespace dropped.

One pass, left to right: the scan jumps to the next byte that can start or anchor a span (a
digit, ``/``, ``\\``, and ``"`` when JSON keys are configured; whitespace too in signature
mode) and looks back and forward from there. The classes (``volatile``, all on by default):

``durations``
    a number (digits, optionally ``.digits``, optionally signed) followed, directly or after one
    space, by ``ns us µs ms s sec secs second seconds min h`` ending at a word boundary, or a
    compound of two or more number+unit parts with units ``h m s ms us µs ns`` (``1m30s``):
    ``0.53s`` and ``12 ms`` go, ``2 steps`` and ``5m`` stay;
``timestamps``
    ISO-8601 / RFC-3339 date-times (``2026-12-04T10:22:31.123Z``, ``2026-12-04 10:22:31,123``,
    seconds, fraction and zone optional), times ``H:MM:SS`` / ``HH:MM:SS`` with an optional
    fraction, and epoch numbers of plausible dates (10 digits from 1500000000 to 1999999999, or
    13 digits for milliseconds, with an optional ``.digits`` fraction);
``hex``
    ``0x`` and 4 or more hex digits; UUIDs (8-4-4-4-12 hex digits); a word of 12 or more hex
    digits holding both a digit and a letter (hashes, request ids);
``pids``
    the digits after ``pid``, ``PID`` or ``process`` and an optional ``=`` or ``:`` (spaces
    around it allowed);
``line_counters``
    a persistent shell's line counter: the N of ``bash: line N:`` (``/bin/bash: line N:``),
    ``sh: N:`` and ``zsh:N:``;
``temp_paths``
    the path component after ``/tmp/``, ``/var/tmp/``, ``/var/folders/X/Y/T/`` (each also
    under ``/private``) or ``\\Temp\\`` (``TEMP``, ``temp``; doubled backslashes as in JSON
    text allowed), up to the next ``/``, ``\\``, whitespace or one of ``"'`()[]{}<>,;:``; the
    prefix must start a token (the byte before it is none of letters, digits, ``_.~-/``).

``duration_keys``
    in JSON, a number (optionally signed, optionally ``.digits``) that is the value of a member
    whose key names a duration: one of the key's words (split at ``_``, ``-``, any other byte
    that is no letter or digit, and where a lowercase letter meets an uppercase one; compared
    in lowercase) is ``duration durations elapsed latency took runtime uptime timing timings
    time walltime``, or its last word is a unit ``ms msec msecs millis us usec micros ns nanos
    sec secs seconds`` (``"durationMs": 101``, ``"elapsed": 0.4``, ``"took_ms": 12``,
    ``"timeout_seconds": 30``; ``"items": 3`` and ``"times": 3`` stay);
``id_counters``
    in JSON, a counter-like id that is the whole string value of a member whose key's last word
    is ``id`` (``"id"``, ``"session_id"``, ``"runId"``): 1 to 16 ASCII letters, ``-`` or ``_``,
    digits (``"sess-7"``, ``"run_12"``, ``"om_3"``); the digits are replaced. The same words in
    prose (``test_12``, ``page-3``) and bare numbers (``"id": 17``) stay: they name things.

Both JSON classes read keys as written between unescaped quotes (JSON inside a JSON string,
with ``\"`` quotes, is not read), at most 64 bytes long.

Host-configured JSON keys (``[results] ignore_json_keys``): in a JSON payload, or JSON inside
text, the value of a member whose key (the bytes between the quotes, as written) is one of them
is replaced, whatever it is (string, number, literal, object or array).

Word boundaries: a *word* is a run of ASCII letters and digits. A span must not follow a
letter or digit, and must not be followed by a letter, a digit or ``_`` (``5 min_time`` is no
duration, ``req_7f3a...`` is a hex id). The letter of a JSON escape (``\\n``, ``\\t``,
``\\r``) is a boundary too, so a line that starts with a timestamp inside JSON text is still
recognized.

Matches are tried at each anchor in this order: date-time, time, ``0x``, UUID, hex word,
epoch, duration, pid, line counter, duration key, id counter; the first wins. A span never
starts inside an earlier one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import xxhash

from ..base.inputs import payload_bytes
from ..errors import ConfigError

__all__ = [
    "PLACEHOLDER", "CLASSES", "ALL_CLASSES", "DURATIONS", "TIMESTAMPS", "HEX", "PIDS",
    "LINE_COUNTERS", "TEMP_PATHS", "DURATION_KEYS", "ID_COUNTERS", "scan", "is_empty",
    "answer_digest", "payload_answer", "signature",
    "ResultsConfig",
]

#: What a volatile span becomes: the ASCII "substitute" control byte, which tool output does
#: not contain in practice (a payload holding it where another holds a span would compare equal).
PLACEHOLDER = b"\x1a"

DURATIONS = 1 << 0
TIMESTAMPS = 1 << 1
HEX = 1 << 2
PIDS = 1 << 3
LINE_COUNTERS = 1 << 4
TEMP_PATHS = 1 << 5
DURATION_KEYS = 1 << 6
ID_COUNTERS = 1 << 7
#: ``[results] volatile`` names, in bit order (native: answer.h ``AnswerClass``).
CLASSES: dict[str, int] = {
    "durations": DURATIONS, "timestamps": TIMESTAMPS, "hex": HEX, "pids": PIDS,
    "line_counters": LINE_COUNTERS, "temp_paths": TEMP_PATHS,
    "duration_keys": DURATION_KEYS, "id_counters": ID_COUNTERS,
}
ALL_CLASSES = (1 << len(CLASSES)) - 1

# -- byte classes ----------------------------------------------------------------------------

_DIGIT = frozenset(b"0123456789")
_ALPHA = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_ALNUM = _DIGIT | _ALPHA
_HEX = frozenset(b"0123456789abcdefABCDEF")
#: whitespace: Python's str.isspace on ASCII (SPEC §10.17), U+001C..U+001F included
_SPACE = frozenset(b" \t\n\v\f\r\x1c\x1d\x1e\x1f")
#: bytes that continue a name: a temporary-path prefix after one of them does not start a token
_NAME = _ALNUM | frozenset(b"_.~-/")
#: where a temporary path's component ends
_COMPONENT_END = _SPACE | frozenset(b"/\\\"'`()[]{}<>,;:")
#: where a JSON scalar value ends
_SCALAR_END = _SPACE | frozenset(b",}]")
#: signature mode: a number right after "#" and one of these joins it (2026-12-03 -> #)
_JOINERS = frozenset(b".:-/")

_TEMP_PREFIXES = (b"/tmp/", b"/var/tmp/", b"/private/tmp/", b"/private/var/tmp/")
_FOLDERS = (b"/var/folders/", b"/private/var/folders/")  # then X/Y/T/
_WINDOWS_TEMP = (b"Temp\\", b"TEMP\\", b"temp\\")

_MICRO = (b"\xc2\xb5s", b"\xce\xbcs")  # µs (U+00B5) and μs (U+03BC), then "s"
_UNITS = frozenset({b"ns", b"us", b"ms", b"s", b"sec", b"secs", b"second", b"seconds", b"min",
                    b"h"})
_COMPOUND_UNITS = frozenset({b"h", b"m", b"s", b"ms", b"us", b"ns"})

# the anchors, found with re in this twin (the native scanner skips with a table and SSE2)
_ANCHOR = re.compile(rb"[0-9/\\]")
_ANCHOR_KEYS = re.compile(rb'[0-9/\\"]')
_ANCHOR_SIGNATURE = re.compile(rb"[0-9/\\ \t\n\v\f\r\x1c-\x1f]")
_ANCHOR_SIGNATURE_KEYS = re.compile(rb'[0-9/\\" \t\n\v\f\r\x1c-\x1f]')

#: duration_keys: a key naming a duration has one of these words, or ends in a unit word
_DURATION_WORDS = frozenset({b"duration", b"durations", b"elapsed", b"latency", b"took",
                             b"runtime", b"uptime", b"timing", b"timings", b"time",
                             b"walltime"})
_UNIT_WORDS = frozenset({b"ms", b"msec", b"msecs", b"millis", b"us", b"usec", b"micros", b"ns",
                         b"nanos", b"sec", b"secs", b"seconds"})
_UPPER = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_LOWER = frozenset(b"abcdefghijklmnopqrstuvwxyz")
#: the longest JSON key the two JSON classes read
_KEY_LIMIT = 64
#: id_counters: the longest letter prefix of a counter-like id
_PREFIX_LIMIT = 16

_UUID_GROUP_STARTS = (0, 9, 14, 19, 24)  # where each 8-4-4-4-12 group starts
_UUID_GROUPS = {8: (0,), 4: (1, 2, 3), 12: (4,)}  # a word's length -> the groups it can be


def _escape_letter(s: bytes, k: int) -> bool:
    """s[k-1] is the letter of a JSON escape (``\\n``, ``\\t``, ``\\r``): a word boundary."""
    return k >= 2 and s[k - 1] in b"ntr" and s[k - 2] == 0x5C


def _boundary_before(s: bytes, k: int) -> bool:
    return k == 0 or s[k - 1] not in _ALNUM or _escape_letter(s, k)


def _boundary_after(s: bytes, k: int) -> bool:
    """Nothing continues a word or an identifier at k (``5 min_time`` is no duration)."""
    return k >= len(s) or (s[k] not in _ALNUM and s[k] != 0x5F)


def _digits_end(s: bytes, k: int) -> int:
    n = len(s)
    while k < n and s[k] in _DIGIT:
        k += 1
    return k


def _two_digits(s: bytes, k: int) -> bool:
    return k + 1 < len(s) and s[k] in _DIGIT and s[k + 1] in _DIGIT


def _fraction_end(s: bytes, k: int, marks: bytes = b".") -> int:
    """After an optional fraction (a mark, then digits) at k."""
    if k + 1 < len(s) and s[k] in marks and s[k + 1] in _DIGIT:
        return _digits_end(s, k + 1)
    return k


# -- the matchers: each returns the span's end, or -1 -----------------------------------------


def _date_time(s: bytes, i: int) -> int:
    """At a 4-digit word followed by '-': YYYY-MM-DD[Tt ]HH:MM[:SS][.,frac][zone]."""
    n = len(s)
    k = i + 4
    if not (k + 6 <= n and s[k] == 0x2D and _two_digits(s, k + 1) and s[k + 3] == 0x2D
            and _two_digits(s, k + 4)):
        return -1
    k += 6
    if not (k < n and s[k] in b"Tt "):
        return -1
    k += 1
    if not (_two_digits(s, k) and k + 2 < n and s[k + 2] == 0x3A and _two_digits(s, k + 3)):
        return -1
    k += 5
    if k < n and s[k] == 0x3A and _two_digits(s, k + 1):
        k += 3
    k = _fraction_end(s, k, b".,")
    if k < n and s[k] in b"Zz":
        k += 1
    elif k < n and s[k] in b"+-" and _two_digits(s, k + 1):
        k += 3
        if k < n and s[k] == 0x3A and _two_digits(s, k + 1):
            k += 3
        elif _two_digits(s, k):
            k += 2
    return k if _boundary_after(s, k) else -1


def _time(s: bytes, i: int, j: int) -> int:
    """At a 1-2 digit word followed by ':': H:MM:SS or HH:MM:SS[.,frac]."""
    n = len(s)
    if not (j - i <= 2 and j + 5 < n and s[j] == 0x3A and _two_digits(s, j + 1)
            and s[j + 3] == 0x3A and _two_digits(s, j + 4)):
        return -1
    k = _fraction_end(s, j + 6, b".,")
    return k if _boundary_after(s, k) else -1


def _uuid_at(s: bytes, start: int) -> bool:
    if start < 0 or start + 36 > len(s) or not _boundary_before(s, start) \
            or not _boundary_after(s, start + 36):
        return False
    for k in range(36):
        c = s[start + k]
        if k in (8, 13, 18, 23):
            if c != 0x2D:
                return False
        elif c not in _HEX:
            return False
    return True


def _unit(s: bytes, k: int) -> tuple[int, bytes] | None:
    """The unit word at k: (its end, its spelling; µs and μs as b"us"), or None."""
    if s.startswith(_MICRO, k):
        return k + 3, b"us"
    t = k
    n = len(s)
    while t < n and s[t] in _ALPHA:
        t += 1
    return (t, s[k:t]) if t > k else None


def _duration(s: bytes, j: int) -> int:
    """After a number whose digits end at j: the end of its unit, or -1."""
    n = len(s)
    k = _fraction_end(s, j)
    if k < n and s[k] == 0x20:  # one space, then a single unit
        unit = _unit(s, k + 1)
        if unit is not None and unit[1] in _UNITS and _boundary_after(s, unit[0]):
            return unit[0]
        return -1
    parts = 1
    while True:
        unit = _unit(s, k)
        if unit is None:
            return -1
        end, spelling = unit
        if end < n and s[end] in _DIGIT and spelling in _COMPOUND_UNITS:
            k = _fraction_end(s, _digits_end(s, end))  # the next part of a compound
            parts += 1
            continue
        units = _UNITS if parts == 1 else _COMPOUND_UNITS
        return end if spelling in units and _boundary_after(s, end) else -1


def _pid(s: bytes, i: int) -> bool:
    """The digits at i follow pid/PID/process and an optional = or : (spaces around it)."""
    k = i
    while k > 0 and s[k - 1] == 0x20:
        k -= 1
    if k > 0 and s[k - 1] in b"=:":
        k -= 1
        while k > 0 and s[k - 1] == 0x20:
            k -= 1
    for word in (b"pid", b"PID", b"process"):
        start = k - len(word)
        if start >= 0 and s[start:k] == word and _boundary_before(s, start):
            return True
    return False


def _line_counter(s: bytes, i: int, j: int) -> bool:
    """The digits i..j are N of ``bash: line N:``, ``sh: N:`` or ``zsh:N:``."""
    if not (j < len(s) and s[j] == 0x3A):
        return False
    for prefix in (b"bash: line ", b"sh: ", b"zsh:"):
        start = i - len(prefix)
        if start >= 0 and s[start:i] == prefix and _boundary_before(s, start):
            return True
    return False


def _temp_component(s: bytes, i: int) -> tuple[int, int] | None:
    """At '/' or '\\': the temporary component's span, or None."""
    n = len(s)
    if s[i] == 0x5C:  # ...\Temp\ (%TEMP% on Windows), also as JSON text (\\Temp\\)
        if not any(s.startswith(p, i + 1) for p in _WINDOWS_TEMP):
            return None
        p = i + 6
        while p < n and s[p] == 0x5C:
            p += 1
    else:
        if i > 0 and s[i - 1] in _NAME and not _escape_letter(s, i):
            return None  # not the start of a token: /home/u/tmp/x
        for prefix in _TEMP_PREFIXES:
            if s.startswith(prefix, i):
                p = i + len(prefix)
                break
        else:
            for prefix in _FOLDERS:
                if s.startswith(prefix, i):
                    p = i + len(prefix)
                    break
            else:
                return None
            for _ in range(2):  # /var/folders/X/Y/T/: two components, then T
                q = p
                while q < n and s[q] not in _COMPONENT_END:
                    q += 1
                if q == p or q >= n or s[q] != 0x2F:
                    return None
                p = q + 1
            if not s.startswith(b"T/", p):
                return None
            p += 2
    q = p
    while q < n and s[q] not in _COMPONENT_END:
        q += 1
    return (p, q) if q > p else None


def _json_string_end(s: bytes, k: int) -> int:
    """k: just after an opening quote; the index of the closing quote, or -1."""
    n = len(s)
    while k < n:
        c = s[k]
        if c == 0x5C:
            k += 2
        elif c == 0x22:
            return k
        else:
            k += 1
    return -1


def _json_value_end(s: bytes, v: int) -> int:
    """The end of the JSON value at v, or -1 (nothing there, or unterminated)."""
    n = len(s)
    if v >= n:
        return -1
    c = s[v]
    if c == 0x22:
        end = _json_string_end(s, v + 1)
        return end + 1 if end >= 0 else -1
    if c in b"{[":
        depth = 0
        k = v
        while k < n:
            c = s[k]
            if c == 0x22:
                end = _json_string_end(s, k + 1)
                if end < 0:
                    return -1
                k = end
            elif c in b"{[":
                depth += 1
            elif c in b"}]":
                depth -= 1
                if depth == 0:
                    return k + 1
            k += 1
        return -1
    k = v
    while k < n and s[k] not in _SCALAR_END:
        k += 1
    return k if k > v else -1


def _json_member_value(s: bytes, i: int, keys: frozenset[bytes]) -> tuple[int, int] | None:
    """At '"': when it opens a member key that is one of ``keys``, the value's span."""
    if i > 0 and s[i - 1] == 0x5C:
        return None  # an escaped quote inside a string
    end = _json_string_end(s, i + 1)
    if end < 0 or s[i + 1:end] not in keys:
        return None
    n = len(s)
    m = end + 1
    while m < n and s[m] in _SPACE:
        m += 1
    if m >= n or s[m] != 0x3A:
        return None
    m += 1
    while m < n and s[m] in _SPACE:
        m += 1
    value_end = _json_value_end(s, m)
    return (m, value_end) if value_end > m else None


def _key_words(key: bytes) -> list[bytes]:
    """A JSON key's words, lowercase: split at every byte that is no letter or digit, and where
    a lowercase letter meets an uppercase one (``durationMs`` -> duration, ms)."""
    words: list[bytes] = []
    word = bytearray()
    prev = 0
    for c in key:
        if c in _ALNUM:
            if word and c in _UPPER and prev in _LOWER:
                words.append(bytes(word))
                word.clear()
            word.append(c | 0x20 if c in _UPPER else c)
        elif word:
            words.append(bytes(word))
            word.clear()
        prev = c
    if word:
        words.append(bytes(word))
    return words


def _duration_key(key: bytes) -> bool:
    words = _key_words(key)
    return bool(words) and (words[-1] in _UNIT_WORDS or any(w in _DURATION_WORDS for w in words))


def _id_key(key: bytes) -> bool:
    words = _key_words(key)
    return bool(words) and words[-1] == b"id"


def _member_key(s: bytes, v: int) -> bytes | None:
    """v: where a JSON value starts; the key of the member it is the value of (the bytes
    between unescaped quotes, at most _KEY_LIMIT, no backslash), or None."""
    k = v
    while k > 0 and s[k - 1] in _SPACE:
        k -= 1
    if k == 0 or s[k - 1] != 0x3A:
        return None
    k -= 1
    while k > 0 and s[k - 1] in _SPACE:
        k -= 1
    if k == 0 or s[k - 1] != 0x22 or (k >= 2 and s[k - 2] == 0x5C):
        return None
    close = k - 1
    start = close
    while start > 0 and close - start < _KEY_LIMIT:
        c = s[start - 1]
        if c == 0x22:
            return None if start >= 2 and s[start - 2] == 0x5C else s[start:close]
        if c == 0x5C:
            return None
        start -= 1
    return None


def _json_number_end(s: bytes, j: int) -> int:
    """After a digit run ending at j: the end of the JSON number (an optional fraction), when
    a JSON scalar ends there; else -1."""
    k = _fraction_end(s, j)
    return k if k >= len(s) or s[k] in _SCALAR_END else -1


def _counter_start(s: bytes, i: int) -> int:
    """The digits at i end a counter-like string (letters, '-' or '_', digits) that opens with
    a quote: the index just after that quote, or -1."""
    if i == 0 or s[i - 1] not in b"-_":
        return -1
    k = i - 1
    t = k
    while t > 0 and s[t - 1] in _ALPHA and k - t < _PREFIX_LIMIT:
        t -= 1
    if t == k or t == 0 or s[t - 1] != 0x22 or (t >= 2 and s[t - 2] == 0x5C):
        return -1
    return t


# -- the scan ----------------------------------------------------------------------------------


class _Out:
    """The scanned bytes, built only once a span is found: the input between spans is copied
    in one piece when the next span (or the end) is reached."""

    __slots__ = ("buf", "changed", "emitted", "number_end", "s", "signature")

    def __init__(self, s: bytes, signature: bool):
        self.s = s
        self.signature = signature
        self.buf = bytearray()
        self.emitted = 0  # input before this index is in buf
        self.changed = False
        self.number_end = -1  # signature mode: len(buf) just after the last number written

    def flush(self, upto: int) -> None:
        self.buf += self.s[self.emitted:upto]
        self.emitted = upto

    def replace(self, start: int, end: int, by: bytes = PLACEHOLDER) -> None:
        self.flush(start)
        self.buf += by
        self.emitted = end
        self.changed = True

    def span(self, start: int, end: int) -> None:
        """A volatile span: the placeholder (signature mode: '#', as a number)."""
        if self.signature:
            self.number(start, end)
        else:
            self.replace(start, end)

    def number(self, start: int, end: int) -> None:
        """Signature mode: a number word becomes '#', joining a number just before it."""
        self.flush(start)
        buf = self.buf
        if self.number_end >= 0 and len(buf) == self.number_end + 1 and buf[-1] in _JOINERS:
            del buf[-1]
        else:
            buf.append(0x23)
        self.number_end = len(buf)
        self.emitted = end
        self.changed = True


def _at_digits(s: bytes, i: int, out: _Out, classes: int, signature: bool) -> int:
    """The digit run at i: replace what it anchors; returns where the scan goes on."""
    n = len(s)
    j = _digits_end(s, i)
    w = i  # the word's start (letters and digits)
    while w > 0 and s[w - 1] in _ALNUM and not _escape_letter(s, w):
        w -= 1
    e = j
    while e < n and s[e] in _ALNUM:
        e += 1
    lo = out.emitted
    starts_number = (w == i and _boundary_before(s, i)
                     and not (i >= 2 and s[i - 1] == 0x2E and s[i - 2] in _DIGIT))
    if classes & TIMESTAMPS and starts_number:
        end = -1
        if j - i == 4 and j < n and s[j] == 0x2D:
            end = _date_time(s, i)
        elif j < n and s[j] == 0x3A:
            end = _time(s, i, j)
        if end > 0:
            out.span(i, end)
            return end
    if classes & HEX:
        if (starts_number and s[i] == 0x30 and j == i + 1 and e - j >= 5 and s[j] in b"xX"
                and all(c in _HEX for c in s[j + 1:e]) and _boundary_after(s, e)):
            out.span(i, e)
            return e
        for group in _UUID_GROUPS.get(e - w, ()):
            start = w - _UUID_GROUP_STARTS[group]
            if start >= lo and _uuid_at(s, start):
                out.span(start, start + 36)
                return start + 36
        if e - w >= 12 and w >= lo and _boundary_before(s, w) and _boundary_after(s, e) \
                and all(c in _HEX for c in s[w:e]) and any(c in _ALPHA for c in s[w:e]):
            out.span(w, e)
            return e
    if starts_number:
        if classes & TIMESTAMPS and j - i in (10, 13) and _boundary_after(s, j) \
                and s[i] == 0x31 and s[i + 1] in b"56789":
            end = _fraction_end(s, j)
            if not _boundary_after(s, end):
                end = j
            out.span(i, end)
            return end
        if classes & DURATIONS:
            end = _duration(s, j)
            if end > 0:
                start = i
                if i > lo and s[i - 1] in b"+-" and _boundary_before(s, i - 1):
                    start = i - 1  # the sign
                out.span(start, end)
                return end
        if _boundary_after(s, j) and ((classes & PIDS and _pid(s, i))
                       or (classes & LINE_COUNTERS and _line_counter(s, i, j))):
            out.span(i, j)
            return j
        if classes & DURATION_KEYS and e == j:
            end = _json_number_end(s, j)
            start = i - 1 if i > 0 and s[i - 1] == 0x2D else i  # the sign
            if end > 0 and start >= lo:
                key = _member_key(s, start)
                if key is not None and _duration_key(key):
                    out.span(start, end)
                    return end
        if classes & ID_COUNTERS and e == j and j < n and s[j] == 0x22:
            start = _counter_start(s, i)
            if start >= lo:
                key = _member_key(s, start - 1)
                if key is not None and _id_key(key):
                    out.span(i, j)
                    return j
    if not signature:
        return e  # the rest of the word anchors nothing new
    # signature mode: every remaining number goes
    word = s[w:e]
    is_number = (len(word) > 2 and word[0] == 0x30 and word[1] in b"xX"
                 and all(c in _HEX for c in word[2:])) or all(c in _HEX for c in word)
    if is_number and w >= lo:
        out.number(w, e)
        return e
    out.replace(i, j, b"#")  # a digit run inside another word: py3 -> py#
    return j


def scan(data: bytes, classes: int = ALL_CLASSES, keys: Iterable[bytes] = (),
         signature: bool = False) -> bytes | None:
    """The payload with its volatile spans replaced (the module docstring's rules). Answer
    mode returns None when nothing was replaced (the payload is its own scan); signature mode
    always returns the signature's bytes."""
    s = bytes(data)
    n = len(s)
    key_set = frozenset(keys)
    if signature:
        anchors = _ANCHOR_SIGNATURE_KEYS if key_set else _ANCHOR_SIGNATURE
    else:
        anchors = _ANCHOR_KEYS if key_set else _ANCHOR
    out = _Out(s, signature)
    pos = 0
    while True:
        m = anchors.search(s, pos)
        if m is None:
            break
        i = m.start()
        c = s[i]
        if c in _DIGIT:
            pos = _at_digits(s, i, out, classes, signature)
        elif c in _SPACE:  # signature mode: one space between words, none at the ends
            j = i + 1
            while j < n and s[j] in _SPACE:
                j += 1
            out.flush(i)
            out.replace(i, j, b" " if out.buf and j < n else b"")
            pos = j
        elif c == 0x22:
            span = _json_member_value(s, i, key_set)
            if span is None:
                pos = i + 1
            else:
                out.span(*span)
                pos = span[1]
        else:  # '/' or '\'
            span = _temp_component(s, i) if classes & TEMP_PATHS else None
            if span is None:
                pos = i + 1
            else:
                out.span(*span)
                pos = span[1]
    if not out.changed and not signature:
        return None
    out.flush(n)
    return bytes(out.buf)


def is_empty(data: bytes) -> bool:
    """The payload is empty or only whitespace: the *empty answer*."""
    return all(c in _SPACE for c in data)


def answer_digest(data: bytes, classes: int = ALL_CLASSES, keys: Iterable[bytes] = ()
                  ) -> bytes | None:
    """The 128-bit answer of a payload's bytes, or None for the empty answer."""
    if is_empty(data):
        return None
    scanned = scan(data, classes, keys)
    return xxhash.xxh3_128_digest(data if scanned is None else scanned)


def payload_answer(payload: Any, classes: int = ALL_CLASSES, keys: Iterable[bytes] = ()
                   ) -> bytes | None:
    """The answer of a result's payload (str, bytes, any buffer or a JSON value, as
    ``base.inputs.payload_bytes`` reads it), or None when it has no payload or the empty answer:
    either way there is nothing to compare."""
    data = payload_bytes(payload)
    if data is None:
        return None
    return answer_digest(data, classes, keys)


def signature(data: bytes, classes: int = ALL_CLASSES, keys: Iterable[bytes] = ()) -> bytes:
    """``repeated-failure``'s error signature of an error's bytes (before hashing)."""
    scanned = scan(data, classes, keys, signature=True)
    assert scanned is not None
    return scanned


# -- configuration: [results] ----------------------------------------------------------------


def _names(value: Any, what: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)) \
            or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{what} must be a list of strings, not {value!r}")
    return tuple(dict.fromkeys(value))


@dataclass(frozen=True)
class ResultsConfig:
    """How results are compared (``[results]``, SPEC §12.1).

    ``volatile``: the classes of volatile spans replaced before hashing (all by default; names
    in ``CLASSES``). ``ignore_json_keys``: JSON members whose values are replaced, for every
    tool; ``tools``: more such keys per tool name.
    """

    volatile: tuple[str, ...] = tuple(CLASSES)
    ignore_json_keys: tuple[str, ...] = ()
    tools: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        volatile = _names(self.volatile, "[results] volatile")
        unknown = [v for v in volatile if v not in CLASSES]
        if unknown:
            raise ConfigError(f"[results] volatile: unknown class(es) {', '.join(unknown)} "
                              f"(known: {', '.join(CLASSES)})")
        object.__setattr__(self, "volatile", volatile)
        object.__setattr__(self, "ignore_json_keys",
                           _names(self.ignore_json_keys, "[results] ignore_json_keys"))
        if not isinstance(self.tools, Mapping):
            raise ConfigError("[results.tools] must be a table keyed by tool name")
        object.__setattr__(self, "tools", {
            tool: _names(keys, f"[results.tools.{tool}] ignore_json_keys")
            for tool, keys in self.tools.items()})

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> ResultsConfig:
        """From a config file's ``[results]`` table: ``volatile``, ``ignore_json_keys`` and
        ``[results.tools.<tool>] ignore_json_keys``."""
        if not isinstance(mapping, Mapping):
            raise ConfigError("config section [results] must be a table")
        unknown = sorted(set(mapping) - {"volatile", "ignore_json_keys", "tools"})
        if unknown:
            raise ConfigError(f"unknown [results] setting(s): {', '.join(unknown)} "
                              "(known: volatile, ignore_json_keys, tools)")
        tools = mapping.get("tools", {})
        if not isinstance(tools, Mapping):
            raise ConfigError("[results.tools] must be a table keyed by tool name")
        per_tool: dict[str, tuple[str, ...]] = {}
        for tool, table in tools.items():
            if not isinstance(table, Mapping) or set(table) - {"ignore_json_keys"}:
                raise ConfigError(f"[results.tools.{tool}] takes ignore_json_keys only")
            per_tool[tool] = table.get("ignore_json_keys", ())
        return cls(volatile=mapping.get("volatile", tuple(CLASSES)),
                   ignore_json_keys=mapping.get("ignore_json_keys", ()), tools=per_tool)

    def settings(self) -> dict[str, Any]:
        """Its ``EngineSettings`` fields."""
        mask = 0
        for name in self.volatile:
            mask |= CLASSES[name]
        return {
            "answer_volatile": mask,
            "ignore_json_keys": self.ignore_json_keys,
            "ignore_json_keys_by_tool": tuple(sorted(
                (tool, tuple(dict.fromkeys(self.ignore_json_keys + keys)))
                for tool, keys in self.tools.items())),
        }
