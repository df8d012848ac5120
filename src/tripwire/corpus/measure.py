"""One pass per session: the engine's statistics and the first trip of every signal.

Each session runs through ``Guardrails`` in warn mode with no cost ceilings — replay's view of
a recording, so every event is observed and an alert names the event that made it trip, exactly
as ``tripwire replay`` reports it — with the engine's statistics mode on, through a fleet's
batch path.

Files are the unit of work: ``measure_paths`` runs them serially, in ``jobs`` processes, or on a
Dask cluster, and always returns the sessions in the same order (the arguments', then sorted
paths, then each file's own order), so the three give identical results.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..adapters import Transcript
from ..context import ContextConfig
from ..decision import Decision
from ..errors import ConfigError
from ..events import Event
from ..fleet import Fleet
from ..guardrails import GuardrailsConfig, ResolvedConfig
from ..reporting import LOGGER
from ..signals import SIGNAL_IDS, WatchdogConfig
from .sessions import corpus_files, session_events

__all__ = ["SessionResult", "measure_file", "measure_paths", "thresholds",
           "threshold_knob", "corpus_config"]


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


def threshold_knob(signal: str) -> str:
    """The knob a signal's statistic is compared with (the cycle counts laps)."""
    return "cycles" if signal == "alternating-tool-cycle" else "threshold"


def thresholds(config: WatchdogConfig) -> tuple[int, ...]:
    """Per signal, the resolved (clamped) value its statistic is compared with."""
    s = config.engine_settings()
    return (s.repeat_threshold, s.cycle_cycles, s.density_threshold, s.name_threshold,
            s.failure_threshold, s.no_op_threshold, s.no_new_state_threshold,
            s.silence_threshold, s.repeated_failure_threshold)


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


def measure_file(job: tuple[str, Transcript, WatchdogConfig, str | None]) -> list[SessionResult]:
    """Every session of one transcript, in the order they first appear (the unit of parallel
    work: a picklable job in, results out). The transcript's events go through one fleet's
    batch path (``Fleet.observe_many``: detection without the GIL, policy in Python only where
    a signal fires), which decides exactly as the guardrails' one-event methods do."""
    root, transcript, watchdog, implementation = job
    quiet = _Quiet()
    LOGGER.addFilter(quiet)  # the per-alert operator lines: a corpus pass reports in bulk
    try:
        fleet = Fleet(_resolved(watchdog), implementation=implementation)
        rows: list[tuple[str, Event]] = []
        position: list[int] = []  # each row's event index within its session
        counts: dict[str, int] = {}
        for name, event in session_events(transcript):
            index = counts.get(name)
            if index is None:
                index = 0
                engine = fleet.session(name)._watchdog  # None: every signal is off
                if engine is not None:
                    engine.enable_stats()
            counts[name] = index + 1
            rows.append((name, event))
            position.append(index)
        first = {name: [None] * len(SIGNAL_IDS) for name in counts}
        for row, name, outcome in fleet.observe_many(rows) if rows else ():
            if type(outcome) is Decision and outcome.alerts:
                trips = first[name]
                for alert in outcome.alerts:
                    i = _INDEX[alert.signal]
                    if trips[i] is None:
                        trips[i] = position[row]
        results = []
        for name, events in counts.items():
            engine = fleet.session(name)._watchdog
            stats = engine.stats if engine is not None else (0,) * len(SIGNAL_IDS)
            results.append(SessionResult(root, name, events, tuple(stats), tuple(first[name])))
        return results
    finally:
        LOGGER.removeFilter(quiet)


class _Quiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


def measure_paths(paths: Iterable[str], watchdog: WatchdogConfig | None = None, *,
                  implementation: str | None = None, jobs: int = 1, dask: str | None = None,
                  progress: bool | None = None) -> list[SessionResult]:
    """Every session under ``paths``; identical whichever of serial, ``jobs`` > 1 processes or
    a Dask scheduler address (``dask``) runs it. ``progress``: a bar on stderr (default: when
    stderr is a terminal)."""
    watchdog = watchdog if watchdog is not None else WatchdogConfig()
    work = [(root, transcript, watchdog, implementation)
            for root, transcript in corpus_files(paths)]
    if progress is None:
        progress = sys.stderr.isatty()
    if dask is not None:
        batches = _on_dask(dask, work)
    elif jobs > 1 and len(work) > 1:
        batches = _in_processes(jobs, work, progress)
    else:
        batches = _bar(map(measure_file, work), len(work), progress)
    return [result for batch in batches for result in batch]


def _bar(results: Iterator[list[SessionResult]], total: int,
         progress: bool) -> Iterator[list[SessionResult]]:
    if not progress:
        return results
    try:
        from tqdm import tqdm
    except ImportError:  # the bar is a nicety: no tqdm, no bar
        return results

    return iter(tqdm(results, total=total, unit="file", file=sys.stderr, leave=False))


def _in_processes(jobs: int, work: list, progress: bool) -> list[list[SessionResult]]:
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        # map keeps the input order; ~8 chunks per process amortize the hand-over of many
        # small files and still keep every process busy to the end
        chunk = max(1, len(work) // (8 * jobs))
        return list(_bar(pool.map(measure_file, work, chunksize=chunk), len(work), progress))


def _on_dask(address: str, work: list) -> list[list[SessionResult]]:
    try:
        from distributed import Client
    except ImportError:
        raise ConfigError("--dask needs the dask extra: pip install 'tripwire[dask]'") from None
    try:
        client = Client(address)
    except (OSError, ValueError, TypeError) as exc:  # unreachable, or not an address
        raise ConfigError(f"--dask: cannot reach a Dask scheduler at {address!r}: {exc}") \
            from None
    with client:
        futures = client.map(measure_file, work, pure=False)
        return client.gather(futures)
