"""Durable event log: SQLite rows, msgpack bodies, a keyed BLAKE3 chain per session (SPEC §5).

Trips (halts), operator resets, granted budget and per-session spend are appended here so a
restarted process can fold them forward: a crash must never hand a runaway a fresh budget, and an
agent that can write the database file must not silently delete or forge its own halt. This module
stores rows and says which of them can be trusted; folding rows into live state is restore's job.

Storage. One SQLite file in WAL mode with ``synchronous=FULL``: ``append`` returns only after its
commit is fsync'd, so a crash right after a halt never loses it. ``append`` runs in ``BEGIN
IMMEDIATE`` (read the head, write row + head + manifest, commit), so several processes may share a
file. Tables::

    rows(session, seq, kind, body, time, mac)       body = msgpack of data; seq 0-based per session
    heads(session, count, last_mac, last_halt_seq, mac)
    manifest(id = 1, rows, halted, halted_hash, mac)  store-wide row count, sessions ever halted
    meta(key, value)                                  schema_version, key_check

Integrity. ``mac`` of a row is keyed BLAKE3 over msgpack ``[1, session, seq, kind, body, time,
previous row's mac]`` (32 zero bytes before row 0), so an edited, reordered, inserted or deleted
middle row breaks the chain at its position. The head's MAC covers ``[b"head", session, count,
last_mac, last_halt_seq]``: it catches deletion of the last rows, which the chain alone cannot. The
manifest's MAC covers ``[b"manifest", rows, halted_hash]``: the row count catches a session
deleted whole (rows and head), and ``halted`` (msgpack of the sorted ids of every session that
ever recorded a halt; ids are only added; ``halted_hash`` is its BLAKE3) names such a session
when it had halted. An append reads and MACs only the count and the hash (constant time); the
list itself is read when a session has no rows left, cached per store object by its hash.
Verdicts, as ``ChainReport.problem`` with ``first_broken``:

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
forged, or does not match the number of rows present. With a wrong key every session reports
``row 0 was edited or reordered`` (plus a hint when the file's key check disagrees): never an
exception, so a misconfigured key reads as "untrusted", not as "crash".

``append`` never re-seals evidence: it continues from a valid head (so deleted tail rows stay a
visible gap), never rewrites a missing or forged head, and leaves a missing or forged manifest
alone. A break therefore stays reported until an operator rebuilds the store.

Key. ``key`` argument > ``TRIPWIRE_STORE_KEY`` (an empty value counts as unset) > the documented
default ``blake3(b"tripwire local store", derive_key_context="tripwire 2026 default store key")``.
32 bytes are used as is; a str of 64 hex digits is decoded; any other str (UTF-8) or bytes is a
passphrase run through ``derive_key_context="tripwire 2026 store key from passphrase"``.

Limits.
- The default key is public: it only catches naive edits (``DEFAULT_KEY_NOTICE``). A real key
  must also stay out of the agent's reach: scrub ``TRIPWIRE_STORE_KEY`` from the environment of
  the tools the agent runs, or the agent can forge anything.
- Without an anchor, nothing outside the file vouches for it: replacing the whole file with an
  older copy, or dropping every table, reads as an older or fresh store. With one, a store
  behind its anchor is reported (``"*"``) and restores every session halted.
- The manifest names only sessions that halted; another session deleted whole (its spend, say)
  is caught by the manifest's row count, as is an older head replayed after deleting the rows
  behind it: both are store-level reports, carried on every ``SessionHistory`` as
  ``store_problem`` (restore then halts every session: none can be proven complete).
- ``time`` is the writer's clock: covered by the MAC, but informational only.
- ``histories()`` holds the rows it reads in memory (30,000 rows: a few MB); a store that grows
  without bound needs compaction, which this module does not do.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import sqlite3
import string
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import blake3
import msgpack

from ..base.log import LOGGER
from ..base.money import NANO
from ..errors import StoreError, StoreKeyMismatch, StoreUnreadable

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = [
    "StoreError",
    "StoreUnreadable",
    "StoreKeyMismatch",
    "AnchorEntry",
    "hold_lock",
    "Row",
    "ChainReport",
    "SessionHistory",
    "EventStore",
    "SQLiteStore",
    "open_store",
    "sqlite_error",
    "resolve_key",
    "format_reports",
    "DEFAULT_KEY_NOTICE",
    "KINDS",
    "KEY_ENV",
    "ANCHOR_ENV",
    "SCHEMA_VERSION",
]

#: Row kinds a store accepts (``turn``: the turn in progress of a session with durable turns,
#: ``fold.TurnState``).
KINDS = frozenset({"trip", "reset", "spend", "context", "task", "budget", "outcome", "turn"})
#: Environment variable holding the store key.
KEY_ENV = "TRIPWIRE_STORE_KEY"
#: Environment variable naming the anchor file (see SQLiteStore).
ANCHOR_ENV = "TRIPWIRE_STORE_ANCHOR"
#: Schema this module writes; a file with a newer version is refused, not misread.
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


_ZERO_MAC = bytes(32)  # "previous mac" of row 0
_MAX_DEPTH = 64  # nesting allowed in row data; real rows are flat, this only stops runaway input
_KEY_CHECK = [b"key check"]


@dataclass(frozen=True, slots=True)
class Row:
    """One appended event. ``data`` is a msgpack map: str keys; str, int, float, bool, None, list
    and dict values (tuples come back as lists)."""

    session: str
    seq: int  # 0-based, per session, contiguous
    kind: str  # one of KINDS
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


@dataclass(frozen=True, slots=True)
class AnchorEntry:
    """What the anchor file proves of one session (its rows folded at each append, sealed with
    the key outside the agent's reach): what a restore needs when the store itself cannot be
    read. ``halted``: the standing halts (``watchdog``, ``cost_ceiling:session``,
    ``cost_ceiling:escalation``); ``spend_nano``: the largest spend a writer of its rows saw
    (nano-dollars; exact with one writer at a time, a lower bound under concurrent writers);
    ``tasks``: per task id, its latest ``used`` counters, ``exhausted`` and ``started_at``;
    ``bounds``: its cost ceiling as last recorded (``max_session_usd``, ``max_turn_usd``,
    ``granted_usd``)."""

    halted: tuple[str, ...]
    spend_nano: int
    tasks: dict[str, dict[str, Any]]
    bounds: dict[str, float]


@dataclass(frozen=True, slots=True)
class _Anchor:
    """An anchor file as read: the store it belongs to (``epoch``, drawn when the store was
    made), the manifest's row count and MAC at the last append, and each session's entry."""

    epoch: bytes
    rows: int
    manifest_mac: bytes
    sessions: dict[str, Any]


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


# --- keys -------------------------------------------------------------------------------------


def _derive(material: bytes) -> bytes:
    return blake3.blake3(material, derive_key_context=PASSPHRASE_CONTEXT).digest()


def resolve_key(key: bytes | str | None) -> bytes:
    """The 32-byte store key: ``key`` > ``$TRIPWIRE_STORE_KEY`` > the public default.

    32 bytes are used as is, 64 hex digits are decoded, any other str or bytes is a passphrase
    (BLAKE3 ``derive_key_context``). An empty or non-str/bytes key raises StoreError."""
    return _resolve_key(key)[0]


def _resolve_key(key: bytes | str | None) -> tuple[bytes, str]:
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


# --- encoding and MACs ------------------------------------------------------------------------


def _mac(key: bytes, fields: list[Any]) -> bytes:
    return blake3.blake3(msgpack.packb(fields, use_bin_type=True), key=key).digest()


def _row_mac(
    key: bytes, session: str, seq: int, kind: str, body: bytes, when: float, prev: bytes
) -> bytes:
    return _mac(key, [ROW_VERSION, session, seq, kind, body, when, prev])


def _head_mac(key: bytes, session: str, count: int, last_mac: bytes, halt: int | None) -> bytes:
    return _mac(key, [b"head", session, count, last_mac, halt])


def _manifest_mac(key: bytes, rows: int, halted_hash: bytes) -> bytes:
    return _mac(key, [b"manifest", rows, halted_hash])


def _anchor_mac(key: bytes, rows: int, manifest_mac: bytes) -> bytes:
    return _mac(key, [b"anchor", rows, manifest_mac])  # the first format: no sessions


def _anchor2_mac(key: bytes, epoch: bytes, rows: int, manifest_mac: bytes,
                 sessions: bytes) -> bytes:
    return _mac(key, [_ANCHOR_V2, epoch, rows, manifest_mac, blake3.blake3(sessions).digest()])


_ANCHOR_V2 = b"anchor v2"


def _anchor_update(entry: Any, kind: str, data: Mapping[str, Any]) -> list[Any] | None:
    """A session's anchor entry (``[halted, spend_nano, tasks, bounds]``) after one of its
    rows: the fold of ``restore.fold_history`` reduced to what proves a halt, spend, a task's
    consumption and the ceiling they count against. None when there is nothing to prove (no
    entry is kept)."""
    halted: set[str] = set(entry[0]) if entry else set()
    spend: int = entry[1] if entry else 0
    tasks: dict[str, Any] = dict(entry[2]) if entry else {}
    bounds: dict[str, Any] = dict(entry[3]) if entry and len(entry) > 3 else {}
    for bound in ("max_session_usd", "max_turn_usd", "granted_usd"):
        value = data.get(bound)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                math.isfinite(value) and 0 <= value <= 2**53:
            bounds[bound] = float(value)
    spent = data.get("spent_usd")
    if isinstance(spent, (int, float)) and not isinstance(spent, bool) and \
            math.isfinite(spent) and 0 <= spent <= 2**53:
        spend = max(spend, round(spent * NANO))
    guardrail = data.get("guardrail")
    if kind == "trip" and data.get("halts") is True and isinstance(guardrail, str):
        halted.add(guardrail if guardrail == "watchdog" else f"{guardrail}:{data.get('kind')}")
    elif kind == "reset":
        scope = guardrail if isinstance(guardrail, str) else "all"
        halted = {h for h in halted if scope not in ("all", h.split(":", 1)[0])}
    task = data.get("task")
    if kind in ("task", "budget", "outcome") and isinstance(task, str):
        kept = dict(tasks.get(task, {}))
        for field_ in ("used", "exhausted", "started_at", "outcome"):
            if data.get(field_) is not None:
                kept[field_] = data[field_]
        tasks[task] = kept
    if not halted and not spend and not tasks:
        return None
    return [sorted(halted), spend, tasks, bounds]


def _entry(raw: Any) -> AnchorEntry | None:
    """An anchor entry as stored, checked (the anchor is sealed, but stay total)."""
    if not isinstance(raw, list) or len(raw) != 4:
        return None
    halted, spend, tasks, bounds = raw
    if not isinstance(halted, list) or type(spend) is not int or not isinstance(tasks, dict) \
            or not isinstance(bounds, dict):
        return None
    return AnchorEntry(tuple(h for h in halted if isinstance(h, str)), spend,
                       {t: v for t, v in tasks.items() if isinstance(t, str) and
                        isinstance(v, dict)},
                       {b: float(v) for b, v in bounds.items() if isinstance(b, str) and
                        isinstance(v, (int, float)) and not isinstance(v, bool)})


def hold_lock(path: str, seconds: float, what: str) -> Any:
    """An exclusive ``flock`` on ``path`` (created if missing), waited for at most ``seconds``:
    the open file, whose closing releases it. StoreError naming ``what`` when another process
    holds it longer (a lock wait is never unbounded: a hook must answer within its harness's
    timeout)."""
    handle = open(path, "a")  # noqa: SIM115 - returned: the caller holds it
    deadline = time.monotonic() + seconds
    delay = 0.001
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                handle.close()
                raise StoreError(f"{path}: held by another process: could not {what} within "
                                 f"{seconds:g} s") from None
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.02)


def _list_hash(halted: bytes) -> bytes:
    return blake3.blake3(halted).digest()


_NO_HALTS = msgpack.packb([], use_bin_type=True)


def _head_ok(key: bytes, session: str, head: tuple[Any, ...]) -> bool:
    count, last_mac, halt, mac = head
    # Column types are whatever a raw writer put there: check before trusting any of them.
    if type(count) is not int or not isinstance(last_mac, bytes):
        return False
    if halt is not None and type(halt) is not int:
        return False
    return bool(mac == _head_mac(key, session, count, last_mac, halt))


def _manifest_ok(key: bytes, manifest: tuple[Any, ...]) -> bool:
    """``manifest`` is ``(rows, halted_hash, mac)``."""
    rows, halted_hash, mac = manifest
    return type(rows) is int and isinstance(halted_hash, bytes) and \
        mac == _manifest_mac(key, rows, halted_hash)


def _halted_ids(halted: Any, halted_hash: bytes) -> frozenset[str] | None:
    """The ids of the halted list, or None when it does not match the (MAC'd) hash."""
    if not isinstance(halted, bytes) or _list_hash(halted) != halted_hash:
        return None
    try:
        ids = msgpack.unpackb(halted, raw=False)
    except Exception:  # matching the MAC'd hash, it is ours: stay total all the same
        return None
    return frozenset(s for s in ids if isinstance(s, str)) if isinstance(ids, list) else None


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


def _decode(body: Any) -> dict[str, Any] | None:
    """A row body as a map, or None when it is not one (a broken link, never an exception)."""
    try:
        data = msgpack.unpackb(body, raw=False)
    except Exception:  # untrusted bytes: any decoder failure just means "not a valid row"
        return None
    return data if isinstance(data, dict) else None


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def _missing(first: int, last: int) -> str:
    return f"row {first} is missing" if first == last else f"rows {first}-{last} are missing"


def _verify(
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
        data = _decode(body)
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


def _deleted(session: str, hint: str, store_problem: str | None = None) -> SessionHistory:
    """A session the manifest lists as halted, with neither rows nor head left."""
    problem = "the session's rows and head were deleted (the manifest records a halt for it)"
    return SessionHistory((), ChainReport(session, False, 0, 0, problem + hint, False, None),
                          store_problem)


def _store_report(
    key: bytes, present: int, manifest: tuple[Any, ...] | None, list_ok: bool, hint: str,
    anchor: _Anchor | str | None = None, epoch: bytes = b"",
) -> ChainReport | None:
    """The store-level verdict: the manifest against the rows present, and against the anchor
    file (as sealed there, or a problem with the anchor itself; ``epoch``: the store's)."""
    valid = manifest is not None and _manifest_ok(key, manifest) and list_ok
    if manifest is None:
        problem = f"no manifest record for {_rows(present)}"
    elif not valid:
        problem = "manifest record was forged or edited"
    elif isinstance(anchor, str):
        problem = anchor
    elif anchor is not None and anchor.epoch != epoch:
        problem = ("the store is not the one its anchor records (another store was put in its "
                   "place)")
    elif anchor is not None and (manifest[0] < anchor.rows or (
            manifest[0] == anchor.rows and manifest[2] != anchor.manifest_mac)):
        problem = (f"the store is behind its anchor: the anchor records {_rows(anchor.rows)}, "
                   f"the manifest {_rows(manifest[0])} (an older copy, a rollback or a wipe)")
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


# --- SQLite -----------------------------------------------------------------------------------

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID",
    # WITHOUT ROWID clusters rows by (session, seq): histories() is one sequential scan.
    "CREATE TABLE IF NOT EXISTS rows(session TEXT, seq INTEGER, kind TEXT, body BLOB, time REAL,"
    " mac BLOB, PRIMARY KEY(session, seq)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS heads(session TEXT PRIMARY KEY, count INTEGER, last_mac BLOB,"
    " last_halt_seq INTEGER, mac BLOB) WITHOUT ROWID",
    # halted: msgpack of the sorted ids of every session that ever recorded a halt
    "CREATE TABLE IF NOT EXISTS manifest(id INTEGER PRIMARY KEY CHECK(id = 1), rows INTEGER,"
    " halted BLOB, halted_hash BLOB, mac BLOB)",
)
_TABLES = frozenset({"meta", "rows", "heads", "manifest"})
_ROW_COLUMNS = "session, seq, kind, body, time, mac"


class Tables(Protocol):
    """One backend's reads and writes of the four tables, inside a transaction the backend
    opened (``_ChainedStore._writing`` / ``_reading``). Only SQL lives behind this: every rule
    (where a chain continues, what is sealed, the verdicts) is ``_ChainedStore``'s."""

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


_Store = TypeVar("_Store", bound="_ChainedStore")


class _ChainedStore:
    """What every store backend shares: the key, the append rule (where a chain continues, the
    head and manifest it seals), the verdicts over what was read, the anchor file, and the
    connection's life (held per operation, reopened after a fork or a loss, closed once). A
    backend (SQLite, PostgreSQL) supplies ``_writing`` / ``_reading`` (a transaction over
    ``Tables``), ``_open``, ``_error``, ``_rollback`` and its driver's error type."""

    path: str  # where the store is, as messages name it (a file, a URL without its password)
    read_only: bool
    timeout: float
    key_source: str
    anchor: str | None
    #: other processes run the same sessions on this store (the guardrails then read a
    #: session's history back at each turn start: halts, spend and resets written elsewhere)
    shared: bool = False

    def _init_store(self, key: bytes | str | None, anchor: str | os.PathLike[str] | None, *,
                    timeout: float, read_only: bool, shared: bool) -> None:
        """The settings every backend takes, checked once (a backend then opens its connection
        with ``_open_or_defer``)."""
        if not timeout >= 0:
            raise ValueError(f"timeout must be >= 0 seconds, got {timeout!r}")
        self.timeout = float(timeout)
        self.read_only = read_only
        self.shared = shared
        self._init_chain(key, anchor)
        self._lock = threading.Lock()
        self._pid = os.getpid()

    # the connection's life (a backend supplies _open, _error, _rollback and its error type)

    _conn: Any  # the backend's connection; None: not open yet, lost, or left behind by fork()
    _closed: bool
    _backend_error: type[Exception]  # what the backend's driver raises

    @contextmanager
    def _use(self, doing: str, wait: float | None = None) -> Iterator[Any]:
        """The connection, held by this thread for one operation; a driver error becomes a
        ``StoreError`` saying what could not be done, after the transaction is rolled back."""
        if self._closed:
            raise StoreError(f"{self.path}: the store is closed")
        if os.getpid() != self._pid:
            # A connection must not cross fork(): the child abandons it (closing would touch the
            # parent's locks or socket) and opens its own.
            self._pid, self._lock, self._conn = os.getpid(), threading.Lock(), None
        # another thread's append holds the connection: wait for it no longer than this call may
        if not self._lock.acquire(timeout=self.timeout if wait is None else wait):
            raise StoreError(f"{self.path}: the store is busy in another thread: could not "
                             f"{doing} within {self.timeout if wait is None else wait:g} s")
        try:
            if self._conn is None or self._lost(self._conn):
                self._conn = self._open()  # never opened, or the connection was lost: again
            conn = self._conn
            try:
                yield conn
            except self._backend_error as exc:
                self._rollback(conn)
                raise self._error(exc, doing, wait) from exc
            except BaseException:
                self._rollback(conn)
                raise
        finally:
            self._lock.release()

    def _lost(self, conn: Any) -> bool:
        """Whether the connection was lost (a server's went away; a file's cannot be)."""
        return False

    def integrity_problem(self) -> str | None:
        """The backend's own integrity check of the whole store (``verify`` runs it): its
        complaint, or None. A server database checks its pages itself: None."""
        return None

    def quarantine(self, suffix: str) -> list[str]:
        """Move the store (and its anchor) aside, renamed with ``suffix``; the backend's."""
        raise NotImplementedError

    def _open(self) -> Any:
        raise NotImplementedError

    def _error(self, exc: Exception, doing: str, wait: float | None = None) -> StoreError:
        raise NotImplementedError

    def _rollback(self, conn: Any) -> None:
        raise NotImplementedError

    def _check_version(self, version: Any) -> None:
        """A schema version this tripwire does not know makes the store unreadable (not
        transient: nothing it holds can be read as what it says)."""
        if type(version) is not int or version < 1:
            raise StoreUnreadable(
                f"{self.path}: schema version {version!r} is not a tripwire schema")
        if version > SCHEMA_VERSION:
            raise StoreUnreadable(
                f"{self.path}: schema version {version!r} is newer than this tripwire supports "
                f"({SCHEMA_VERSION}); upgrade tripwire to read it"
            )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            if self._conn is not None and os.getpid() == self._pid:
                with suppress(Exception):  # closing: nothing left to report it to
                    self._conn.close()
            self._conn = None

    def __enter__(self: _Store) -> _Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, key_source={self.key_source!r})"

    def _open_or_defer(self) -> Any:
        """The backend's connection, or None when the store cannot be used yet: construction
        never raises for that, the guardrails keep deciding in memory and retry the store at
        each decision (logged once here)."""
        try:
            return self._open()
        except StoreError as exc:
            if not self.read_only:  # a read-only store decides nothing: its reader reports
                LOGGER.error("store unavailable (%s); guardrails keep deciding in memory "
                             "and retry the store at each decision", exc)
            return None

    def _init_chain(self, key: bytes | str | None, anchor: str | os.PathLike[str] | None) -> None:
        self._key, self.key_source = _resolve_key(key)
        if anchor is None:
            anchor = os.environ.get(ANCHOR_ENV, "").strip() or None
        self.anchor = os.fspath(anchor) if anchor is not None else None
        self._key_check = _mac(self._key, _KEY_CHECK)
        self._key_ok = True  # the store's key check agrees with this key (read at open)
        self._epoch = b""  # the store's epoch (meta, read at open; b"": a store made before it)
        self._halted_cache: tuple[bytes, frozenset[str]] | None = None
        self._anchor_cache: tuple[Any, _Anchor] | None = None
        self._closed = False

    @property
    def key_matches(self) -> bool:
        """Whether this key is the one the store was created with (as far as the store, once
        opened, says: a store that records no key check matches every key)."""
        return self._key_ok

    def _new_epoch(self) -> bytes:
        """A new store's epoch: the anchor names the store it belongs to by it, so a store
        put in another's place (a new file, one moved aside by ``tripwire reset``) is told
        apart from the one anchored."""
        return os.urandom(16)

    # backend hooks

    def _writing(self, wait: float | None) -> AbstractContextManager[Tables]:
        raise NotImplementedError

    def _reading(self) -> AbstractContextManager[Tables]:
        raise NotImplementedError

    def _refuse_foreign_key(self) -> None:
        """Called by ``_writing`` once the store is open: a row sealed with another key breaks
        the chain for good, so refuse it instead."""
        if not self._key_ok:
            raise StoreKeyMismatch(f"{self.path}: this key is not the one the store was "
                                   f"created with (set {KEY_ENV} to the store's key)")

    # EventStore

    def append(self, session: str, kind: str, data: Mapping[str, Any], *,
               wait: float | None = None) -> Row:
        """Append one row; returns once it is durable. ``data["halts"] is True`` marks a
        halt. ``wait`` bounds this call's wait for other writers (default: the store's
        ``timeout``)."""
        _check_session(session)
        if kind not in KINDS:
            raise ValueError(f"unknown row kind {kind!r}; expected one of {sorted(KINDS)}")
        if not isinstance(data, Mapping):
            raise ValueError(f"row data must be a mapping, not {type(data).__name__}")
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only")
        data = dict(data)
        _check_data(data, "data")
        body = msgpack.packb(data, use_bin_type=True)
        halts = data.get("halts") is True
        now = time.time()
        if self.anchor is None:
            with self._writing(wait) as tables:
                seq, _ = self._append(tables, session, kind, body, halts, now)
            return Row(session, seq, kind, msgpack.unpackb(body, raw=False), now)
        # With an anchor, appends take its lock first and hold it until the anchor is
        # rewritten after the commit: the anchor's entries then follow the commits in order
        # (the lock order anchor -> store is the same everywhere, so two appenders never wait
        # for each other in a cycle; a lock file that cannot be made leaves the order to the
        # store's own lock, and the anchor write reports its failure).
        lock = self._anchor_lock(wait)
        try:
            with self._writing(wait) as tables:
                seq, manifest = self._append(tables, session, kind, body, halts, now)
            if manifest is not None:
                self._write_anchor(*manifest, session, kind, data)
        finally:
            if lock is not None:
                lock.close()
        return Row(session, seq, kind, msgpack.unpackb(body, raw=False), now)

    def _anchor_lock(self, wait: float | None) -> Any:
        assert self.anchor is not None
        try:
            return hold_lock(self.anchor + ".lock", self.timeout if wait is None else wait,
                             "append to the store")
        except OSError as exc:
            LOGGER.error("%s: cannot lock the anchor file %s (%s)", self.path, self.anchor, exc)
            return None

    def _append(self, t: Tables, session: str, kind: str, body: bytes, halts: bool,
                now: float) -> tuple[int, tuple[int, bytes] | None]:
        """The append rule, inside the backend's write transaction: (the row's seq, the new
        manifest (rows, mac) if sealed)."""
        key = self._key
        head = t.head(session)
        top = t.top(session)
        free = 0 if top is None else top[0] + 1
        if head is not None and _head_ok(key, session, head):
            # The head, not the rows, says where the chain ends: deleted tail rows stay a gap.
            seq, prev, last_halt, seal = max(head[0], free), head[1], head[2], True
        elif head is None and top is None:
            seq, prev, last_halt, seal = 0, _ZERO_MAC, None, True
        else:
            # Missing or forged head over existing rows: keep the new row, but re-sealing a
            # head would launder whatever was done to the session.
            prev = top[1] if top is not None and isinstance(top[1], bytes) else _ZERO_MAC
            seq, last_halt, seal = free, None, False
        mac = _row_mac(key, session, seq, kind, body, now, prev)
        t.insert_row(session, seq, kind, body, now, mac)
        if seal:
            if halts:
                last_halt = seq
            t.put_head(session, seq + 1, mac, last_halt,
                       _head_mac(key, session, seq + 1, mac, last_halt))
        sealed = None
        manifest = t.manifest()
        if manifest is not None and _manifest_ok(key, manifest):
            # Count on from the recorded value, never recount: a deficit stays visible.
            rows, list_hash = manifest[0] + 1, manifest[1]
            if halts:
                # A session's first halt puts it on the manifest's list for good, so
                # deleting the session whole (rows and head) still reads as hiding a halt.
                ids = self._halted(t, list_hash)
                if ids is not None and session not in ids:
                    halted = msgpack.packb(sorted(ids | {session}), use_bin_type=True)
                    list_hash = _list_hash(halted)
                    t.set_halted(halted, list_hash)
            manifest_mac = _manifest_mac(key, rows, list_hash)
            t.set_manifest(rows, manifest_mac)
            sealed = (rows, manifest_mac)
        return seq, sealed

    # the anchor

    def _write_anchor(self, rows: int, manifest_mac: bytes, session: str, kind: str,
                      data: Mapping[str, Any]) -> None:
        """Seal the manifest's state and the appended row's session entry into the anchor file
        (atomically: a temporary file renamed over it; the caller holds the anchor's lock).
        An anchor that is forged, unreadable or another store's is evidence: left as it is.
        Only a newer state replaces an older one (a writer that bypassed the lock can only
        make the check laxer, never raise a false alarm)."""
        assert self.anchor is not None
        current = self._read_anchor()
        if isinstance(current, str) or (current is not None and (
                current.epoch != self._epoch or current.rows >= rows)):
            return
        sessions = dict(current.sessions) if current is not None else {}
        entry = _anchor_update(sessions.get(session), kind, data)
        if entry is None:
            sessions.pop(session, None)
        else:
            sessions[session] = entry
        packed = msgpack.packb(sessions, use_bin_type=True)
        blob = msgpack.packb([_ANCHOR_V2, self._epoch, rows, manifest_mac, packed,
                              _anchor2_mac(self._key, self._epoch, rows, manifest_mac, packed)],
                             use_bin_type=True)
        tmp = f"{self.anchor}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(blob)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.anchor)
        except OSError as exc:
            with suppress(OSError):
                os.unlink(tmp)
            # the row is durable; only the rollback check lags: say so, do not fail the append
            LOGGER.error("%s: could not write the store's anchor file %s (%s)",
                         self.path, self.anchor, exc)

    def _read_anchor(self) -> _Anchor | str | None:
        """The anchor as sealed; a problem string; None: no anchor (yet). Parsed once per
        version of the file (its inode, size and time)."""
        if self.anchor is None:
            return None
        try:
            with open(self.anchor, "rb") as f:
                st = os.fstat(f.fileno())
                version = (st.st_ino, st.st_size, st.st_mtime_ns)
                cached = self._anchor_cache
                if cached is not None and cached[0] == version:
                    return cached[1]
                blob = f.read()
        except FileNotFoundError:
            return None  # not anchored yet: the first append writes it
        except OSError as exc:
            return f"the anchor file {self.anchor} cannot be read ({exc})"
        anchor = self._parse_anchor(blob)
        if anchor is None:
            return f"the anchor file {self.anchor} was forged or edited"
        self._anchor_cache = (version, anchor)
        return anchor

    def _parse_anchor(self, blob: bytes) -> _Anchor | None:
        key = self._key
        try:
            fields = msgpack.unpackb(blob, raw=False, strict_map_key=False)
            if len(fields) == 3:  # the first format: rows and the manifest's MAC only
                rows, manifest_mac, mac = fields
                if type(rows) is int and isinstance(manifest_mac, bytes) and \
                        mac == _anchor_mac(key, rows, manifest_mac):
                    return _Anchor(b"", rows, manifest_mac, {})
                return None
            tag, epoch, rows, manifest_mac, packed, mac = fields
            if tag != _ANCHOR_V2 or not isinstance(epoch, bytes) or type(rows) is not int or \
                    not isinstance(manifest_mac, bytes) or not isinstance(packed, bytes) or \
                    mac != _anchor2_mac(key, epoch, rows, manifest_mac, packed):
                return None
            sessions = msgpack.unpackb(packed, raw=False)
        except Exception:  # untrusted bytes: any decoder failure means "not our anchor"
            return None
        return _Anchor(epoch, rows, manifest_mac, sessions if isinstance(sessions, dict) else {})

    def anchored(self, session: str) -> AnchorEntry | None:
        """What the anchor proves of ``session`` (None: no anchor, an anchor that cannot be
        trusted, or nothing recorded for it). Read without the store: for a store that cannot
        be read."""
        anchor = self._read_anchor()
        if not isinstance(anchor, _Anchor):
            return None
        return _entry(anchor.sessions.get(session))

    def anchored_sessions(self) -> list[str]:
        """The sessions the anchor has an entry for (sorted; [] without a trusted anchor)."""
        anchor = self._read_anchor()
        if not isinstance(anchor, _Anchor):
            return []
        return sorted(s for s in anchor.sessions if isinstance(s, str))

    @property
    def anchor_problem(self) -> str | None:
        """What is wrong with the anchor file itself (forged, unreadable), or None."""
        anchor = self._read_anchor()
        return anchor if isinstance(anchor, str) else None

    def history(self, session: str) -> SessionHistory:
        """One session's trusted rows and its integrity report."""
        _check_session(session)
        return self._scan([session], store_level=False)[0][session]

    def histories(self, sessions: Iterable[str] | None = None) -> dict[str, SessionHistory]:
        """Histories of ``sessions`` (every session in the store when None), read in one ordered
        query inside one read transaction and verified in one pass."""
        wanted = None
        if sessions is not None:
            wanted = list(dict.fromkeys(sessions))
            for session in wanted:
                _check_session(session)
        return self._scan(wanted, store_level=False)[0]

    def sessions(self) -> list[str]:
        with self._reading() as t:
            found = t.session_ids()
        return sorted(found)

    def verify(self, session: str | None = None) -> list[ChainReport]:
        """Reports for one session, or for every session plus a ``"*"`` report when the manifest
        disagrees with the rows present (only then)."""
        if session is not None:
            return [self.history(session).report]
        problem = self.integrity_problem()
        if problem is not None:
            raise StoreUnreadable(f"{self.path}: unreadable: the database fails its integrity "
                                  f"check ({problem})")
        found, store = self._scan(None, store_level=True)
        reports = [h.report for h in found.values()]
        if store is not None:
            reports.append(store)
        return reports

    @property
    def closed(self) -> bool:
        return self._closed

    # reading

    def _scan(
        self, wanted: list[str] | None, *, store_level: bool
    ) -> tuple[dict[str, SessionHistory], ChainReport | None]:
        key = self._key
        # One read transaction (a snapshot), so a concurrent append can never show up as a
        # head ahead of its rows (a false "missing" verdict).
        with self._reading() as t:
            raw = t.rows(wanted)
            heads = t.heads(wanted)
            present = len(raw) if wanted is None else t.count()
            manifest = t.manifest()
            valid = manifest is not None and _manifest_ok(key, manifest)
            listed = self._halted(t, manifest[1]) if valid else None  # type: ignore[index]
            check = t.key_check()
            epoch = t.epoch()
        hint = ""
        if check is not None and check != self._key_check:
            hint = " (this key is not the one the store was created with)"
        store = _store_report(key, present, manifest, listed is not None, hint,
                              self._read_anchor(), epoch if isinstance(epoch, bytes) else b"")
        store_problem = store.problem if store is not None else None
        head_of = {h[0]: h[1:] for h in heads if isinstance(h[0], str)}
        found: dict[str, SessionHistory] = {}
        for session, group in groupby(raw, key=itemgetter(0)):
            if isinstance(session, str):  # rows a raw writer gave a non-text session fit nowhere
                found[session] = _verify(key, session, group, head_of.get(session), hint,
                                         store_problem)
        for session, head in head_of.items():
            if session not in found:  # a head whose rows are all gone
                found[session] = _verify(key, session, (), head, hint, store_problem)
        for session in listed or ():  # halted once, now without rows or head: deleted whole
            if session not in found and (wanted is None or session in wanted):
                found[session] = _deleted(session, hint, store_problem)
        if wanted is None:
            result = {s: found[s] for s in sorted(found)}
        else:
            result = {s: found.get(s) or _verify(key, s, (), None, hint, store_problem)
                      for s in wanted}
        return result, store if store_level else None

    def _halted(self, t: Tables, list_hash: bytes) -> frozenset[str] | None:
        """The manifest's halted list (None: it does not match its MAC'd hash), read once per
        version: the cache is keyed by the hash the manifest's MAC covers."""
        cached = self._halted_cache
        if cached is not None and cached[0] == list_hash:
            return cached[1]
        ids = _halted_ids(t.halted_blob(), list_hash)
        if ids is not None:
            self._halted_cache = (list_hash, ids)
        return ids


class SQLiteStore(_ChainedStore):
    """The embedded store: one SQLite file, safe to share between processes and threads (a
    forked child opens its own connection on first use). ``timeout`` bounds every wait for
    another writer; past it the call raises StoreError ("locked"). ``append(..., wait=s)``
    bounds one call's wait (a guardrail decision must not wait out another writer's lock).

    Construction never raises for a database it cannot open (corrupt, locked, read-only, a
    directory): the store logs why, every use raises StoreError until it opens, and the
    guardrails keep deciding in memory meanwhile (fail open, loudly). ``check()`` opens it now
    and raises, for callers that want to know at once (the CLI).

    ``read_only=True`` opens an existing tripwire store without writing anything to it (no
    tables created, no WAL switch): a file that is not a tripwire store is refused.

    ``anchor`` (else ``$TRIPWIRE_STORE_ANCHOR``): a file outside the agent's reach, rewritten
    after each append with the manifest's row count and MAC (sealed with the key). A store
    behind its anchor (an older copy, a rolled-back WAL, wiped tables) reads as tampered.
    Worth it with a secret key, which the anchor's seal needs to mean anything.

    ``key_source`` says where the key came from: ``"argument"``, ``"environment"`` or
    ``"default"`` (a writer logs DEFAULT_KEY_NOTICE once for the last).

    ``shared=True``: several processes run the same sessions on this file; each session's
    guardrails read its history back at every turn start (see ``_ChainedStore.shared``).

    ``check=True``: open the file now and raise ``StoreError`` if it cannot be (nothing is
    logged: for a caller that reports it itself, the command line)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        key: bytes | str | None = None,
        timeout: float = 5.0,
        read_only: bool = False,
        anchor: str | os.PathLike[str] | None = None,
        shared: bool = False,
        check: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        self._init_store(key, anchor, timeout=timeout, read_only=read_only, shared=shared)
        self._conn: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file opened
        self._conn = self._open() if check else self._open_or_defer()

    def check(self) -> SQLiteStore:
        """Open the store now (if it is not open yet); StoreError when it cannot be."""
        with self._use("open the store"):
            pass
        return self

    # connection management

    def _open(self) -> sqlite3.Connection:
        if os.path.isdir(self.path):
            raise StoreUnreadable(f"{self.path}: is a directory, not a database file")
        if self.read_only and not os.path.exists(self.path):
            raise StoreError(f"{self.path}: no such store")
        try:
            if self.read_only:
                uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
                db = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None,
                                     check_same_thread=False)
            else:
                db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                                     check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._error(exc, "open the store") from exc
        try:
            db.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            if self.read_only:
                self._check_tripwire(db)
            else:
                self._enter_wal(db)
                db.execute("PRAGMA synchronous = FULL")  # fsync each commit: a halt survives
                self._prepare(db)
            check = db.execute("SELECT value FROM meta WHERE key = 'key_check'").fetchone()
            self._key_ok = check is None or check[0] == self._key_check
            epoch = _SQLiteTables(db).epoch()
            self._epoch = epoch if isinstance(epoch, bytes) else b""
            self._identity = _file_identity(self.path)
        except sqlite3.Error as exc:
            db.close()
            raise self._error(exc, "open the store") from exc
        except StoreError:
            db.close()
            raise
        if self.key_source == "default" and not self.read_only:
            _notice_default_key()
        return db

    def _check_tripwire(self, db: sqlite3.Connection) -> None:
        """A read-only open: the file must already be a tripwire store of a known schema."""
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables >= _TABLES:
            raise StoreError(f"{self.path}: not a tripwire store (no tripwire tables in it)")
        self._check_version(self._schema_version(db))

    def _enter_wal(self, db: sqlite3.Connection) -> None:
        """Switch a new file to WAL. Two processes opening a new file at once collide here, and
        SQLite answers "locked" at once instead of calling the busy handler: retry until the
        timeout like every other lock."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if not _is_locked(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(0.005)

    def _prepare(self, db: sqlite3.Connection) -> None:
        """Create missing tables and check the schema version, writing only when needed."""
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = self._schema_version(db) if "meta" in tables else None
        if not tables >= _TABLES or version is None:
            db.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA:
                    db.execute(statement)
                version = self._schema_version(db)  # another process may have won the race
                if version is None:
                    # A new store: seal an empty manifest. An existing store (meta present) never
                    # gets a fresh one, so deleting the manifest stays visible.
                    version = SCHEMA_VERSION
                    db.executemany(
                        "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                        [("schema_version", SCHEMA_VERSION), ("key_check", self._key_check),
                         ("epoch", self._new_epoch())],
                    )
                    db.execute(
                        "INSERT OR IGNORE INTO manifest VALUES (1, 0, ?, ?, ?)",
                        (_NO_HALTS, _list_hash(_NO_HALTS),
                         _manifest_mac(self._key, 0, _list_hash(_NO_HALTS))),
                    )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        self._check_version(version)

    @staticmethod
    def _schema_version(db: sqlite3.Connection) -> Any:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return None if row is None else row[0]

    _backend_error = sqlite3.Error

    def _error(self, exc: Exception, doing: str, wait: float | None = None) -> StoreError:
        return sqlite_error(self.path, exc, doing, self.timeout if wait is None else wait)

    def integrity_problem(self) -> str | None:
        """``PRAGMA quick_check`` over the whole file (O(its size): ``verify`` runs it, a
        restore does not): its first complaint, or None when the file is sound."""
        with self._use("check the store's integrity") as db:
            found = [r[0] for r in db.execute("PRAGMA quick_check(4)")]
        return None if found == ["ok"] else "; ".join(str(f) for f in found)

    def quarantine(self, suffix: str) -> list[str]:
        """Move the store's file (with its -wal and -shm) and its anchor aside, each renamed
        ``<name>.<suffix>``, and close the store: ``tripwire reset`` on an unreadable store
        keeps it as evidence and starts a new chain. Returns the new paths."""
        if os.path.isdir(self.path) and os.listdir(self.path):
            # an empty directory is what stands in for a store; one with files in it may be
            # an operator's mistyped path: never moved without their eyes on it
            raise StoreError(f"{self.path}: a directory with files in it, not a store: "
                             "tripwire reset does not move it; move it aside yourself")
        self.close()
        moved = []
        for path in (self.path, f"{self.path}-wal", f"{self.path}-shm", self.anchor):
            if path is not None and os.path.lexists(path):
                os.replace(path, f"{path}.{suffix}")
                moved.append(f"{path}.{suffix}")
        return moved

    def _same_file(self) -> None:
        """Appending into a file deleted (or replaced) under us would "succeed" into nothing a
        restart can read: refuse, so the rows stay in the guardrails' outbox, loudly."""
        if self._identity is not None and _file_identity(self.path) != self._identity:
            raise StoreError(f"{self.path}: the database file was deleted or replaced while in "
                             "use; rows are kept in memory (reopen the store to go on)")

    def _rollback(self, db: sqlite3.Connection) -> None:
        if db.in_transaction:
            with suppress(sqlite3.Error):  # the original error is the one worth reporting
                db.execute("ROLLBACK")

    # EventStore

    # transactions (the rules over them are _ChainedStore's)

    @contextmanager
    def _writing(self, wait: float | None) -> Iterator[Tables]:
        """``BEGIN IMMEDIATE`` (read the head, write row + head + manifest, commit): committed,
        fsync'd, checkpointed into the main file when this returns."""
        with self._use("append to the store", wait) as db:
            self._refuse_foreign_key()
            self._same_file()
            if wait is not None:
                db.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
            try:
                db.execute("BEGIN IMMEDIATE")
                yield _SQLiteTables(db)
                db.execute("COMMIT")
            finally:
                if wait is not None:
                    db.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            # Move the commit from the WAL into the main file, so deleting the -wal file cannot
            # roll it back (PASSIVE: never waits; a reader holding an old snapshot may leave
            # frames behind, which the anchor still catches).
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    @contextmanager
    def _reading(self) -> Iterator[Tables]:
        with self._use("read the store") as db:
            db.execute("BEGIN")  # WAL gives the read transaction a snapshot
            yield _SQLiteTables(db)
            db.execute("COMMIT")


class _SQLiteTables:
    """``Tables`` over one SQLite connection. Column types are whatever a raw writer put there
    (SQLite is dynamically typed): the queries skip what cannot be ours."""

    __slots__ = ("db",)

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def head(self, session: str) -> tuple[Any, ...] | None:
        found: tuple[Any, ...] | None = self.db.execute(
            "SELECT count, last_mac, last_halt_seq, mac FROM heads WHERE session = ?",
            (session,)).fetchone()
        return found

    def top(self, session: str) -> tuple[Any, ...] | None:
        found: tuple[Any, ...] | None = self.db.execute(
            "SELECT seq, mac FROM rows WHERE session = ? AND typeof(seq) = 'integer'"
            " ORDER BY seq DESC LIMIT 1", (session,)).fetchone()
        return found

    def insert_row(self, session: str, seq: int, kind: str, body: bytes, when: float,
                   mac: bytes) -> None:
        self.db.execute(f"INSERT INTO rows ({_ROW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                        (session, seq, kind, body, when, mac))

    def put_head(self, session: str, count: int, last_mac: bytes, halt: int | None,
                 mac: bytes) -> None:
        self.db.execute("INSERT OR REPLACE INTO heads VALUES (?, ?, ?, ?, ?)",
                        (session, count, last_mac, halt, mac))

    def manifest(self) -> tuple[Any, ...] | None:
        found: tuple[Any, ...] | None = self.db.execute(
            "SELECT rows, halted_hash, mac FROM manifest WHERE id = 1").fetchone()
        return found

    def halted_blob(self) -> Any:
        row = self.db.execute("SELECT halted FROM manifest WHERE id = 1").fetchone()
        return row[0] if row is not None else None

    def set_halted(self, halted: bytes, halted_hash: bytes) -> None:
        self.db.execute("UPDATE manifest SET halted = ?, halted_hash = ? WHERE id = 1",
                        (halted, halted_hash))

    def set_manifest(self, rows: int, mac: bytes) -> None:
        self.db.execute("UPDATE manifest SET rows = ?, mac = ? WHERE id = 1", (rows, mac))

    def rows(self, wanted: list[str] | None) -> list[tuple[Any, ...]]:
        if wanted is None:
            return self.db.execute(f"SELECT {_ROW_COLUMNS} FROM rows ORDER BY session, seq"
                                   ).fetchall()
        return self.db.execute(
            f"SELECT {_ROW_COLUMNS} FROM rows WHERE session IN"
            " (SELECT value FROM json_each(?)) ORDER BY session, seq",
            (json.dumps(wanted),)).fetchall()

    def heads(self, wanted: list[str] | None) -> list[tuple[Any, ...]]:
        if wanted is None:
            return self.db.execute(
                "SELECT session, count, last_mac, last_halt_seq, mac FROM heads").fetchall()
        return self.db.execute(
            "SELECT session, count, last_mac, last_halt_seq, mac FROM heads WHERE session"
            " IN (SELECT value FROM json_each(?))", (json.dumps(wanted),)).fetchall()

    def count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM rows").fetchone()[0])

    def key_check(self) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'key_check'").fetchone()
        return None if row is None else row[0]

    def epoch(self) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'epoch'").fetchone()
        return None if row is None else row[0]

    def session_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute(
            "SELECT session FROM rows WHERE typeof(session) = 'text'"
            " UNION SELECT session FROM heads WHERE typeof(session) = 'text'")]


def open_store(location: str | os.PathLike[str], **options: Any) -> SQLiteStore | PostgresStore:
    """The store at ``location``: a ``postgresql://`` (or ``postgres://``) URL opens a
    ``PostgresStore`` (``tripwire[postgres]``), anything else is a SQLite file. ``options`` go to
    the store's constructor (key, timeout, read_only, anchor)."""
    where = os.fspath(location)
    if where.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(where, **options)
    return SQLiteStore(where, **options)


def _file_identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


_noticed = False


def _notice_default_key() -> None:
    """Say once per process that the store's seal is the public default key."""
    global _noticed
    if not _noticed:
        _noticed = True
        LOGGER.warning("%s", DEFAULT_KEY_NOTICE)


#: SQLite's result codes of a file that fails its own integrity: SQLITE_CORRUPT (a page
#: overwritten, a truncated file) and SQLITE_NOTADB (the header is not SQLite's)
_UNREADABLE_CODES = (11, 26)


def sqlite_error(path: str, exc: Exception, doing: str, waited: float) -> StoreError:
    """A SQLite failure as tripwire's error, the one classification for every connection to a
    store file (the store's, the hooks'): locked or busy (transient: past ``waited`` seconds),
    corrupt (``StoreUnreadable``: not transient), anything else (transient: a full disk, I/O)."""
    if _is_locked(exc):
        return StoreError(f"{path}: database is locked: could not {doing} within {waited:g} s")
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    text = str(exc)
    if code == 26 or "not a database" in text:
        return StoreUnreadable(f"{path}: unreadable: the file is not a SQLite database (its "
                               "header was overwritten, or it was never one)")
    if code in _UNREADABLE_CODES or "database disk image is malformed" in text:
        return StoreUnreadable(f"{path}: unreadable: the database is corrupt ({text})")
    return StoreError(f"{path}: cannot {doing}: {text}")


def _is_locked(exc: Exception) -> bool:
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    return code in (5, 6) or "locked" in str(exc)  # SQLITE_BUSY, SQLITE_LOCKED


def _check_session(session: Any) -> None:
    if not isinstance(session, str) or not session:
        raise ValueError(f"session must be a non-empty str, got {session!r}")
    if session == "*":
        raise ValueError('session "*" is reserved for store-level reports')
