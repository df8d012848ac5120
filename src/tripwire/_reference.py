"""The pure-Python reference of every hot path: the executable spec.

Selected with ``TRIPWIRE_IMPLEMENTATION=python``. The C++ core (``native/``, bound in
``_native.pyx``) implements exactly this behaviour; the test suite drives both with the same
traces and asserts identical alerts, keys and token counts. When the two disagree, this file is
the one that reads like SPEC.md, so read it first.

Contents, in the order an observed call flows through them:

1. canonical call keys (SPEC §2): path-shaped keys, lexical path cleaning, canonical JSON,
   the 64-bit XXH3 key, and the run-consistent suffix relation of the repeat detector;
2. the eight detectors (SPEC §1), one small class each;
3. ``Engine``: one session's detectors, fanning observations out and returning a bitmask
   of fired signals (bit i = the i-th signal of the §1 table);
4. ``TokenEstimator``: streaming bytes -> tokens at 3 bytes per token (SPEC §6).
"""

from __future__ import annotations

import functools
import json
import re
from collections import OrderedDict, deque
from typing import Any, NamedTuple

import xxhash

from ._common import (
    BATCH_FIELDS,
    EngineSettings,
    args_bytes,
    error_failed,
    name_str,
    no_op_flag,
    payload_bytes,
    remember_call_id,
    text_has_words,
    tool_identity,
)
from .cost import usage_cost_nano
from .errors import InvalidEvent

IMPLEMENTATION = "python"

# --------------------------------------------------------------------------------------------
# 1. Canonical call keys
# --------------------------------------------------------------------------------------------

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
        return _quote(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    return "null"


def _member_value(key: str, value: Any, depth: int) -> str:
    """A member's canonical value; strings under path-shaped keys are cleaned (SPEC §10.9)."""
    if is_path_key(key):
        if type(value) is str:
            return _quote(clean_path(value))
        if isinstance(value, list):
            if depth + 1 > MAX_DEPTH:
                raise _Invalid
            items = [
                _quote(clean_path(v)) if type(v) is str else _canonical(v, depth + 2)
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


def _parse_object(raw: bytes) -> dict | None:
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
                    paths.append(clean_path(v))
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


# --------------------------------------------------------------------------------------------
# 2. The detectors (SPEC §1, §10). Each reads what it needs and says whether it fired.
# --------------------------------------------------------------------------------------------


class RepeatDetector:
    """repeated-tool-call: N calls in a row with equivalent args, run-consistent (SPEC §2.3)."""

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

    def continues(self, call: CanonicalCall) -> bool:
        return (
            self.run > 0
            and call.rest == self.rest
            and call.is_object == self.is_object
            and all(paths_suffix_match(p, q) for p, q in zip(call.paths, self.longest, strict=True))
        )

    def observe(self, call: CanonicalCall) -> tuple[bool, bool]:
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
        if self.enabled and self.run >= self.threshold and not self.tripped:
            self.tripped = True
            return joined, True
        return joined, False


def smallest_rotation(block: tuple[int, ...]) -> tuple[int, ...]:
    """One fingerprint per cyclic pattern: a,b and b,a are the same loop (SPEC §1)."""
    return min(block[i:] + block[:i] for i in range(len(block)))


class CycleDetector:
    """alternating-tool-cycle: the last p*cycles calls are `cycles` laps of a p-call block."""

    def __init__(self, max_period: int, cycles: int, enabled: bool):
        self.max_period = max_period
        self.cycles = cycles
        self.enabled = enabled
        self.reset()

    def reset(self) -> None:
        self.fingerprint: tuple[int, ...] | None = None
        self.period = 0

    def observe(self, keys: deque[int], joins: deque[bool]) -> bool:
        n = len(keys)
        for p in range(2, self.max_period + 1):
            span = p * self.cycles
            if n < span:
                break
            tail = list(keys)[n - span :]
            if any(tail[i] != tail[i - p] for i in range(p, span)):
                continue
            # SPEC §10.3: a block whose calls form one repeat run is the repeat detector's.
            if all(joins[n - j] for j in range(1, p)):
                continue
            fingerprint = smallest_rotation(tuple(tail[span - p :]))
            if fingerprint == self.fingerprint:
                return False
            self.fingerprint = fingerprint
            self.period = p
            return True
        self.fingerprint = None  # any call that breaks the pattern re-arms
        return False


#: How many density-reported keys are remembered; more than a handful cannot be at threshold at
#: once, and the oldest is forgotten first.
DENSITY_REPORTED_CAPACITY = 8


class DensityDetector:
    """dominant-tool-call: one canonical call is `threshold` of the last `window` calls."""

    def __init__(self, window: int, threshold: int, defer_run: int, defer_cycle_period: int):
        self.window = window
        self.threshold = threshold
        self.defer_run = defer_run
        self.defer_cycle_period = defer_cycle_period
        self.reset()

    def reset(self) -> None:
        self.reported: deque[int] = deque(maxlen=DENSITY_REPORTED_CAPACITY)
        self.count = 0
        self.length = 0
        self.first_age = 0  # calls between the dominant key's earliest window entry and now

    def observe(self, keys: deque[int], joins: deque[bool]) -> bool:
        n = len(keys)
        length = min(n, self.window)
        window = list(keys)[n - length :]
        window_joins = list(joins)[n - length :]
        # the dominant key: highest count, ties to the earliest first occurrence
        counts: dict[int, int] = {}
        first: dict[int, int] = {}
        for i, k in enumerate(window):
            counts[k] = counts.get(k, 0) + 1
            first.setdefault(k, i)
        dominant = max(counts, key=lambda k: (counts[k], -first[k]))
        count = counts[dominant]
        if count < self.threshold:
            self.reported.clear()  # SPEC §10.4: re-arm only when the count falls below
            return False
        if self._deferred(window, window_joins, dominant):
            return False
        if dominant in self.reported:
            return False
        self.reported.append(dominant)
        self.count = count
        self.length = length
        self.first_age = length - 1 - first[dominant]
        return True

    def _deferred(self, window: list[int], joins: list[bool], dominant: int) -> bool:
        if self.defer_run > 0:
            # SPEC §10.2: the longest stretch of window entries the repeat detector counted as
            # one run, containing the dominant key.
            best = stretch = 0
            has_dominant = False
            for i, k in enumerate(window):
                if i == 0 or not joins[i]:
                    stretch, has_dominant = 0, False
                stretch += 1
                has_dominant = has_dominant or k == dominant
                if has_dominant:
                    best = max(best, stretch)
            if best >= self.defer_run:
                return True
        length = len(window)
        for p in range(2, self.defer_cycle_period + 1):
            if p < length and all(window[i] == window[i - p] for i in range(p, length)):
                return True  # a clean cycle: the cycle detector's territory
        return False


class NameRunDetector:
    """repeated-tool-name: N calls in a row with the same name, whatever the args (SPEC §10.1)."""

    def __init__(self, threshold: int, stand_down_run: int):
        self.threshold = threshold
        self.stand_down_run = stand_down_run  # the repeat threshold; 0 when nothing to defer to
        self.reset()

    def reset(self) -> None:
        self.name: str | None = None
        self.run = 0
        self.reported = False

    def observe(self, name: str, repeat_run: int) -> bool:
        if self.run and name == self.name:
            self.run += 1
        else:
            self.name, self.run, self.reported = name, 1, False
        if self.run >= self.threshold and not self.reported:
            self.reported = True  # a stood-down run counts as reported
            return not (self.stand_down_run and repeat_run >= self.stand_down_run)
        return False


class SilenceDetector:
    """tools-without-text: N calls in a row with no agent text between them."""

    def __init__(self, threshold: int):
        self.threshold = threshold
        self.reset()

    def reset(self) -> None:
        self.run = 0
        self.reported = False

    def observe_call(self) -> bool:
        self.run += 1
        if self.run >= self.threshold and not self.reported:
            self.reported = True
            return True
        return False

    def observe_text(self, has_words: bool) -> None:
        if has_words:
            self.run = 0
            self.reported = False


class StreakDetector:
    """A run of results with one property; one alert per run, re-armed when the run resets."""

    def __init__(self, threshold: int):
        self.threshold = threshold
        self.reset()

    def reset(self) -> None:
        self.run = 0
        self.tripped = False

    def extend(self) -> bool:
        self.run += 1
        if self.run >= self.threshold and not self.tripped:
            self.tripped = True
            return True
        return False


class DigestMemory:
    """The turn's last `capacity` distinct payload digests, least recently seen evicted."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.seen: OrderedDict[bytes, None] = OrderedDict()

    def seen_before(self, digest: bytes) -> bool:
        """Remember the digest; True if it was already remembered (and refresh it)."""
        if digest in self.seen:
            self.seen.move_to_end(digest)
            return True
        if len(self.seen) >= self.capacity:
            self.seen.popitem(last=False)
        self.seen[digest] = None
        return False

    def clear(self) -> None:
        self.seen.clear()


# --------------------------------------------------------------------------------------------
# 3. One session's engine
# --------------------------------------------------------------------------------------------

# Bit i of a fired mask is the i-th signal of the SPEC §1 table.
REPEAT, CYCLE, DENSITY, NAME, FAILURE, NO_OP, NO_NEW_STATE, SILENCE = (1 << i for i in range(8))


class SessionStats:
    """Statistics mode (``tripwire corpus stats``): per signal, in SPEC §1 order, the largest
    value the session reached of the quantity its threshold is compared with, read from the
    detectors' state after each call and result. Stand-downs and one alert per pattern are not
    applied (they decide whether an alert is raised, not how far a pattern went)."""

    def __init__(self) -> None:
        self.peak = [0] * 8
        self._matches: dict[int, int] = {}  # period p -> calls in a row equal to the p-th before

    def after_call(self, engine: Engine) -> None:
        peak = self.peak
        peak[0] = max(peak[0], engine._repeat.run)
        keys, joins = engine._keys, engine._joins
        n = len(keys)
        for p in range(2, engine.settings.cycle_max_period + 1):
            matches = self._matches.get(p, 0) + 1 if n > p and keys[-1] == keys[-1 - p] else 0
            self._matches[p] = matches
            # SPEC §10.3: a block whose calls form one repeat run is not a cycle
            if matches >= p and not all(joins[n - j] for j in range(1, p)):
                peak[1] = max(peak[1], 1 + matches // p)
        # only the newest key's count rose: the highest window count is reached at its newest
        window = list(keys)[-engine.settings.density_window:]
        peak[2] = max(peak[2], window.count(window[-1]))
        peak[3] = max(peak[3], engine._name.run)
        peak[7] = max(peak[7], engine._silence.run)

    def after_result(self, engine: Engine) -> None:
        peak = self.peak
        peak[4] = max(peak[4], engine._failures.run)
        peak[5] = max(peak[5], engine._no_ops.run)
        peak[6] = max(peak[6], engine._stale.run)

    def after_reset(self) -> None:
        self._matches.clear()  # the history was cleared


class Engine:
    """One session's detector state. Observations return ``()`` or ``self._fired(...)``.

    ``_fired(mask, name, args_or_error)`` is supplied by the subclass that builds alert texts
    (``tripwire.watchdog.Watchdog``); the engine itself only counts and compares.
    """

    implementation = IMPLEMENTATION

    def __init__(self, settings: EngineSettings):
        self._engine_init(settings)

    def _engine_init(self, settings: EngineSettings) -> None:
        self.settings = settings
        on = settings.enabled
        self._repeat = RepeatDetector(settings.repeat_threshold, bool(on & REPEAT))
        self._cycle = CycleDetector(
            settings.cycle_max_period, settings.cycle_cycles, bool(on & CYCLE)
        )
        self._density = DensityDetector(
            settings.density_window,
            settings.density_threshold,
            settings.density_defer_run,
            settings.density_defer_cycle_period,
        )
        stand_down = settings.repeat_threshold if on & REPEAT else 0
        self._name = NameRunDetector(settings.name_threshold, stand_down)
        self._silence = SilenceDetector(settings.silence_threshold)
        self._failures = StreakDetector(settings.failure_threshold)
        self._no_ops = StreakDetector(settings.no_op_threshold)
        self._stale = StreakDetector(settings.no_new_state_threshold)
        self._digests = DigestMemory(settings.digest_memory)
        self._history = max(
            settings.density_window, settings.cycle_max_period * settings.cycle_cycles
        )
        self.events = 0
        self.last_used = 0.0  # Fleet: when the session was last fetched (monotonic)
        self._stats: SessionStats | None = None
        self._clear()

    # -- observations ------------------------------------------------------------------------

    def observe_call(self, name: str, args: Any = None) -> tuple:
        if type(name) is not str:
            name = name_str(name)
        self.events += 1
        on = self.settings.enabled
        call = canonicalize(name, args)
        joined, fired = self._repeat.observe(call)
        mask = REPEAT if fired else 0
        self._keys.append(call.key)
        self._joins.append(joined)
        self._calls.append((name, args))
        if on & CYCLE and self._cycle.observe(self._keys, self._joins):
            mask |= CYCLE
        if on & DENSITY and self._density.observe(self._keys, self._joins):
            mask |= DENSITY
        identity = tool_identity(name, args, self.settings.shell_tools)
        if self._name.observe(identity, self._repeat.run) and on & NAME:
            mask |= NAME
        if self._silence.observe_call() and on & SILENCE:
            mask |= SILENCE
        if self._stats is not None:
            self._stats.after_call(self)
        if mask:
            return self._fired(mask, name, args)
        return ()

    def observe_result(
        self, name: str = "", error: Any = None, no_op: bool = False, payload: Any = None
    ) -> tuple:
        if type(name) is not str:
            name = name_str(name)
        self.events += 1
        on = self.settings.enabled
        failed = error_failed(error)
        no_op = no_op_flag(no_op, failed)
        mask = 0
        if failed:
            if self._failures.extend() and on & FAILURE:
                mask |= FAILURE
            if len(self._failure_names) < self.settings.failure_threshold:
                self._failure_names.append(name)
            self._last_error = error
        else:
            self._failures.reset()
            self._failure_names = []
            if no_op:
                if self._no_ops.extend() and on & NO_OP:
                    mask |= NO_OP
                if len(self._no_op_names) < self.settings.no_op_threshold:
                    self._no_op_names.append(name)
            else:
                self._no_ops.reset()
                self._no_op_names = []
            if not no_op and name not in self.settings.exempt_tools:
                digest = payload_digest(payload)
                if digest is None:
                    self._stale.reset()  # cannot fingerprint: no evidence of a stall
                elif self._digests.seen_before(digest):
                    if self._stale.extend() and on & NO_NEW_STATE:
                        mask |= NO_NEW_STATE
                else:
                    self._stale.reset()  # new information breaks the run
        if self._stats is not None:
            self._stats.after_result(self)
        if mask:
            return self._fired(mask, name, error)
        return ()

    def observe_text(self, text: Any) -> tuple:
        self.events += 1
        self._silence.observe_text(text_has_words(text))
        return ()

    def end_turn(self) -> tuple:
        self.events += 1
        self.turn_boundary()
        return ()

    def turn_boundary(self) -> None:
        """SPEC §10.5: the no-op run and the seen-set (with its run) are turn-scoped."""
        self._no_ops.reset()
        self._no_op_names = []
        self._digests.clear()
        self._stale.reset()

    def reset(self) -> tuple:
        """SPEC §10.8: clear every detector's state, the seen-set included."""
        self.events += 1
        self._clear()
        return ()

    def _clear(self) -> None:
        for detector in (
            self._repeat, self._cycle, self._density, self._name, self._silence,
            self._failures, self._no_ops, self._stale,
        ):
            detector.reset()
        self._digests.clear()
        if self._stats is not None:
            self._stats.after_reset()
        self._keys: deque[int] = deque(maxlen=self._history)
        self._joins: deque[bool] = deque(maxlen=self._history)
        self._calls: deque[tuple[str, Any]] = deque(maxlen=self._history)
        self._failure_names: list[str] = []
        self._no_op_names: list[str] = []
        self._last_error: Any = None

    def count_event(self) -> None:
        """Advance the event index for an event the watchdog does not observe."""
        self.events += 1

    def enable_stats(self) -> None:
        """Keep, from now on, the peak of each signal's compared quantity (``stats``)."""
        if self._stats is None:
            self._stats = SessionStats()

    @property
    def stats(self) -> tuple[int, ...] | None:
        """Per signal, in SPEC §1 order, the largest value its threshold was compared with;
        None unless ``enable_stats()`` was called."""
        return None if self._stats is None else tuple(self._stats.peak)

    def _fired(self, mask: int, name: str, detail: Any) -> tuple:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- what alert texts need ---------------------------------------------------------------

    def recent_call(self, age: int) -> tuple[str, Any]:
        """The (name, args) of the call `age` calls ago (0 = the latest)."""
        return self._calls[-1 - age]

    @property
    def repeat_run(self) -> int:
        return self._repeat.run

    @property
    def cycle_period(self) -> int:
        return self._cycle.period

    @property
    def dominant(self) -> tuple[int, int, int]:
        """(count, window length, age of the dominant key's earliest window entry)."""
        d = self._density
        return d.count, d.length, d.first_age

    @property
    def name_run(self) -> int:
        return self._name.run

    @property
    def silent_calls(self) -> int:
        return self._silence.run

    @property
    def failure_streak(self) -> int:
        return self._failures.run

    @property
    def failure_names(self) -> list[str]:
        return list(self._failure_names)

    @property
    def last_error(self) -> Any:
        return self._last_error

    @property
    def no_op_run(self) -> int:
        return self._no_ops.run

    @property
    def no_op_names(self) -> list[str]:
        return list(self._no_op_names)

    @property
    def stale_results(self) -> int:
        return self._stale.run


# --------------------------------------------------------------------------------------------
# 4. Streaming token estimate (SPEC §6)
# --------------------------------------------------------------------------------------------

#: Tool results are JSON, YAML and logs, which tokenize worse than prose; under-counting is the
#: dangerous direction, so 3 bytes per token rather than the 4-byte prose rule (seed).
BYTES_PER_TOKEN = 3


class TokenEstimator:
    """Counts unmeasured bytes; ``tokens`` is ceil(bytes / 3) over the total, so any chunking of
    the same bytes gives the same count (SPEC §10.14)."""

    __slots__ = ("bytes",)

    def __init__(self) -> None:
        self.bytes = 0

    def feed(self, chunk: Any) -> int:
        """Add one chunk (str, bytes or any buffer); returns the running token estimate."""
        self.bytes += utf8_length(chunk)
        return self.tokens

    def add_bytes(self, count: int) -> int:
        """Add a byte count measured elsewhere (batch ingest hands its totals over this way)."""
        self.bytes += count
        return self.tokens

    @property
    def tokens(self) -> int:
        return -(-self.bytes // BYTES_PER_TOKEN)

    def reset(self) -> None:
        self.bytes = 0


def utf8_length(chunk: Any) -> int:
    """Bytes a chunk occupies as UTF-8 (buffers: their byte length)."""
    if isinstance(chunk, str):
        return len(chunk.encode("utf-8", "surrogatepass"))
    if chunk is None:
        return 0
    try:
        return memoryview(chunk).nbytes
    except TypeError:
        raise InvalidEvent(
            f"expected str or a bytes-like buffer, not {type(chunk).__name__}"
        ) from None


def estimate_tokens(byte_count: int) -> int:
    return -(-byte_count // BYTES_PER_TOKEN)


# --------------------------------------------------------------------------------------------
# 5. Batch ingest (the same contract as the native Batch, one event at a time)

_BATCH_FIELDS = BATCH_FIELDS


class Batch:
    """Many sessions' events observed in order, one at a time; the contract of
    ``tripwire._native.Batch`` (there, the class docstring), with every usage row handed to
    Python (``why`` 2), which the contract allows."""

    def __init__(self, rows, convert=None):
        self.rows = list(rows)
        self.slot_of: dict[str, int] = {}
        self.session_ids: list[str] = []
        self.slots: list[int] = []
        self.bound = False
        i = 0
        try:
            for i, row in enumerate(self.rows):
                self.rows[i] = self._check(row, i, convert)
        except InvalidEvent as e:
            raise InvalidEvent(f"event {i}: {e.message}") from None

    def _check(self, row, i, convert) -> tuple:
        """The checks the native batch makes up front, so a bad row fails before any is seen."""
        if (not isinstance(row, tuple) or len(row) < 2
                or (not isinstance(row[1], str) and convert is not None)):
            if convert is not None:
                row = convert(row, i)
            if isinstance(row, list):
                row = tuple(row)
            if not isinstance(row, tuple) or len(row) < 2:
                raise InvalidEvent(f"expected (session_id, kind, *fields), not {row!r}")
        sid, kind = row[0], row[1]
        nfields = _BATCH_FIELDS.get(kind) if isinstance(kind, str) else None
        if nfields is None:
            raise InvalidEvent(f"unknown kind {kind!r} (known: {', '.join(_BATCH_FIELDS)})")
        if len(row) - 2 > nfields:
            raise InvalidEvent(f"a {kind} takes at most {nfields} fields")
        slot = self.slot_of.get(sid)
        if slot is None:
            if not isinstance(sid, str) or not sid:
                raise InvalidEvent(f"a session id is a non-empty str, not {sid!r}")
            slot = self.slot_of[sid] = len(self.session_ids)
            self.session_ids.append(sid)
        self.slots.append(slot)
        fields = (*row[2:], None, None, None, None, None)
        if kind == "call":
            name_str(fields[0])
            args_bytes(fields[1])
        elif kind == "result":
            if fields[0] is not None:
                name_str(fields[0])
            if fields[1] is not None and not isinstance(
                    fields[1], (str, bytes, bytearray, memoryview)):
                payload_bytes(fields[1])
            error_failed(fields[2])
        elif kind == "text":
            text_has_words(fields[0])
        elif kind == "usage":
            usage_cost_nano(fields[1], fields[2], fields[3])
        return row

    def bind(self, states) -> None:
        if len(states) != len(self.session_ids):
            raise ValueError(f"bind: {len(states)} states for {len(self.session_ids)} sessions")
        self.engines = [s[0] for s in states]
        self.blocked = [s[1] for s in states]
        self.words = [s[4] for s in states]
        # per slot: [measured, carried, compact_at, cut_tokens, pending, cut, added, taken]
        self.contexts = [None if s[2] is None else [*s[2][:6], 0, 0] for s in states]
        self.ids = [dict(s[3]) for s in states]
        self.ids_changed = [False] * len(states)
        self.items: list[tuple] = []
        self.blocked_rows: list[int] = []
        self.pos = 0
        for i, row in enumerate(self.rows):
            slot = self.slots[i]
            kind = row[1]
            names = self.ids[slot]
            if kind == "turn_start":
                names.clear()
                self.ids_changed[slot] = True
            fields = (*row[2:], None, None, None, None, None)
            if kind == "call":
                name = fields[0]
                if fields[2] is not None:
                    remember_call_id(names, fields[2], name)
                    self.ids_changed[slot] = True
            elif kind == "result":
                name = fields[0]
                if name is None:
                    name = names.get(fields[4], "") if fields[4] is not None else ""
            if kind not in ("call", "result", "text") or self.engines[slot] is None:
                self.items.append(("p", slot))
            elif kind == "text":
                self.items.append(("t", slot, fields[0]))
            elif kind == "call":
                self.items.append(("c", slot, name, fields[1]))
            else:
                self.items.append(("r", slot, name, fields[1], fields[2], bool(fields[3])))
        self.bound = True

    def run(self) -> tuple[int, tuple, int]:
        if not self.bound:
            raise RuntimeError("Batch.bind() first")
        n = len(self.items)
        while self.pos < n:
            i = self.pos
            item = self.items[i]
            self.pos += 1
            if item[0] == "p":
                return i, (), 2
            slot = item[1]
            if self.blocked[slot]:
                self.blocked_rows.append(i)
                continue
            engine = self.engines[slot]
            if item[0] == "t":
                engine.observe_text(item[2])
                if self.words[slot] and text_has_words(item[2]):
                    return i, (), 1  # Guardrails withdraws the notes the words answer
                continue
            if item[0] == "c":
                alerts = engine.observe_call(item[2], item[3])
                if alerts:
                    return i, alerts, 1
                continue
            _, _, name, payload, error, no_op = item
            alerts = engine.observe_result(name, error=error, no_op=no_op, payload=payload)
            c = self.contexts[slot]
            if c is not None and payload is not None:
                size = utf8_length(payload) if isinstance(
                    payload, (str, bytes, bytearray, memoryview)) else len(payload_bytes(payload))
                if size:
                    c[6] += size
                    tokens = c[0] + estimate_tokens(c[1] + c[6])
                    if (tokens >= c[2] and not c[4]) or (tokens >= c[3] and not c[5]):
                        return i, alerts, 1
            if alerts:
                return i, alerts, 1
        return n, (), 0

    def row(self, i: int) -> tuple:
        row = self.rows[i]
        return row + (None,) * (_BATCH_FIELDS[row[1]] + 2 - len(row))

    def slot(self, i: int) -> int:
        return self.slots[i]

    def update_slot(self, slot: int, state: tuple) -> None:
        self.blocked[slot] = state[1]
        self.words[slot] = state[4]
        if state[2] is not None and self.contexts[slot] is not None:
            self.contexts[slot] = [*state[2][:6], 0, 0]

    def take_blocked(self) -> list[int]:
        rows, self.blocked_rows = self.blocked_rows, []
        return rows

    def changes(self) -> list[tuple[int, None, None, int]]:
        out = []
        for k, c in enumerate(self.contexts):
            if c is not None and c[6] != c[7]:
                out.append((k, None, None, c[6] - c[7]))
                c[7] = c[6]
        return out

    def call_ids(self) -> list[tuple[int, dict]]:
        return [(k, ids) for k, ids in enumerate(self.ids)
                if self.ids_changed[k] and self.engines[k] is not None]
