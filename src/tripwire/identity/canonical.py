"""Canonical call keys in plain Python (SPEC §2): the reference of ``native/canonical.*``.

Path-shaped keys, lexical path cleaning, the volatile parts of string values (a URL query's
timestamp or request id, a ``sleep`` duration, a generated temporary name: ``answer.
scan_argument``), canonical JSON, the 64-bit XXH3 key, and the run-consistent suffix relation of
the repeat detector. ``_reference`` re-exports every name, so
both engines export the same API.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, NamedTuple

import xxhash

from ..base.inputs import args_bytes, payload_bytes
from .arguments import scan_argument

#: SPEC §2.1: a key is path-shaped iff its last word, or its last two words joined, is one of these.
PATH_WORDS = frozenset(
    {
        "path", "paths", "file", "files", "filename", "filepath", "pathname", "dirname",
        "foldername", "dir", "dirs", "directory", "folder", "cwd", "root", "target", "source",
        "destination", "src", "dst",
    }
)

#: Containers nested deeper than this make the args "not a JSON object" (compared as raw bytes).
#: A fixed limit so both implementations agree on pathological input.
MAX_DEPTH = 128

#: Number exponents with more digits than this are treated as invalid JSON (raw bytes): keeps the
#: exact-decimal arithmetic in 64-bit integers in the native core.
MAX_EXPONENT_DIGITS = 15

# SPEC §10.10, §10.22: split on _ - . space, then only at lower->upper case changes, acronym
# ends and letter/digit changes. Only ASCII letters carry case; any other character belongs to
# the word it is in, so `a/path` and `$path` are one word each.
_SEPARATORS = re.compile(r"[_\-. ]+")
_BOUNDARY = re.compile(
    r"(?<=[a-z])(?=[A-Z])"          # camelCase
    r"|(?<=[A-Z])(?=[A-Z][a-z])"    # acronym end: HTTPS|Path
    r"|(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])"  # letter/digit changes
)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def key_words(key: str) -> list[str]:
    """Lower-cased words of a JSON key, digit-only words dropped (SPEC §10.10)."""
    return [w.translate(_ASCII_LOWER) for part in _SEPARATORS.split(key) if part
            for w in _BOUNDARY.split(part) if not (w.isascii() and w.isdigit())]


@functools.lru_cache(maxsize=4096)  # a session's keys repeat: the split is done once each
def is_path_key(key: str) -> bool:
    """SPEC §2.1: path-shaped iff the last word, or the last two words joined, is a path word."""
    words = key_words(key)
    if not words:
        return False
    if words[-1] in PATH_WORDS:
        return True
    return len(words) >= 2 and (words[-2] + words[-1]) in PATH_WORDS


def clean_path(path: str) -> str:
    """POSIX lexical cleaning, like Go's ``path.Clean`` (SPEC §2.2)."""
    if path == "":
        return "."
    rooted = path.startswith("/")
    parts: list[str] = []
    for element in path.split("/"):
        if element in ("", "."):
            continue
        if element == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not rooted:
                parts.append("..")
            # ".." directly under the root is dropped
            continue
        parts.append(element)
    cleaned = "/".join(parts)
    if rooted:
        return "/" + cleaned
    return cleaned or "."


def paths_suffix_match(a: str, b: str) -> bool:
    """The repeat detector's path relation on two cleaned paths (SPEC §2.3).

    Equal, or the longer ends with ``/`` + the shorter (a suffix on a component boundary). Two
    absolute paths match only when equal: ``//x`` cannot occur in a cleaned path.
    """
    if a == b:
        return True
    if a == "." or b == ".":
        return False
    if len(a) < len(b):
        a, b = b, a
    return a.endswith("/" + b)


class _Invalid(Exception):
    """The args are not a canonicalizable JSON object: compare them as raw bytes."""


class _Number(str):
    """A JSON number, held as its canonical exact-decimal spelling."""


_NUMBER = re.compile(r"(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([-+]?)([0-9]+))?")


def canonical_number(literal: str) -> str:
    """The exact decimal value of a JSON number literal, spelled one way (SPEC §10.9).

    ``digits`` without leading or trailing zeros, then ``e<exponent>`` unless it is 0; zero is
    ``0`` whatever its sign. So ``1`` = ``1.0`` = ``1e0``, ``100`` -> ``1e2``, ``-0`` -> ``0``,
    and integers beyond 2^53 keep every digit. No floating point is involved.
    """
    m = _NUMBER.fullmatch(literal)
    if m is None:  # pragma: no cover - the JSON scanner only hands over valid literals
        raise _Invalid
    sign, integer, fraction, exp_sign, exp_digits = m.groups()
    fraction = fraction or ""
    exponent = 0
    if exp_digits is not None:
        significant = exp_digits.lstrip("0")
        if len(significant) > MAX_EXPONENT_DIGITS:
            raise _Invalid
        exponent = int(significant or "0") * (-1 if exp_sign == "-" else 1)
    digits = (integer + fraction).lstrip("0")
    if not digits:
        return "0"
    exponent -= len(fraction)
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    return sign + stripped + (f"e{exponent}" if exponent else "")


def _reject_constant(name: str) -> Any:
    raise _Invalid  # NaN, Infinity, -Infinity are not JSON


_DECODER = json.JSONDecoder(
    parse_float=lambda s: _Number(canonical_number(s)),
    parse_int=lambda s: _Number(canonical_number(s)),
    parse_constant=_reject_constant,
)  # duplicate keys: dict() keeps the last value, as SPEC §10.9 wants

_ESCAPES = {i: f"\\u{i:04x}" for i in range(0x20)}
_ESCAPES[ord('"')] = '\\"'
_ESCAPES[ord("\\")] = "\\\\"


def _quote(s: str) -> str:
    """Canonical string spelling: only ``"``, ``\\`` and control characters are escaped."""
    return '"' + s.translate(_ESCAPES) + '"'


#: Marks a top-level path value in the "rest" form the repeat relation compares. Raw 0x01 never
#: occurs in canonical JSON (control characters are escaped), so it cannot collide.
REST_PLACEHOLDER = "\x01"


def _volatile(value: str) -> str:
    """A string value with its volatile parts replaced (``arguments.scan_argument``): the same
    call re-run with a new cache-buster, ``sleep`` or temporary name has the same key."""
    if "=" not in value and "sleep" not in value and "tmp" not in value:
        return value  # the scan's own first test, without encoding the string
    scanned = scan_argument(value.encode("utf-8"))
    return value if scanned is None else scanned.decode("utf-8")


def _canonical(value: Any, depth: int) -> str:
    if isinstance(value, dict):
        if depth > MAX_DEPTH:
            raise _Invalid
        members = []
        for key in sorted(value):  # code-point order == UTF-8 byte order
            members.append(_quote(key) + ":" + _member_value(key, value[key], depth))
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        if depth > MAX_DEPTH:
            raise _Invalid
        return "[" + ",".join(_canonical(v, depth + 1) for v in value) + "]"
    if isinstance(value, _Number):
        return str(value)
    if isinstance(value, str):
        return _quote(_volatile(value))
    if value is True:
        return "true"
    if value is False:
        return "false"
    return "null"


def _member_value(key: str, value: Any, depth: int) -> str:
    """A member's canonical value; strings under path-shaped keys are cleaned (SPEC §10.9)."""
    if is_path_key(key):
        if type(value) is str:
            return _quote(_volatile(clean_path(value)))
        if isinstance(value, list):
            if depth + 1 > MAX_DEPTH:
                raise _Invalid
            items = [
                _quote(_volatile(clean_path(v))) if type(v) is str else _canonical(v, depth + 2)
                for v in value
            ]
            return "[" + ",".join(items) + "]"
    return _canonical(value, depth + 1)


class CanonicalCall(NamedTuple):
    """What the detectors need of one call."""

    key: int  # XXH3-64 of name + 0x00 + canonical form: equal keys are equal calls
    rest: int  # the key with top-level path strings replaced by a placeholder
    is_object: bool
    paths: tuple[str, ...]  # cleaned top-level path-shaped string values, sorted by key
    canonical: bytes  # the canonical form (raw bytes for non-objects)


def canonical_form(args: Any) -> bytes | None:
    """The canonical JSON of object args, or None when they are compared as raw bytes."""
    parsed = _parse_object(args_bytes(args))
    if parsed is None:
        return None
    try:
        return _canonical(parsed, 1).encode("utf-8")
    except (_Invalid, UnicodeEncodeError):
        return None  # too deep, or a lone surrogate escape


def _parse_object(raw: bytes) -> dict[str, Any] | None:
    try:
        text = raw.decode("utf-8")  # strict: invalid UTF-8 is not JSON
        value = _DECODER.decode(text)
    except (ValueError, _Invalid, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    # Decided on the text, as the native parser does: a duplicate key's overwritten value
    # still counts (the last value wins, SPEC §10.9, but §10.23 and the depth bound read the
    # text), and before path cleaning can drop the component that held a surrogate.
    if _too_deep(text) or ("\\u" in text and _lone_surrogate_escape(text)):
        return None
    return value


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.S)


def _lone_surrogate_escape(text: str) -> bool:
    """Whether a JSON string in the text holds a surrogate escape outside a valid pair."""
    for string in _STRING.finditer(text):
        high = False  # the previous escape was a high surrogate awaiting its low half
        end = -1
        for m in _ESCAPE.finditer(string.group()):
            unit = int(m.group(1), 16) if m.group(1) else -1
            adjacent = m.start() == end
            if high and not (adjacent and 0xDC00 <= unit <= 0xDFFF):
                return True
            if 0xDC00 <= unit <= 0xDFFF and not (high and adjacent):
                return True
            high = 0xD800 <= unit <= 0xDBFF and not high
            end = m.end()
        if high:
            return True
    return False


def _too_deep(text: str) -> bool:
    """Whether brackets outside strings nest deeper than MAX_DEPTH anywhere in the text."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    depth = 0
    for piece in _STRING.split(text):
        for ch in piece:
            if ch in "[{":
                depth += 1
                if depth > MAX_DEPTH:
                    return True
            elif ch in "]}":
                depth -= 1
    return False


def canonicalize(name: str, args: Any) -> CanonicalCall:
    """Parse once, clean paths, re-serialize canonically, hash (SPEC §2.3)."""
    prefix = name.encode("utf-8", "surrogatepass") + b"\x00"
    raw = args_bytes(args)
    parsed = _parse_object(raw)
    if parsed is not None:
        try:
            canonical = _canonical(parsed, 1).encode("utf-8")
            key = xxhash.xxh3_64_intdigest(prefix + canonical)
            paths: list[str] = []
            rest_members = []
            for k in sorted(parsed):
                v = parsed[k]
                if type(v) is str and is_path_key(k):
                    paths.append(_volatile(clean_path(v)))
                    rest_members.append(_quote(k) + ":" + REST_PLACEHOLDER)
                else:
                    rest_members.append(_quote(k) + ":" + _member_value(k, v, 1))
            rest = key
            if paths:
                rest_form = ("{" + ",".join(rest_members) + "}").encode("utf-8")
                rest = xxhash.xxh3_64_intdigest(prefix + rest_form)
            return CanonicalCall(key, rest, True, tuple(paths), canonical)
        except (_Invalid, UnicodeEncodeError):
            pass  # too deep, or a lone surrogate escape: not canonicalizable
    key = xxhash.xxh3_64_intdigest(prefix + raw)
    return CanonicalCall(key, key, False, (), raw)


def canonical_key(name: str, args: Any) -> int:
    """The 64-bit canonical key of a call (SPEC §2.3)."""
    return canonicalize(name, args).key


def payload_digest(payload: Any) -> bytes | None:
    """The 128-bit digest no-new-state remembers, or None when there is no payload."""
    data = payload_bytes(payload)
    if data is None:
        return None
    return xxhash.xxh3_128_digest(data)


def xxh3_64(data: bytes) -> int:
    return xxhash.xxh3_64_intdigest(data)


def xxh3_128(data: bytes) -> int:
    return xxhash.xxh3_128_intdigest(data)

