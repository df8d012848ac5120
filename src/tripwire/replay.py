"""Replay recorded sessions through tripwire and report what it would have said.

``replay_file`` yields one JSON-ready record per alert (and, at the end of a file, nothing
else); ``tripwire replay`` prints them as JSON Lines. The record format is a public contract:
``{"kind": "alert", "event": i, "signal", "severity", "scope", "reason", "guidance"}`` where
``event`` is the 0-based index of the event whose processing made the signal trip.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import InvalidEvent
from .events import Call, Reset, Result, Text, TurnEnd, TurnStart, Usage, read_events
from .signals import Alert, WatchdogConfig
from .watchdog import Watchdog

__all__ = ["ReplayOptions", "ReplayStats", "replay_file", "event_files"]


@dataclass
class ReplayOptions:
    watchdog: WatchdogConfig = field(default_factory=WatchdogConfig)
    skip_invalid: bool = False
    implementation: str | None = None


@dataclass
class ReplayStats:
    files: int = 0
    events: int = 0
    invalid_lines: int = 0
    alerts: Counter = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        return {
            "kind": "summary",
            "files": self.files,
            "events": self.events,
            "invalid_lines": self.invalid_lines,
            "alerts": sum(self.alerts.values()),
            "by_signal": dict(sorted(self.alerts.items())),
        }


def event_files(paths: Iterable[str]) -> list[Path]:
    """Expand paths: a file is itself, a directory is every ``*.jsonl`` below it (sorted).
    Raises FileNotFoundError / InvalidEvent with a message a user can act on."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
            if not found:
                raise InvalidEvent(f"no .jsonl event files in directory {path}")
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or directory")
    return files


def alert_record(alert: Alert, index: int) -> dict[str, Any]:
    return {
        "kind": "alert",
        "event": index,
        "signal": alert.signal,
        "severity": alert.severity,
        "scope": alert.scope,
        "reason": alert.reason,
        "guidance": alert.guidance,
    }


def replay_file(path: Path, options: ReplayOptions, stats: ReplayStats) -> Iterator[dict[str, Any]]:
    """Run one file (one session) through a fresh watchdog; yield alert records."""
    watchdog = Watchdog(options.watchdog, implementation=options.implementation)
    names_by_id: dict[str, str] = {}
    stats.files += 1
    for line in read_events(path):
        if line.error is not None:
            if not options.skip_invalid:
                raise line.error
            stats.invalid_lines += 1
            yield {"kind": "invalid", "event": line.index, "line": line.number,
                   "error": line.error.message}
            continue
        stats.events += 1
        for alert in _observe(watchdog, line.event, names_by_id):
            stats.alerts[alert.signal] += 1
            yield alert_record(alert, line.index)


def _observe(watchdog: Watchdog, event: Any, names_by_id: dict[str, str]) -> tuple[Alert, ...]:
    if isinstance(event, Call):
        if event.id is not None:
            names_by_id[event.id] = event.name
        return watchdog.observe_call(event.name, event.args)
    if isinstance(event, Result):
        name = event.name if event.name is not None else names_by_id.get(event.id or "", "")
        return watchdog.observe_result(name, error=event.error, no_op=event.no_op,
                                       payload=event.payload)
    if isinstance(event, Text):
        return watchdog.observe_text(event.text)
    if isinstance(event, TurnEnd):
        return watchdog.end_turn()
    if isinstance(event, TurnStart):
        watchdog.count_event()
        watchdog.turn_boundary()
        return ()
    if isinstance(event, Reset):
        if event.guardrail in ("watchdog", "all"):
            return watchdog.reset()
        watchdog.count_event()
        return ()
    if isinstance(event, Usage):
        watchdog.count_event()
        return ()
    raise AssertionError(event)  # pragma: no cover - parse_event admits nothing else
