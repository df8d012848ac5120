"""One pass per session: the engine's statistics and the first trip of every signal.

Each session runs through ``Guardrails`` in warn mode with no cost ceilings — replay's view of
a recording, so every event is observed and an alert names the event that made it trip, exactly
as ``tripwire replay`` reports it — with the engine's statistics mode on, through a fleet's
batch path.

Files are the unit of work: ``measure_paths`` runs them serially, in ``jobs`` processes, or on a
Dask cluster, and always returns the sessions in the same order (the arguments', then sorted
paths, then each file's own order), so the three give identical results.

The result is columnar (``Measured``: numpy arrays of event counts, statistics and first trips,
one row per session): a worker process returns one set of columns per chunk of files, not one
Python object per session, and the parent only concatenates them and puts the rows back in file
order. Chunks are cut largest file first, each a share of the bytes still to hand out (guided
scheduling: large chunks first, small ones last), so the workers finish together; the pool
starts once per run (fork where the platform has it, so the workers inherit the imported
modules and the file list) and each worker resolves the config once. In a parallel run the
parent only walks a directory argument: its files' formats are detected by the workers, which
skip what is of no known format (``Run``).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from ..base.decision import Decision
from ..base.log import LOGGER
from ..context.config import ContextConfig
from ..errors import ConfigError
from ..fleet.fleet import Fleet, batch_row
from ..interchange.adapters import Transcript, detected
from ..interchange.events import Retry, StopAttempt, TaskEnd, TaskStart
from ..session.guardrails import GuardrailsConfig, ResolvedConfig
from ..signals import SIGNAL_IDS, WatchdogConfig
from .sessions import corpus_files, empty_directory, session_events

if TYPE_CHECKING:  # numpy is the corpus extra's: imported where the columns are built
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["SessionResult", "Measured", "measure_paths", "measure_chunk", "schedule",
           "thresholds", "threshold_knob", "corpus_config"]

#: a first-trip column's value for "never tripped"
NEVER = -1


@dataclass(frozen=True)
class SessionResult:
    """One session: its corpus (the path argument it came from), its name, its event count,
    per signal (SPEC §1 order) the peak statistic and the first tripping event (or None)."""

    corpus: str
    session: str
    events: int
    stats: tuple[int, ...]
    first_trip: tuple[int | None, ...]

    def record(self) -> dict[str, Any]:
        """The ``--json`` line of this session."""
        return {
            "kind": "session",
            "session": self.session,
            "events": self.events,
            "stats": dict(zip(SIGNAL_IDS, self.stats, strict=True)),
            "first_trip": dict(zip(SIGNAL_IDS, self.first_trip, strict=True)),
        }


#: The knob a signal's statistic is compared with, where it is not ``threshold``: the cycle
#: counts laps, compaction-storm's statistic is its run since a turn ended in agent text.
_STATISTIC_KNOB = {"alternating-tool-cycle": "cycles", "compaction-storm": "in_a_row"}


def threshold_knob(signal: str) -> str:
    """The knob a signal's statistic is compared with."""
    return _STATISTIC_KNOB.get(signal, "threshold")


def thresholds(config: WatchdogConfig) -> tuple[int, ...]:
    """Per signal, the resolved (clamped) value its statistic is compared with."""
    s = config.engine_settings()
    return (s.repeat_threshold, s.cycle_cycles, s.density_threshold, s.name_threshold,
            s.failure_threshold, s.no_op_threshold, s.no_new_state_threshold,
            s.silence_threshold, s.repeated_failure_threshold, s.recycled_threshold,
            s.unknown_tool_threshold, s.repeated_text_threshold, s.empty_responses_threshold,
            # compaction-storm's statistic is its run (a turn's count is never above it); its
            # per-turn rule trips earlier, which the first-trip column shows
            s.compaction_in_a_row, s.persistent_warnings_threshold, s.looping_text_threshold)


def corpus_config(watchdog: WatchdogConfig) -> GuardrailsConfig:
    """Replay's analysis policy: warn mode, no cost ceilings, every event observed. The
    context guard is off: in warn mode it never cuts (every event is observed either way)
    and no statistic is of it, so it would only cost each session its model lookups."""
    return GuardrailsConfig(watchdog=watchdog, mode="warn", unattended=False,
                            context=ContextConfig(enabled=False))


#: the last watchdog config and its resolved corpus config: every file of a run (and of a
#: worker process's share of it) has the same one, resolved once
_RESOLVED: list[tuple[WatchdogConfig, ResolvedConfig]] = []


def _resolved(watchdog: WatchdogConfig) -> ResolvedConfig:
    if not _RESOLVED or _RESOLVED[0][0] != watchdog:
        _RESOLVED[:] = [(watchdog, corpus_config(watchdog).resolve())]
    return _RESOLVED[0][1]


_INDEX = {signal: i for i, signal in enumerate(SIGNAL_IDS)}
_WIDTH = len(SIGNAL_IDS)


# --------------------------------------------------------------------------------------------
# Columns: what a chunk of files (or a whole run) measured


@dataclass(frozen=True)
class Columns:
    """The sessions of some files, one row each: the file they came from (its index in the
    run), their names, event counts, statistics and first trips (``NEVER``: no trip). Rows of
    one file are in the file's order; a chunk's files may be in any order. ``skipped``: the
    files (indices) that detection found of no known format, which have no rows."""

    files: NDArray[np.int64]
    names: list[str]
    events: NDArray[np.int64]
    stats: NDArray[np.int64]  # (rows, signals)
    first_trip: NDArray[np.int64]  # (rows, signals)
    skipped: tuple[int, ...] = ()


class _Builder:
    """Per-session values appended as plain Python ints, made arrays once per chunk."""

    def __init__(self) -> None:
        self.files: list[int] = []
        self.names: list[str] = []
        self.events: list[int] = []
        self.stats: list[int] = []
        self.first: list[int] = []
        self.skipped: list[int] = []

    def columns(self) -> Columns:
        import numpy as np

        return Columns(np.array(self.files, dtype=np.int64), self.names,
                       np.array(self.events, dtype=np.int64),
                       np.array(self.stats, dtype=np.int64).reshape(-1, _WIDTH),
                       np.array(self.first, dtype=np.int64).reshape(-1, _WIDTH),
                       tuple(self.skipped))


#: a task's start and end and stop attempts: the host's events, which charge a task (a corpus
#: run caps none) and move no signal (a retry moves the call-pattern signals: observed apart)
_HOST_EVENTS = (TaskStart, TaskEnd, StopAttempt)


class _Quiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


def _measure_file(out: _Builder, file: int, transcript: Transcript, resolved: ResolvedConfig,
                  implementation: str | None) -> None:
    """Every session of one transcript, in the order they first appear, appended to ``out``.
    The transcript's events go through one fleet's batch path (``Fleet.observe_many``:
    detection without the GIL, policy in Python only where a signal fires), which decides
    exactly as the guardrails' one-event methods do."""
    fleet = Fleet(resolved, implementation=implementation)
    rows: list[tuple[Any, ...]] = []
    position: list[int] = []  # each row's event index within its session
    counts: dict[str, int] = {}
    first: dict[str, list[int]] = {}

    def observe_rows() -> None:
        for row, name, outcome in fleet.observe_many(rows) if rows else ():
            if type(outcome) is Decision and outcome.alerts:
                trips = first[name]
                for alert in outcome.alerts:
                    i = _INDEX[alert.signal]
                    if trips[i] == NEVER:
                        trips[i] = position[row]
        rows.clear()
        position.clear()

    for name, event in session_events(transcript):
        index = counts.get(name)
        if index is None:
            index = 0
            first[name] = [NEVER] * _WIDTH
            engine = fleet.session(name).watchdog  # None: every signal is off
            if engine is not None:
                engine.enable_stats()
        counts[name] = index + 1
        if isinstance(event, Retry):
            # a retry takes the replaced attempt's calls back (no alert): the rows before it
            # are observed first, as replay observes them
            observe_rows()
            fleet.session(name).on_retry(event.reason, event.calls)
            continue
        if isinstance(event, _HOST_EVENTS):
            continue  # an event (positions count it, as replay's do), not a batch row
        rows.append(batch_row(name, event))
        position.append(index)
    observe_rows()
    for name, events in counts.items():
        engine = fleet.session(name).watchdog
        stats = engine.stats if engine is not None else None
        out.files.append(file)
        out.names.append(name)
        out.events.append(events)
        out.stats.extend(stats if stats is not None else (0,) * _WIDTH)
        out.first.extend(first[name])


class ChunkError(Exception):
    """A file of a chunk failed: which one (its index in the run) and the error it raised,
    so that the run raises the error of its first failing file, as a serial run does."""

    def __init__(self, file: int, error: BaseException) -> None:
        super().__init__(file, error)
        self.file = file
        self.error = error


def measure_chunk(watchdog: WatchdogConfig, implementation: str | None,
                  files: Sequence[tuple[int, Transcript]],
                  done: Callable[[], object] | None = None) -> Columns:
    """The sessions of a chunk of files (``(index in the run, transcript)``), the unit of
    parallel work: a picklable task in, columns out. Files are measured in index order, so
    the first one that fails is the chunk's lowest failing index (``ChunkError``). A file
    listed undetected is detected here (one decode, handed to its reader) and skipped if it
    is of no known format. ``done`` is called after each file (a progress bar)."""
    quiet = _Quiet()
    LOGGER.addFilter(quiet)  # the per-alert operator lines: a corpus pass reports in bulk
    try:
        resolved = _resolved(watchdog)
        out = _Builder()
        for file, transcript in sorted(files, key=lambda f: f[0]):
            try:
                found = detected(transcript)
                if found is None:
                    out.skipped.append(file)
                else:
                    _measure_file(out, file, found, resolved, implementation)
            except Exception as exc:
                raise ChunkError(file, exc) from None
            if done is not None:
                done()
        return out.columns()
    finally:
        LOGGER.removeFilter(quiet)


# --------------------------------------------------------------------------------------------
# The merged result


class Measured(Sequence[SessionResult]):
    """Every session of a run, in file order, as columns (numpy) — and, indexed or iterated,
    as ``SessionResult`` rows. ``corpus`` is each row's corpus (path argument), ``paths`` each
    row's file (the report links a session to it)."""

    def __init__(self, corpus: list[str], columns: Columns,
                 paths: list[str] | None = None) -> None:
        self.corpus = corpus
        self.paths = paths if paths is not None else [""] * len(columns.names)
        self.sessions = columns.names
        self.events = columns.events
        self.stats = columns.stats
        self.first_trip = columns.first_trip

    def __len__(self) -> int:
        return len(self.sessions)

    @overload
    def __getitem__(self, i: int) -> SessionResult: ...
    @overload
    def __getitem__(self, i: slice) -> list[SessionResult]: ...
    def __getitem__(self, i: int | slice) -> SessionResult | list[SessionResult]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._row(i, self.stats[i].tolist(), self.first_trip[i].tolist())

    def _row(self, i: int, stats: list[int], first: list[int]) -> SessionResult:
        return SessionResult(self.corpus[i], self.sessions[i], int(self.events[i]),
                             tuple(stats), tuple(None if t == NEVER else t for t in first))

    def __iter__(self) -> Iterator[SessionResult]:
        stats, first = self.stats.tolist(), self.first_trip.tolist()  # one conversion each
        for i in range(len(self)):
            yield self._row(i, stats[i], first[i])

    def corpora(self) -> list[str]:
        """The corpora with a session, in order of their first session."""
        return list(dict.fromkeys(self.corpus))

    def of_corpus(self, name: str) -> Measured:
        """The rows of one corpus (in order)."""
        import numpy as np

        rows = np.flatnonzero(np.array([c == name for c in self.corpus], dtype=bool))
        return Measured([name] * len(rows), Columns(
            rows, [self.sessions[i] for i in rows.tolist()], self.events[rows],
            self.stats[rows], self.first_trip[rows]), [self.paths[i] for i in rows.tolist()])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Measured):
            return NotImplemented
        import numpy as np

        return (self.corpus == other.corpus and self.sessions == other.sessions
                and np.array_equal(self.events, other.events)
                and np.array_equal(self.stats, other.stats)
                and np.array_equal(self.first_trip, other.first_trip))

    __hash__ = None  # type: ignore[assignment]  # mutable arrays: not hashable

    def __repr__(self) -> str:
        return f"<Measured: {len(self)} sessions from {len(self.corpora())} corpora>"


def _merge(work: Sequence[tuple[str, Transcript]], chunks: Sequence[Columns]) -> Measured:
    """The chunks' rows in file order (a stable sort on the file index keeps each file's own
    order), each with the corpus of its file."""
    import numpy as np

    if not chunks:
        empty = np.zeros(0, dtype=np.int64)
        grid = np.zeros((0, _WIDTH), dtype=np.int64)
        return Measured([], Columns(empty, [], empty, grid, grid))
    files = np.concatenate([c.files for c in chunks])
    order = np.argsort(files, kind="stable")
    names = [n for c in chunks for n in c.names]
    files = files[order]
    file_rows = files.tolist()
    return Measured(
        [work[f][0] for f in file_rows],
        Columns(files, [names[i] for i in order.tolist()],
                np.concatenate([c.events for c in chunks])[order],
                np.concatenate([c.stats for c in chunks])[order],
                np.concatenate([c.first_trip for c in chunks])[order]),
        [str(work[f][1].path) for f in file_rows])


# --------------------------------------------------------------------------------------------
# Scheduling


#: a chunk gets 1/(GUIDED × workers) of the bytes still to hand out...
GUIDED = 4
#: ...but at least this many (a chunk's hand-over costs a round trip through the pool)
MIN_CHUNK_BYTES = 256 * 1024


def schedule(sizes: Sequence[int], workers: int) -> list[list[int]]:
    """Chunks of file indices for ``workers`` processes: largest file first, each chunk a
    1/(GUIDED × workers) share of the bytes not yet handed out (at least MIN_CHUNK_BYTES), so
    the chunks shrink towards the end and whichever worker is free takes the next: the large
    files are not left for last and the workers finish together."""
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    remaining = sum(sizes)
    chunks: list[list[int]] = []
    current: list[int] = []
    size = 0
    target = max(MIN_CHUNK_BYTES, remaining // (GUIDED * workers))
    for i in order:
        current.append(i)
        size += sizes[i]
        if size >= target:
            chunks.append(current)
            remaining -= size
            current, size = [], 0
            target = max(MIN_CHUNK_BYTES, remaining // (GUIDED * workers))
    if current:
        chunks.append(current)
    return chunks


def _sizes(work: Sequence[tuple[str, Transcript]]) -> list[int]:
    sizes = []
    for _, transcript in work:
        try:
            sizes.append(os.stat(transcript.path).st_size)
        except OSError:  # gone since it was listed: reading it reports the error
            sizes.append(0)
    return sizes


# --------------------------------------------------------------------------------------------
# Running a run


def measure_paths(paths: Sequence[str], watchdog: WatchdogConfig | None = None, *,
                  implementation: str | None = None, jobs: int = 1, dask: str | None = None,
                  progress: bool | None = None) -> Measured:
    """Every session under ``paths``; identical whichever of serial, ``jobs`` > 1 processes or
    a Dask scheduler address (``dask``) runs it. ``progress``: a bar on stderr (default: when
    stderr is a terminal)."""
    with Run(paths, jobs=jobs, dask=dask) as run:
        return run.measure(watchdog, implementation=implementation, progress=progress)


class Run:
    """The files under ``paths``, listed once, and what measures them: this process, a pool of
    ``jobs`` worker processes (started at the first parallel measure and kept until the run
    closes, so a threshold sweep starts it once) or a Dask client. A context manager.

    A parallel run (``jobs`` > 1 or Dask) lists a directory's files without detecting their
    format: detection decodes every file, serial work that would cap the speed-up, so the
    workers do it as they read each file, and report the files they skip. The run's results
    and errors are a serial run's: a directory whose files were all skipped raises what the
    listing raises for it, and a failure makes the parent list as serial does first, since a
    serial run raises a listing error before any file's read error."""

    def __init__(self, paths: Sequence[str], *, jobs: int = 1, dask: str | None = None) -> None:
        self.paths = list(paths)
        self.deferred = jobs > 1 or dask is not None
        try:
            self.work = corpus_files(self.paths, detect=not self.deferred)
        except Exception:
            self._listing_error()
            raise
        self.jobs = jobs
        self.dask = dask
        self._pool: Any = None
        self._client: Any = None
        self._chunks: dict[int, list[list[int]]] = {}

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def chunks(self, workers: int) -> list[list[int]]:
        """The run's files cut into chunks for ``workers`` (``schedule``), once per count."""
        if workers not in self._chunks:
            self._chunks[workers] = schedule(_sizes(self.work), workers)
        return self._chunks[workers]

    def measure(self, watchdog: WatchdogConfig | None = None, *,
                implementation: str | None = None, progress: bool | None = None) -> Measured:
        """Every session of the run's files, measured with ``watchdog`` (default config)."""
        watchdog = watchdog if watchdog is not None else WatchdogConfig()
        if progress is None:
            progress = sys.stderr.isatty()
        parallel = self.dask is None and self.jobs > 1 and len(self.work) > 1
        if parallel and self._pool is None:  # before the bar: its monitor is a thread
            self._pool = _start_pool(self.jobs, [t for _, t in self.work])
        if self.dask is not None and self._client is None:
            self._client = _dask_client(self.dask)
        bar = _bar(len(self.work), progress)
        try:
            if self.dask is not None:
                chunks, failed = self._on_dask(watchdog, implementation, bar)
            elif parallel:
                chunks, failed = self._in_processes(watchdog, implementation, bar)
            else:
                files = [(i, t) for i, (_, t) in enumerate(self.work)]
                try:
                    chunks, failed = [measure_chunk(watchdog, implementation, files,
                                                    None if bar is None else bar.update)], None
                except ChunkError as exc:
                    chunks, failed = [], exc
        finally:
            if bar is not None:
                bar.close()
        if failed is not None:
            self._listing_error()
            raise failed.error
        if self.deferred:
            empty = empty_directory(self.work, {i for c in chunks for i in c.skipped})
            if empty is not None:
                raise empty
        return _merge(self.work, chunks)

    def _listing_error(self) -> None:
        """In a run that left detection to the workers: raise the error a serial run's listing
        raises (it detects every file before any is read), if there is one."""
        if self.deferred:
            corpus_files(self.paths)

    def _in_processes(self, watchdog: WatchdogConfig, implementation: str | None,
                      bar: Any) -> tuple[list[Columns], ChunkError | None]:
        from concurrent.futures import as_completed

        futures = {self._pool.submit(_measure_ids, watchdog, implementation, ids): len(ids)
                   for ids in self.chunks(self.jobs)}
        return _collect(as_completed(futures), futures, bar)

    def _on_dask(self, watchdog: WatchdogConfig, implementation: str | None,
                 bar: Any) -> tuple[list[Columns], ChunkError | None]:
        from distributed import as_completed

        workers = max(self.jobs, len(self._client.scheduler_info().get("workers", ())))
        tasks = [[(i, self.work[i][1]) for i in ids] for ids in self.chunks(workers)]
        submitted = self._client.map(measure_chunk, [watchdog] * len(tasks),
                                     [implementation] * len(tasks), tasks, pure=False)
        futures = {f: len(chunk) for f, chunk in zip(submitted, tasks, strict=True)}
        done = as_completed(submitted)  # type: ignore[no-untyped-call]  # distributed: untyped
        return _collect(done, futures, bar)


def _collect(done: Any, futures: dict[Any, int],
             bar: Any) -> tuple[list[Columns], ChunkError | None]:
    """Every chunk's columns, as they complete, and once every chunk is in, the failure of the
    lowest failing file if any (what a serial run raises, after its listing's errors)."""
    chunks: list[Columns] = []
    failed: ChunkError | None = None
    for future in done:
        try:
            chunks.append(future.result())
        except ChunkError as exc:
            if failed is None or exc.file < failed.file:
                failed = exc
        if bar is not None:
            bar.update(futures[future])
    return chunks, failed


def _bar(total: int, progress: bool) -> Any:
    if not progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # the bar is a nicety: no tqdm, no bar
        return None
    return tqdm(total=total, unit="file", file=sys.stderr, leave=False)


# The worker processes of a local pool: the run's transcripts arrive once, at start (inherited
# on fork, pickled once per worker otherwise), and a task names its files by index.

_FILES: list[Transcript] = []


def _init_worker(files: list[Transcript]) -> None:
    _FILES[:] = files


def _measure_ids(watchdog: WatchdogConfig, implementation: str | None,
                 ids: list[int]) -> Columns:
    return measure_chunk(watchdog, implementation, [(i, _FILES[i]) for i in ids])


def _start_pool(jobs: int, files: list[Transcript]) -> Any:
    """A pool of ``jobs`` processes. Fork where the platform has it and this process runs no
    other thread (forking a threaded process can deadlock on a lock another thread held):
    the workers then start with every module imported and the file list in memory. Else the
    platform's default start method."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import numpy  # noqa: F401  # every worker builds columns: imported once, here, not in each

    context: Any = None
    if ("fork" in multiprocessing.get_all_start_methods() and sys.platform != "darwin"
            and threading.active_count() == 1):
        context = multiprocessing.get_context("fork")
    return ProcessPoolExecutor(max_workers=jobs, mp_context=context,
                               initializer=_init_worker, initargs=(files,))


def _dask_client(address: str) -> Any:
    try:
        from distributed import Client
    except ImportError:
        raise ConfigError("--dask needs the dask extra: pip install 'tripwire[dask]'") from None
    try:
        return Client(address)  # type: ignore[no-untyped-call]  # distributed: untyped
    except (OSError, ValueError, TypeError) as exc:  # unreachable, or not an address
        raise ConfigError(f"--dask: cannot reach a Dask scheduler at {address!r}: {exc}") \
            from None

