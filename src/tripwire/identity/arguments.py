"""The argument mode of the answer scanner: the parts of a call's argument values that change
when the same call is re-run (a query's timestamp or id, a ``sleep``'s duration, a generated
temporary name), replaced by the answer scanner's placeholder so that the call keys of
``identity.canonical`` merge them. Native twin: ``native/answer.cpp`` ``scan_argument``.

It reuses the answer scanner's classes and span rules (``identity.answer``), never its
number-removing signature mode: different line numbers, offsets and pages are progress."""

from __future__ import annotations

import re

from .answer import (
    _ALNUM,
    _COMPONENT_END,
    _DIGIT,
    _FOLDERS,
    _NAME,
    _SPACE,
    _TEMP_PREFIXES,
    HEX,
    TIMESTAMPS,
    _digits_end,
    _escape_letter,
    _Out,
    scan,
)

__all__ = ["QUERY_CLASSES", "TEMP_RANDOM_MIN", "TEMP_RANDOM_MAX", "scan_argument"]

_QUERY_NAME = _ALNUM | frozenset(b"_.-~%[]")  # a query parameter's name: ?_=, &ids[]=
_QUERY_END = _SPACE | frozenset(b"&#\"'`<>;|()\\")  # where its value ends
QUERY_CLASSES = TIMESTAMPS | HEX  # what a query value's spans may be
_SLEEP_GLUED = _ALNUM | frozenset(b"_.-")  # before ``sleep``: another word (time.sleep)
_SLEEP_CONTINUES = _ALNUM | frozenset(b"_.")  # after its number: no duration
#: a generated name's random run (mkstemp, mkdtemp: 8 of [a-z0-9_]; mktemp: 10 of [A-Za-z0-9])
TEMP_RANDOM_MIN, TEMP_RANDOM_MAX = 6, 12
_WORD = _ALNUM | frozenset(b"_")


def _sleep_duration(s: bytes, i: int) -> tuple[int, int] | None:
    """At ``sleep``: the span of its duration (``sleep 7``, ``sleep 0.5``, ``sleep 2m``)."""
    n = len(s)
    if i > 0 and s[i - 1] in _SLEEP_GLUED:
        return None
    k = i + 5
    while k < n and s[k] in b" \t":
        k += 1
    if k == i + 5 or k >= n or s[k] not in _DIGIT:
        return None
    d = _digits_end(s, k)
    if d + 1 < n and s[d] == 0x2E and s[d + 1] in _DIGIT:
        d = _digits_end(s, d + 1)
    if d < n and s[d] in b"smhd":
        d += 1
    if d < n and s[d] in _SLEEP_CONTINUES:
        return None
    return k, d


def _query_value(s: bytes, eq: int) -> tuple[int, int, bytes] | None:
    """At '=' after ``?name`` or ``&name``: the value's span and scan, if it replaced a span."""
    b = eq
    while b > 0 and s[b - 1] in _QUERY_NAME:
        b -= 1
    if b == eq or b == 0 or s[b - 1] not in b"?&":
        return None
    v = e = eq + 1
    while e < len(s) and s[e] not in _QUERY_END:
        e += 1
    scanned = scan(s[v:e], QUERY_CLASSES) if e > v else None
    return None if scanned is None else (v, e, scanned)


def _token_start(s: bytes, k: int) -> bool:
    """A temporary prefix at k starts a token (``/home/u/tmp/x`` is no temporary path)."""
    return k == 0 or s[k - 1] not in _NAME or _escape_letter(s, k)


def _temp_prefix_ends(s: bytes, t: int) -> bool:
    """A ``temp_paths`` prefix ends at t: t starts the first component under it."""
    for prefix in _TEMP_PREFIXES:
        if s.endswith(prefix, 0, t) and _token_start(s, t - len(prefix)):
            return True
    if s.endswith(b"/T/", 0, t):  # /var/folders/X/Y/T/
        k = t - 3
        for _ in range(2):  # Y, then X: non-empty components, each after a '/'
            c = k
            while c > 0 and s[c - 1] not in _COMPONENT_END:
                c -= 1
            if c == k or c == 0 or s[c - 1] != 0x2F:
                return False
            k = c - 1
        k += 1  # just past the '/' before X
        return any(s.endswith(f, 0, k) and _token_start(s, k - len(f)) for f in _FOLDERS)
    b = t
    while b > 0 and s[b - 1] == 0x5C:  # ...\Temp\ (also doubled, as in JSON text)
        b -= 1
    return b < t and b >= 5 and s[b - 5] == 0x5C and s[b - 4:b] in (b"Temp", b"TEMP", b"temp")


def _temp_name(s: bytes, t: int) -> tuple[int, int] | None:
    """At ``tmp``: the random run of a generated name that starts a temporary component."""
    if not _temp_prefix_ends(s, t):
        return None
    n = len(s)
    r = t + 3
    if r < n and s[r] == 0x2E:
        r += 1
    if r < n and s[r] == 0x5F:
        return None  # tmp_ then a word: a name someone chose (tmp_output1)
    e = r
    while e < n and s[e] in _WORD:
        e += 1
    if not TEMP_RANDOM_MIN <= e - r <= TEMP_RANDOM_MAX or not any(c in _DIGIT for c in s[r:e]):
        return None
    return r, e


_ARGUMENT_ANCHOR = re.compile(rb"[=p]")  # a query value's '=', the last byte of sleep and tmp


def scan_argument(data: bytes) -> bytes | None:
    """A call's argument value with the parts that change when the same call is re-run
    replaced by the placeholder, or None when it has none (the value is its own scan):

    - a URL query parameter's value (``?_=1733480000123``, ``&since=2026-12-04T10:22:31Z``,
      ``&request_id=<uuid>``): its spans of the ``timestamps`` and ``hex`` classes (the value
      scanned on its own, from the ``=`` after ``?name`` or ``&name`` to the next ``&``, ``#``,
      whitespace, quote or shell operator);
    - the duration of ``sleep N`` (digits, an optional fraction and one of ``s m h d``; ``sleep``
      not glued to a word before it: ``time.sleep(5)`` stays);
    - a generated temporary name: the first component under a ``temp_paths`` prefix, ``tmp``
      or ``tmp.`` then a run of 6 to 12 letters, digits and ``_`` holding a digit and not
      starting with ``_`` (``/tmp/tmpa8f3kq2z``); the run is replaced, a named scratch file
      (``/tmp/debug_log.txt``, ``/tmp/tmp_output1.py``) stays.

    The scan stops at each ``=`` and ``p`` (the last byte of ``sleep``, ``tmp``), left to right;
    a span is replaced unless it starts before the end of the last one replaced. Nothing else:
    the other classes merge progress (``sed -i '223s/a/b/'``, a commit, a task's UUID)."""
    s = bytes(data)
    if b"=" not in s and b"sleep" not in s and b"tmp" not in s:
        return None
    out = _Out(s, False)
    done = 0  # the end of the last replacement
    for m in _ARGUMENT_ANCHOR.finditer(s):
        a = m.start()
        span: tuple[int, int] | None
        if s[a] == 0x3D:
            query = _query_value(s, a)
            if query is not None and query[0] >= done:
                out.replace(*query)
                done = query[1]
            continue
        if a >= 4 and s[a - 4:a] == b"slee":
            span = _sleep_duration(s, a - 4)
        elif a >= 2 and s[a - 2:a] == b"tm":
            span = _temp_name(s, a - 2)
        else:
            continue
        if span is not None and span[0] >= done:
            out.replace(*span)
            done = span[1]
    if not out.changed:
        return None
    out.flush(len(s))
    return bytes(out.buf)
