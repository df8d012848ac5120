"""The anchor file: what vouches for a store from outside it (SPEC §5).

A file outside the agent's reach (``anchor=`` or ``$TRIPWIRE_STORE_ANCHOR``), rewritten after
each append with the store's epoch (drawn when the store was made), the manifest's row count and
MAC, and, per session, what its rows prove (``AnchorEntry``: its standing halts, its spend, its
tasks' consumption, its cost bounds), all sealed with the store's key. A store behind its anchor
(an older copy, a rolled-back WAL, wiped tables) or another store put in its place reads as
tampered (``AnchorFile.verdict``); a store that cannot be read at all restores what its anchor
proves. Appends hold the anchor's lock (``hold_lock``) from before their transaction until the
anchor is rewritten, so its entries follow the commits in order.

Format: msgpack ``[b"anchor v2", epoch, rows, manifest_mac, sessions, mac]`` with ``sessions`` the
msgpack map ``{session: [halted, spend_nano, tasks, bounds]}`` and ``mac`` keyed BLAKE3 over
``[b"anchor v2", epoch, rows, manifest_mac, blake3(sessions)]``; the first format,
``[rows, manifest_mac, mac]``, is still read (no epoch, no sessions).
"""

from __future__ import annotations

import fcntl
import math
import os
import threading
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import blake3
import msgpack

from ..base.files import NotRead, read_whole
from ..base.log import LOGGER
from ..base.money import NANO
from ..errors import StoreError
from .chain import seal
from .reset import OperatorReset
from .rows import (
    BudgetRow,
    CheckInRow,
    OutcomeRow,
    RaiseRow,
    ResetRow,
    TaskRow,
    TripRow,
    parse,
    spend_of,
)

__all__ = ["AnchorEntry", "AnchorFile", "hold_lock", "ANCHOR_ENV"]

#: Environment variable naming the anchor file.
ANCHOR_ENV = "TRIPWIRE_STORE_ANCHOR"

_ANCHOR_V2 = b"anchor v2"
#: Bytes an anchor file may hold (an entry per session with rows to prove: some hundred bytes
#: each); a file over it is not one this store wrote.
MAX_ANCHOR = 256 << 20


@dataclass(frozen=True, slots=True)
class AnchorEntry:
    """What the anchor file proves of one session (its rows folded at each append, sealed with
    the key outside the agent's reach): what a restore needs when the store itself cannot be
    read. ``halted``: the standing halts (``watchdog``, ``cost_ceiling:session``,
    ``cost_ceiling:escalation``); ``spend_nano``: the largest spend a writer of its rows saw
    (nano-dollars; exact with one writer at a time, a lower bound under concurrent writers);
    ``tasks``: per task id, its latest ``used`` counters, ``exhausted`` and ``started_at``,
    its ``raised`` caps and last check-in ``window`` (a raise or check-in that continued it
    lifts the exhaustion and outcome it had); ``bounds``: its cost ceiling as last recorded
    (``max_session_usd``, ``max_turn_usd``, ``granted_usd``)."""

    halted: tuple[str, ...]
    spend_nano: int
    tasks: dict[str, dict[str, Any]]
    bounds: dict[str, float]


@dataclass(frozen=True, slots=True)
class _Anchor:
    """An anchor file as read: the store it belongs to (``epoch``), the manifest's row count
    and MAC at the last append, and each session's entry (as stored: see ``_entry``)."""

    epoch: bytes
    rows: int
    manifest_mac: bytes
    sessions: dict[str, Any]


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


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


class AnchorFile:
    """One store's anchor file (``path``), sealed with the store's ``key``: read (parsed once
    per version of the file), checked against the store, rewritten after an append."""

    __slots__ = ("_cache", "_key", "path")

    def __init__(self, path: str, key: bytes):
        self.path = path
        self._key = key
        self._cache: tuple[Any, _Anchor] | None = None

    def lock(self, seconds: float, store: str) -> Any:
        """The anchor's lock, held from before an append's transaction until the anchor is
        rewritten (the open lock file; None when it cannot be made: the order is then left to
        the store's own lock, and the anchor write reports its failure). ``store`` names the
        store in a failure's log line."""
        try:
            return hold_lock(self.path + ".lock", seconds, "append to the store")
        except OSError as exc:
            LOGGER.error("%s: cannot lock the anchor file %s (%s)", store, self.path, exc)
            return None

    def read(self) -> _Anchor | str | None:
        """The anchor as sealed; a problem string; None: no anchor (yet). Parsed once per
        version of the file (its inode, size and time)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None  # not anchored yet: the first append writes it
        except OSError as exc:
            return f"the anchor file {self.path} cannot be read ({exc})"
        version = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._cache
        if cached is not None and cached[0] == version:
            return cached[1]
        try:  # bounded: a FIFO, a device or a sparse giant in its place is a problem, not a hang
            blob = read_whole(self.path, MAX_ANCHOR)
        except NotRead as exc:
            return f"the anchor file {self.path} cannot be read ({exc.reason})"
        anchor = self._parse(blob)
        if anchor is None:
            return f"the anchor file {self.path} was forged or edited"
        self._cache = (version, anchor)
        return anchor

    def _parse(self, blob: bytes) -> _Anchor | None:
        key = self._key
        try:
            fields = msgpack.unpackb(blob, raw=False, strict_map_key=False)
            if len(fields) == 3:  # the first format: rows and the manifest's MAC only
                rows, manifest_mac, mac = fields
                if type(rows) is int and isinstance(manifest_mac, bytes) and \
                        mac == seal(key, [b"anchor", rows, manifest_mac]):
                    return _Anchor(b"", rows, manifest_mac, {})
                return None
            tag, epoch, rows, manifest_mac, packed, mac = fields
            if tag != _ANCHOR_V2 or not isinstance(epoch, bytes) or type(rows) is not int or \
                    not isinstance(manifest_mac, bytes) or not isinstance(packed, bytes) or \
                    mac != _v2_mac(key, epoch, rows, manifest_mac, packed):
                return None
            sessions = msgpack.unpackb(packed, raw=False)
        except Exception:  # untrusted bytes: any decoder failure means "not our anchor"
            return None
        return _Anchor(epoch, rows, manifest_mac, sessions if isinstance(sessions, dict) else {})

    def verdict(self, manifest: tuple[Any, ...], epoch: bytes) -> str | None:
        """What is wrong with a store whose (valid) manifest is ``(rows, halted_hash, mac)`` and
        whose epoch is ``epoch``, as this anchor sees it; None when nothing is."""
        anchor = self.read()
        if isinstance(anchor, str):
            return anchor
        if anchor is None:
            return None
        if anchor.epoch != epoch:
            return ("the store is not the one its anchor records (another store was put in its "
                    "place)")
        if manifest[0] < anchor.rows or (manifest[0] == anchor.rows and
                                         manifest[2] != anchor.manifest_mac):
            return (f"the store is behind its anchor: the anchor records {_rows(anchor.rows)}, "
                    f"the manifest {_rows(manifest[0])} (an older copy, a rollback or a wipe)")
        return None

    def write(self, epoch: bytes, rows: int, manifest_mac: bytes, session: str, kind: str,
              data: Mapping[str, Any], store: str) -> None:
        """Seal the manifest's state and the appended row's session entry into the anchor file
        (atomically: a temporary file renamed over it; the caller holds the anchor's lock).
        An anchor that is forged, unreadable or another store's is evidence: left as it is.
        Only a newer state replaces an older one (a writer that bypassed the lock can only
        make the check laxer, never raise a false alarm). ``store`` names the store in a
        failure's log line."""
        current = self.read()
        if isinstance(current, str) or (current is not None and (
                current.epoch != epoch or current.rows >= rows)):
            return
        sessions = dict(current.sessions) if current is not None else {}
        entry = _updated(sessions.get(session), kind, data)
        if entry is None:
            sessions.pop(session, None)
        else:
            sessions[session] = entry
        packed = msgpack.packb(sessions, use_bin_type=True)
        blob = msgpack.packb([_ANCHOR_V2, epoch, rows, manifest_mac, packed,
                              _v2_mac(self._key, epoch, rows, manifest_mac, packed)],
                             use_bin_type=True)
        tmp = f"{self.path}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(blob)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            # what this process wrote is the anchor's latest version: cached now, so that a
            # later file of the same inode number, size and (coarse) time is never read as
            # an older one's parse, which let a write drop the entries in between
            st = os.stat(self.path)
            self._cache = ((st.st_ino, st.st_size, st.st_mtime_ns),
                           _Anchor(epoch, rows, manifest_mac,
                                   msgpack.unpackb(packed, raw=False)))  # as read
        except OSError as exc:
            with suppress(OSError):
                os.unlink(tmp)
            # the row is durable; only the rollback check lags: say so, do not fail the append
            LOGGER.error("%s: could not write the store's anchor file %s (%s)",
                         store, self.path, exc)

    def entry(self, session: str) -> AnchorEntry | None:
        """What the anchor proves of ``session`` (None: no anchor, an anchor that cannot be
        trusted, or nothing recorded for it)."""
        anchor = self.read()
        if not isinstance(anchor, _Anchor):
            return None
        return _entry(anchor.sessions.get(session))

    def sessions(self) -> list[str]:
        """The sessions the anchor has an entry for (sorted; [] without a trusted anchor)."""
        anchor = self.read()
        if not isinstance(anchor, _Anchor):
            return []
        return sorted(s for s in anchor.sessions if isinstance(s, str))

    @property
    def problem(self) -> str | None:
        """What is wrong with the anchor file itself (forged, unreadable), or None."""
        anchor = self.read()
        return anchor if isinstance(anchor, str) else None


def _v2_mac(key: bytes, epoch: bytes, rows: int, manifest_mac: bytes, sessions: bytes) -> bytes:
    return seal(key, [_ANCHOR_V2, epoch, rows, manifest_mac, blake3.blake3(sessions).digest()])


def _updated(entry: Any, kind: str, data: Mapping[str, Any]) -> list[Any] | None:
    """A session's anchor entry (``[halted, spend_nano, tasks, bounds]``) after one of its
    rows: the fold of ``fold.fold_history`` reduced to what proves a halt, spend, a task's
    consumption and the ceiling they count against. None when there is nothing to prove (no
    entry is kept)."""
    halted: set[str] = set(entry[0]) if entry else set()
    spend: int = entry[1] if entry else 0
    tasks: dict[str, Any] = dict(entry[2]) if entry else {}
    bounds: dict[str, Any] = dict(entry[3]) if entry and len(entry) > 3 else {}
    row = parse(kind, data)
    carried = spend_of(row)
    for bound, value in (("max_session_usd", carried.max_session_usd),
                         ("max_turn_usd", carried.max_turn_usd),
                         ("granted_usd", carried.granted_usd)):
        if _provable(value):
            bounds[bound] = float(value)  # type: ignore[arg-type]
    if _provable(carried.spent_usd):
        spend = max(spend, round(carried.spent_usd * NANO))  # type: ignore[operator]
    if isinstance(row, TripRow):
        if row.halts and row.guardrail is not None:
            halted.add(row.guardrail if row.guardrail == "watchdog" else
                       f"{row.guardrail}:{row.kind}")
    elif isinstance(row, ResetRow):
        reset = OperatorReset.from_row(row)
        if reset is not None:  # as the fold: a row this version cannot read resets nothing
            halted = {h for h in halted if not reset.clears(h.split(":", 1)[0])}
    elif isinstance(row, RaiseRow | CheckInRow) and row.task is not None:
        tasks[row.task] = _resumed(dict(tasks.get(row.task, {})), row)
    elif isinstance(row, TaskRow | BudgetRow | OutcomeRow) and row.task is not None:
        kept = dict(tasks.get(row.task, {}))
        proven: tuple[tuple[str, Any], ...]
        if isinstance(row, BudgetRow):
            proven = (("used", row.used), ("exhausted", row.exhausted),
                      ("started_at", row.started_at))
        elif isinstance(row, TaskRow):
            proven = (("started_at", row.started_at),)
        else:
            proven = (("outcome", row.outcome),)
        for field_, proof in proven:
            if proof is not None:
                kept[field_] = proof
        tasks[row.task] = kept
    if not halted and not spend and not tasks:
        return None
    return [sorted(halted), spend, tasks, bounds]


def _resumed(kept: dict[str, Any], row: RaiseRow | CheckInRow) -> dict[str, Any]:
    """A task's anchored state after a raise (its raised cap, ``raised``: counter -> cap as
    the task counts it) or a check-in (its window, ``window``); the exhaustion either
    continued is no longer proven, nor the outcome it ended in."""
    if isinstance(row, RaiseRow):
        if row.counter is not None and row.cap is not None:
            raised = dict(kept.get("raised") or {})
            raised[row.counter] = max(raised.get(row.counter, 0), row.cap)
            kept["raised"] = raised
    elif row.window:
        kept["window"] = {**(kept.get("window") or {}), **row.window}
    exhausted = kept.get("exhausted")
    if row.resumed is not None and isinstance(exhausted, dict) and \
            exhausted.get("counter") == row.resumed:
        kept.pop("exhausted")
        kept.pop("outcome", None)
    return kept


def _provable(value: float | None) -> bool:
    """A dollar amount an anchor keeps: finite, from 0 to 2**53."""
    return value is not None and math.isfinite(value) and 0 <= value <= 2**53


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
