"""The rules every store backend shares (SPEC §5): the key, how a row is encoded and sealed
into its session's keyed BLAKE3 chain, the head and the manifest that seal the chain's end and
the store's size, and the verdicts ``verify`` reads off what a backend read. Backends (SQLite,
PostgreSQL) hold only SQL and connections, behind the narrow ``Tables`` interface; the
connection's life and the ``EventStore`` methods are ``backend.ChainedStore``'s, the anchor
file ``anchor.py``'s.

Trips (halts), operator resets, granted budget and per-session spend are appended to a store so
a restarted process can fold them forward: a crash must never hand a runaway a fresh budget, and
an agent that can write the database must not silently delete or forge its own halt. A store
keeps rows and says which of them can be trusted; what a row says is ``rows.py``'s, folding
rows into live state ``fold.py``'s.

Tables::

    rows(session, seq, kind, body, time, mac)       body = msgpack of data; seq 0-based per session
    heads(session, count, last_mac, last_halt_seq, mac)
    manifest(id = 1, rows, halted, halted_hash, mac)  store-wide row count, sessions ever halted
    meta(key, value)                                  schema_version, key_check, epoch

Integrity. ``mac`` of a row is keyed BLAKE3 over msgpack ``[1, session, seq, kind, body, time,
previous row's mac]`` (32 zero bytes before row 0), so an edited, reordered, inserted or deleted
middle row breaks the chain at its position. The head's MAC covers ``[b"head", session, count,
last_mac, last_halt_seq]``: it catches deletion of the last rows, which the chain alone cannot. The
manifest's MAC covers ``[b"manifest", rows, halted_hash]``: the row count catches a session
deleted whole (rows and head), and ``halted`` (msgpack of the sorted ids of every session that
ever recorded a halt; ids are only added; ``halted_hash`` is its BLAKE3) names such a session
when it had halted. An append reads and MACs only the count and the hash (constant time); the
list itself is read when a session has no rows left, cached per store object by its hash
(``HaltedList``). Verdicts, as ``ChainReport.problem`` with ``first_broken``:

    row N was edited or reordered                 MAC fails (edit, seq swap, forged row)   N
    row N is missing / rows N-M are missing       gap in seq                               N
    rows N-M are missing: the head records K rows tail deleted                             N
    row N was inserted: the head records K rows   row beyond a valid head's count          N
    row N cannot be decoded / has unknown kind    MAC fine, body not a msgpack map         N
    row N is out of sequence                      seq is not an integer (raw writer)       N
    no head record for K rows                     head deleted                             K
    head record was forged or edited              head MAC fails                           K
    head record does not match row N              head and last row disagree               N
    the session's rows and head were deleted      no rows, no head, listed as halted        0

``first_broken`` is the first position that can no longer be trusted; ``SessionHistory.rows`` are
the rows before it. When the head is missing or forged the rows still chain, so all of them are
returned (``first_broken`` = their count): what cannot be trusted is that nothing followed them.
``last_halt_seq`` comes only from a valid head, so a deleted final halt row is still known.
``verify()`` over the whole store adds a report for session ``"*"`` when the manifest is missing,
forged, or does not match the number of rows present (``store_report``). With a wrong key every
session reports ``row 0 was edited or reordered`` (plus a hint when the store's key check
disagrees): never an exception, so a misconfigured key reads as "untrusted", not as "crash".

``append_row`` never re-seals evidence: it continues from a valid head (so deleted tail rows stay
a visible gap), never rewrites a missing or forged head, and leaves a missing or forged manifest
alone. A break therefore stays reported until an operator rebuilds the store.

Key. ``key`` argument > ``TRIPWIRE_STORE_KEY`` (an empty value counts as unset) > the documented
default ``blake3(b"tripwire local store", derive_key_context="tripwire 2026 default store key")``.
32 bytes are used as is; a str of 64 hex digits is decoded; any other str (UTF-8) or bytes is a
passphrase run through ``derive_key_context="tripwire 2026 store key from passphrase"``.

Limits.
- The default key is public: it only catches naive edits (``DEFAULT_KEY_NOTICE``). A real key
  must also stay out of the agent's reach: scrub ``TRIPWIRE_STORE_KEY`` from the environment of
  the tools the agent runs, or the agent can forge anything.
- Without an anchor, nothing outside the store vouches for it: replacing the whole file with an
  older copy, or dropping every table, reads as an older or fresh store. With one, a store
  behind its anchor is reported (``"*"``) and restores every session halted.
- The manifest names only sessions that halted; another session deleted whole (its spend, say)
  is caught by the manifest's row count, as is an older head replayed after deleting the rows
  behind it: both are store-level reports, carried on every ``SessionHistory`` as
  ``store_problem`` (restore then halts every session: none can be proven complete).
- ``time`` is the writer's clock: covered by the MAC, but informational only.
- ``histories()`` holds the rows it reads in memory (30,000 rows: a few MB); a store that grows
  without bound needs compaction, which tripwire does not do.
"""

from __future__ import annotations

import os
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import blake3
import msgpack

from ..base.log import LOGGER
from ..errors import StoreError
from .rows import KINDS

__all__ = [
    "Row",
    "ChainReport",
    "SessionHistory",
    "EventStore",
    "Tables",
    "HaltedList",
    "resolve_key",
    "key_and_source",
    "key_check_of",
    "notice_default_key",
    "seal",
    "row_mac",
    "head_mac",
    "manifest_mac",
    "list_hash",
    "check_row",
    "encode_data",
    "check_session",
    "append_row",
    "manifest_ok",
    "verify_session",
    "deleted_session",
    "store_report",
    "format_reports",
    "DEFAULT_KEY",
    "DEFAULT_KEY_NOTICE",
    "NO_HALTS",
    "KEY_ENV",
    "SCHEMA_VERSION",
]

#: Environment variable holding the store key.
KEY_ENV = "TRIPWIRE_STORE_KEY"
#: Schema this module writes; a store with a newer version is refused, not misread.
SCHEMA_VERSION = 1
#: First field of every row MAC input, so a future row layout cannot collide with this one.
ROW_VERSION = 1

DEFAULT_KEY_CONTEXT = "tripwire 2026 default store key"
PASSPHRASE_CONTEXT = "tripwire 2026 store key from passphrase"
DEFAULT_KEY = blake3.blake3(
    b"tripwire local store", derive_key_context=DEFAULT_KEY_CONTEXT
).digest()

DEFAULT_KEY_NOTICE = (
    "The durable store is sealed with tripwire's public default key, which only catches naive "
    f"edits of the database file: set {KEY_ENV} to a secret the agent cannot read."
)

#: The manifest's halted list of a new store: no session ever halted.
NO_HALTS = msgpack.packb([], use_bin_type=True)

_ZERO_MAC = bytes(32)  # "previous mac" of row 0
_MAX_DEPTH = 64  # nesting allowed in row data; real rows are flat, this only stops runaway input
_KEY_CHECK = [b"key check"]


@dataclass(frozen=True, slots=True)
class Row:
    """One appended event. ``data`` is a msgpack map: str keys; str, int, float, bool, None, list
    and dict values (tuples come back as lists). What each kind's data says: ``rows.py``."""

    session: str
    seq: int  # 0-based, per session, contiguous
    kind: str  # one of rows.KINDS
    data: dict[str, Any]
    time: float  # unix seconds when written (informational, covered by the MAC)


@dataclass(frozen=True, slots=True)
class ChainReport:
    """Integrity verdict for one session, or for the whole store when ``session`` is ``"*"``."""

    session: str
    intact: bool
    rows: int  # rows present in the table for this session (the whole store for "*")
    first_broken: int | None  # seq of the first untrustworthy position (None when intact, "*")
    problem: str | None
    head_valid: bool  # head (manifest for "*") present and MAC valid; True for an empty session
    last_halt_seq: int | None  # from a valid head: latest row with halts=True (None: never)


@dataclass(frozen=True, slots=True)
class SessionHistory:
    rows: tuple[Row, ...]  # the trusted prefix: rows before report.first_broken
    report: ChainReport
    # the store-level problem (manifest missing, forged or short of rows; the store behind its
    # anchor), read in the same snapshot: no session's history can then be proven complete
    store_problem: str | None = None

    @property
    def exists(self) -> bool:
        """Whether the store knows the session: rows of it, or the evidence of their deletion
        (a broken chain). The one rule of "no such session" (the CLI, ``Fleet.existing``)."""
        return bool(self.rows) or not self.report.intact


@runtime_checkable
class EventStore(Protocol):
    """What restore and the CLI need from a store; narrow so a server database is a new class."""

    def append(self, session: str, kind: str, data: Mapping[str, Any], *,
               wait: float | None = None) -> Row: ...

    def history(self, session: str) -> SessionHistory: ...

    def histories(self, sessions: Iterable[str] | None = None) -> dict[str, SessionHistory]: ...

    def sessions(self) -> list[str]: ...

    def verify(self, session: str | None = None) -> list[ChainReport]: ...

    def close(self) -> None: ...


class Tables(Protocol):
    """One backend's reads and writes of the four tables, inside a transaction the backend
    opened (``ChainedStore.writing`` / ``reading``). Only SQL lives behind this: every rule
    (where a chain continues, what is sealed, the verdicts) is this module's."""

    def head(self, session: str) -> tuple[Any, ...] | None: ...  # (count, last_mac, halt, mac)
    def top(self, session: str) -> tuple[Any, ...] | None: ...  # (seq, mac) of the last row
    def insert_row(self, session: str, seq: int, kind: str, body: bytes, when: float,
                   mac: bytes) -> None: ...
    def put_head(self, session: str, count: int, last_mac: bytes, halt: int | None,
                 mac: bytes) -> None: ...
    def manifest(self) -> tuple[Any, ...] | None: ...  # (rows, halted_hash, mac)
    def halted_blob(self) -> Any: ...
    def set_halted(self, halted: bytes, halted_hash: bytes) -> None: ...
    def set_manifest(self, rows: int, mac: bytes) -> None: ...
    def rows(self, wanted: list[str] | None) -> list[tuple[Any, ...]]: ...  # by session, seq
    def heads(self, wanted: list[str] | None) -> list[tuple[Any, ...]]: ...
    def count(self) -> int: ...
    def key_check(self) -> Any: ...  # the meta table's key check (None: none recorded)
    def epoch(self) -> Any: ...  # the meta table's epoch (None: a store made before epochs)
    def session_ids(self) -> list[str]: ...


# --- keys -------------------------------------------------------------------------------------


def _derive(material: bytes) -> bytes:
    return blake3.blake3(material, derive_key_context=PASSPHRASE_CONTEXT).digest()


def resolve_key(key: bytes | str | None) -> bytes:
    """The 32-byte store key: ``key`` > ``$TRIPWIRE_STORE_KEY`` > the public default.

    32 bytes are used as is, 64 hex digits are decoded, any other str or bytes is a passphrase
    (BLAKE3 ``derive_key_context``). An empty or non-str/bytes key raises StoreError."""
    return key_and_source(key)[0]


def key_and_source(key: bytes | str | None) -> tuple[bytes, str]:
    """``resolve_key``, and where the key came from: ``"argument"``, ``"environment"`` or
    ``"default"``."""
    source = "argument"
    if key is None:
        env = os.environ.get(KEY_ENV, "").strip()  # keys pasted from files carry a newline
        if not env:
            return DEFAULT_KEY, "default"
        key, source = env, "environment"
    if isinstance(key, str):
        if not key:
            raise StoreError("the store key is empty")
        if len(key) == 64 and all(c in string.hexdigits for c in key):
            return bytes.fromhex(key), source
        return _derive(key.encode("utf-8")), source
    if isinstance(key, bytes | bytearray | memoryview):
        raw = bytes(key)
        if not raw:
            raise StoreError("the store key is empty")
        return (raw if len(raw) == 32 else _derive(raw)), source
    raise StoreError(f"the store key must be bytes or str, not {type(key).__name__}")


def key_check_of(key: bytes) -> bytes:
    """What a store records of the key it was created with (``meta.key_check``): a wrong key
    is then told apart from tampering."""
    return seal(key, _KEY_CHECK)


_noticed = False


def notice_default_key() -> None:
    """Say once per process that the store's seal is the public default key."""
    global _noticed
    if not _noticed:
        _noticed = True
        LOGGER.warning("%s", DEFAULT_KEY_NOTICE)


# --- encoding and MACs ------------------------------------------------------------------------


def seal(key: bytes, fields: list[Any]) -> bytes:
    """Keyed BLAKE3 over msgpack of ``fields``: every MAC of the store and its anchor."""
    return blake3.blake3(msgpack.packb(fields, use_bin_type=True), key=key).digest()


def row_mac(
    key: bytes, session: str, seq: int, kind: str, body: bytes, when: float, prev: bytes
) -> bytes:
    return seal(key, [ROW_VERSION, session, seq, kind, body, when, prev])


def head_mac(key: bytes, session: str, count: int, last_mac: bytes, halt: int | None) -> bytes:
    return seal(key, [b"head", session, count, last_mac, halt])


def manifest_mac(key: bytes, rows: int, halted_hash: bytes) -> bytes:
    return seal(key, [b"manifest", rows, halted_hash])


def list_hash(halted: bytes) -> bytes:
    """The hash of the manifest's halted list (the manifest's MAC covers it)."""
    return blake3.blake3(halted).digest()


def _check_data(value: Any, where: str, depth: int = 0) -> None:
    if depth > _MAX_DEPTH:
        raise ValueError(f"row data nests deeper than {_MAX_DEPTH} levels at {where}")
    if value is None or isinstance(value, str | bool | float):
        return
    if isinstance(value, int):
        if not -(2**63) <= value < 2**64:  # msgpack's integer range
            raise ValueError(f"row data integer out of range at {where}")
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_data(item, f"{where}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise ValueError(f"row data keys must be str, got {type(k).__name__} at {where}")
            _check_data(item, f"{where}.{k}", depth + 1)
        return
    raise ValueError(f"row data value of type {type(value).__name__} at {where} is not storable")


def check_row(kind: Any, data: Any) -> None:
    """ValueError, before anything is written, for a kind a store does not take or data that
    is not a mapping."""
    if kind not in KINDS:
        raise ValueError(f"unknown row kind {kind!r}; expected one of {sorted(KINDS)}")
    if not isinstance(data, Mapping):
        raise ValueError(f"row data must be a mapping, not {type(data).__name__}")


def encode_data(data: Mapping[str, Any]) -> tuple[dict[str, Any], bytes]:
    """A row's data checked and encoded: (the data as a dict, its msgpack body). ValueError,
    before anything is written, for data a store cannot hold."""
    data = dict(data)
    _check_data(data, "data")
    return data, msgpack.packb(data, use_bin_type=True)


def decode_body(body: Any) -> dict[str, Any] | None:
    """A row body as a map, or None when it is not one (a broken link, never an exception)."""
    try:
        data = msgpack.unpackb(body, raw=False)
    except Exception:  # untrusted bytes: any decoder failure just means "not a valid row"
        return None
    return data if isinstance(data, dict) else None


def check_session(session: Any) -> None:
    if not isinstance(session, str) or not session:
        raise ValueError(f"session must be a non-empty str, got {session!r}")
    if session == "*":
        raise ValueError('session "*" is reserved for store-level reports')


# --- the append rule --------------------------------------------------------------------------


class HaltedList:
    """The manifest's list of sessions that ever halted, read once per version: the cache is
    keyed by the hash the manifest's MAC covers (one per store object)."""

    __slots__ = ("_cached",)

    def __init__(self) -> None:
        self._cached: tuple[bytes, frozenset[str]] | None = None

    def read(self, t: Tables, halted_hash: bytes) -> frozenset[str] | None:
        """The ids on the list, or None when the list does not match its (MAC'd) hash."""
        cached = self._cached
        if cached is not None and cached[0] == halted_hash:
            return cached[1]
        ids = _halted_ids(t.halted_blob(), halted_hash)
        if ids is not None:
            self._cached = (halted_hash, ids)
        return ids


def append_row(t: Tables, key: bytes, halted: HaltedList, session: str, kind: str, body: bytes,
               halts: bool, now: float) -> tuple[int, tuple[int, bytes] | None]:
    """The append rule, inside the backend's write transaction: (the row's seq, the new
    manifest (rows, mac) if sealed)."""
    head = t.head(session)
    top = t.top(session)
    free = 0 if top is None else top[0] + 1
    if head is not None and _head_ok(key, session, head):
        # The head, not the rows, says where the chain ends: deleted tail rows stay a gap.
        seq, prev, last_halt, sealed_head = max(head[0], free), head[1], head[2], True
    elif head is None and top is None:
        seq, prev, last_halt, sealed_head = 0, _ZERO_MAC, None, True
    else:
        # Missing or forged head over existing rows: keep the new row, but re-sealing a
        # head would launder whatever was done to the session.
        prev = top[1] if top is not None and isinstance(top[1], bytes) else _ZERO_MAC
        seq, last_halt, sealed_head = free, None, False
    mac = row_mac(key, session, seq, kind, body, now, prev)
    t.insert_row(session, seq, kind, body, now, mac)
    if sealed_head:
        if halts:
            last_halt = seq
        t.put_head(session, seq + 1, mac, last_halt,
                   head_mac(key, session, seq + 1, mac, last_halt))
    sealed = None
    manifest = t.manifest()
    if manifest is not None and manifest_ok(key, manifest):
        # Count on from the recorded value, never recount: a deficit stays visible.
        rows, halted_hash = manifest[0] + 1, manifest[1]
        if halts:
            # A session's first halt puts it on the manifest's list for good, so
            # deleting the session whole (rows and head) still reads as hiding a halt.
            ids = halted.read(t, halted_hash)
            if ids is not None and session not in ids:
                packed = msgpack.packb(sorted(ids | {session}), use_bin_type=True)
                halted_hash = list_hash(packed)
                t.set_halted(packed, halted_hash)
        sealed_mac = manifest_mac(key, rows, halted_hash)
        t.set_manifest(rows, sealed_mac)
        sealed = (rows, sealed_mac)
    return seq, sealed


# --- verdicts ---------------------------------------------------------------------------------


def _head_ok(key: bytes, session: str, head: tuple[Any, ...]) -> bool:
    count, last_mac, halt, mac = head
    # Column types are whatever a raw writer put there: check before trusting any of them.
    if type(count) is not int or not isinstance(last_mac, bytes):
        return False
    if halt is not None and type(halt) is not int:
        return False
    return bool(mac == head_mac(key, session, count, last_mac, halt))


def manifest_ok(key: bytes, manifest: tuple[Any, ...]) -> bool:
    """``manifest`` is ``(rows, halted_hash, mac)``: whether its MAC holds."""
    rows, halted_hash, mac = manifest
    return type(rows) is int and isinstance(halted_hash, bytes) and \
        mac == manifest_mac(key, rows, halted_hash)


def _halted_ids(halted: Any, halted_hash: bytes) -> frozenset[str] | None:
    """The ids of the halted list, or None when it does not match the (MAC'd) hash."""
    if not isinstance(halted, bytes) or list_hash(halted) != halted_hash:
        return None
    try:
        ids = msgpack.unpackb(halted, raw=False)
    except Exception:  # matching the MAC'd hash, it is ours: stay total all the same
        return None
    return frozenset(s for s in ids if isinstance(s, str)) if isinstance(ids, list) else None


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def _missing(first: int, last: int) -> str:
    return f"row {first} is missing" if first == last else f"rows {first}-{last} are missing"


def verify_session(
    key: bytes,
    session: str,
    raw: Iterable[tuple[Any, ...]],
    head: tuple[Any, ...] | None,
    hint: str,
    store_problem: str | None = None,
) -> SessionHistory:
    """Walk one session's rows (ordered by seq) against its chain and head, in one pass."""
    head_ok = False
    count_h = 0
    last_halt: int | None = None
    if head is not None and _head_ok(key, session, head):
        head_ok, count_h, last_halt = True, head[0], head[2]
    pack = msgpack.Packer(use_bin_type=True).pack
    hasher = blake3.blake3
    trusted: list[Row] = []
    prev = _ZERO_MAC
    expected = n = 0
    broken: int | None = None
    problem: str | None = None
    for _session, seq, kind, body, when, mac in raw:
        n += 1
        if broken is not None:
            continue  # keep counting the rows present
        if type(seq) is not int or seq != expected:
            if type(seq) is not int or seq < expected:
                broken, problem = expected, f"row {expected} is out of sequence"
            elif head_ok and expected >= count_h:
                broken, problem = seq, f"row {seq} was inserted: the head records {_rows(count_h)}"
            else:  # a gap; rows past a valid head's count are not "missing"
                last = min(seq, count_h) if head_ok else seq
                broken, problem = expected, _missing(expected, last - 1)
            continue
        if head_ok and seq >= count_h:
            broken, problem = seq, f"row {seq} was inserted: the head records {_rows(count_h)}"
            continue
        try:
            sealed = pack([ROW_VERSION, session, seq, kind, body, when, prev])
            good = mac == hasher(sealed, key=key).digest()
        except (TypeError, ValueError, OverflowError):  # a raw writer stored unpackable values
            good = False
        if not good:
            broken, problem = seq, f"row {seq} was edited or reordered"
            continue
        data = decode_body(body)
        if data is None:
            broken, problem = seq, f"row {seq} cannot be decoded"
            continue
        if kind not in KINDS:
            broken, problem = seq, f"row {seq} has unknown kind {kind!r}"
            continue
        trusted.append(Row(session, seq, kind, data, when))
        prev = mac
        expected += 1
    if broken is None:
        if head is None:
            if n:
                broken, problem = n, f"no head record for {_rows(n)}"
        elif not head_ok:
            broken, problem = n, "head record was forged or edited"
        elif n < count_h:
            broken = n
            problem = f"{_missing(n, count_h - 1)}: the head records {_rows(count_h)}"
        elif n and head[1] != prev:  # head_ok, so head is a tuple
            # Both are sealed with the key, yet disagree: the last row is the one in doubt.
            broken, problem = n - 1, f"head record does not match row {n - 1}"
            trusted.pop()
    if problem is not None and hint:
        problem += hint
    report = ChainReport(
        session=session,
        intact=broken is None,
        rows=n,
        first_broken=broken,
        problem=problem,
        head_valid=head_ok or (head is None and n == 0),
        last_halt_seq=last_halt,
    )
    return SessionHistory(tuple(trusted), report, store_problem)


def deleted_session(session: str, hint: str, store_problem: str | None = None) -> SessionHistory:
    """A session the manifest lists as halted, with neither rows nor head left."""
    problem = "the session's rows and head were deleted (the manifest records a halt for it)"
    return SessionHistory((), ChainReport(session, False, 0, 0, problem + hint, False, None),
                          store_problem)


def store_report(key: bytes, present: int, manifest: tuple[Any, ...] | None, list_ok: bool,
                 hint: str, anchor_problem: str | None = None) -> ChainReport | None:
    """The store-level verdict: the manifest against the rows present, and against the anchor
    file (``anchor_problem``: what ``anchor.AnchorFile.verdict`` says of a valid manifest)."""
    valid = manifest is not None and manifest_ok(key, manifest) and list_ok
    if manifest is None:
        problem = f"no manifest record for {_rows(present)}"
    elif not valid:
        problem = "manifest record was forged or edited"
    elif anchor_problem is not None:
        problem = anchor_problem
    else:
        recorded = manifest[0]
        if recorded == present:
            return None
        gap = abs(recorded - present)
        verb = "row is" if gap == 1 else "rows are"
        where = "missing from the store" if recorded > present else "not in the manifest"
        problem = f"{gap} {verb} {where}: the manifest records {_rows(recorded)}"
    return ChainReport("*", False, present, None, problem + hint, valid, None)


def format_reports(reports: list[ChainReport]) -> str:
    """Human-readable verdicts for ``tripwire verify``, one line per report."""
    lines = []
    for r in reports:
        if r.intact:
            lines.append(f"{r.session}: intact ({_rows(r.rows)})")
            continue
        at = f" at row {r.first_broken}" if r.first_broken is not None else ""
        line = f"{r.session}: BROKEN{at}: {r.problem}"
        halt, first = r.last_halt_seq, r.first_broken
        if halt is not None and first is not None and halt >= first:
            # The halt row itself is outside the trusted rows: say the head still knows of it.
            line += f" (the head records a halt at row {halt})"
        lines.append(line)
    return "\n".join(lines)
