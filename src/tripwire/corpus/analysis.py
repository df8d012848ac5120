"""What the measured sessions say about the thresholds: distributions (numpy), the label gate
of ``corpus validate`` and the threshold sweep of ``corpus sweep``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..signals import BY_ID, CRITICAL, SIGNAL_IDS, WatchdogConfig
from .labels import Labels
from .measure import NEVER, Measured, Run, SessionResult, threshold_knob, thresholds

__all__ = ["summary", "violations", "sweep", "SweepPoint", "critical_trips"]


def _quantiles(values: np.ndarray) -> dict[str, float]:
    if values.size == 0:
        return {"median": 0.0, "p90": 0.0, "p99": 0.0, "max": 0}
    median, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"median": float(median), "p90": float(p90), "p99": float(p99),
            "max": int(values.max())}


def signal_table(results: Measured, config: WatchdogConfig) -> dict[str, Any]:
    """Per signal: threshold, the statistic's median/p90/p99/max across sessions, the margin
    (threshold minus the observed maximum: > 0 means no session reached it) and how many
    sessions trip it (and which fraction: its warn rate)."""
    trips = (results.first_trip != NEVER).sum(axis=0)
    table = {}
    for i, (signal, limit) in enumerate(zip(SIGNAL_IDS, thresholds(config), strict=True)):
        q = _quantiles(results.stats[:, i])
        tripped = int(trips[i])
        table[signal] = {"threshold": limit, **q, "margin": limit - q["max"],
                         "trips": tripped,
                         "trip_rate": tripped / len(results) if len(results) else 0.0}
    return table


def summary(results: Measured, config: WatchdogConfig) -> dict[str, Any]:
    """The ``--json`` summary line: every session together, then each corpus (path argument)."""
    corpora = {name: results.of_corpus(name) for name in results.corpora()}
    return {
        "kind": "summary",
        "sessions": len(results),
        "events": int(results.events.sum()),
        "signals": signal_table(results, config),
        "corpora": {name: {"sessions": len(rs), "events": int(rs.events.sum()),
                           "signals": signal_table(rs, config)}
                    for name, rs in corpora.items()},
    }


def critical_trips(result: SessionResult) -> list[tuple[str, int]]:
    return [(signal, event) for signal, event in zip(SIGNAL_IDS, result.first_trip, strict=True)
            if event is not None and BY_ID[signal].severity == CRITICAL]


def violations(results: Iterable[SessionResult], labels: Labels | None) -> list[dict[str, Any]]:
    """What ``corpus validate`` reports. With labels: every critical trip of a session
    labelled healthy, and every signal a labelled scenario must (not) trip that it did not
    (did). Without labels: every critical trip, for review."""
    out: list[dict[str, Any]] = []
    for r in results:
        label = labels.of(r.session) if labels is not None else None
        tripped = {s: e for s, e in zip(SIGNAL_IDS, r.first_trip, strict=True) if e is not None}
        if labels is None:
            out.extend({"kind": "critical_trip", "session": r.session, "corpus": r.corpus,
                        "signal": s, "event": e} for s, e in critical_trips(r))
            continue
        if label is None:
            continue
        base = {"kind": "violation", "session": r.session, "corpus": r.corpus,
                "label": label.label}
        if label.healthy:
            out.extend({**base, "signal": s, "event": e,
                        "problem": "a healthy session trips a critical signal"}
                       for s, e in critical_trips(r))
        out.extend({**base, "signal": s, "event": None, "problem": "must trip, did not"}
                   for s in sorted(label.must_trip - set(tripped)))
        out.extend({**base, "signal": s, "event": tripped[s], "problem": "must not trip, did"}
                   for s in sorted(label.must_not_trip & set(tripped)))
    return out


@dataclass(frozen=True)
class SweepPoint:
    value: int
    trips: int
    healthy: int  # labelled healthy sessions that trip
    unhealthy: int  # labelled, not healthy
    unlabelled: int
    median_first_trip: float | None

    def record(self, signal: str) -> dict[str, Any]:
        return {"kind": "sweep", "signal": signal, "value": self.value, "trips": self.trips,
                "by_label": {"healthy": self.healthy, "unhealthy": self.unhealthy,
                             "unlabelled": self.unlabelled},
                "median_first_trip": self.median_first_trip}


def sweep(paths: Sequence[str], signal: str, values: Sequence[int], config: WatchdogConfig,
          labels: Labels | None, **run: Any) -> tuple[list[SweepPoint], dict[str, Any]]:
    """Run the corpus once per value of the signal's threshold knob (every other setting
    as configured: the stand-downs depend on the other detectors). Returns the points and a
    summary: the smallest value with no healthy session tripping, and its margin over the
    highest statistic of the healthy sessions."""
    index = SIGNAL_IDS.index(signal)
    knob = threshold_knob(signal)
    points = []
    healthy_peak = None
    implementation = run.pop("implementation", None)
    progress = run.pop("progress", None)
    with Run(paths, **run) as files:  # listed once, one pool for every value
        measured = []
        for value in values:
            knobs = {k: dict(v) for k, v in config.signals.items()}
            knobs.setdefault(signal, {})[knob] = value
            swept = WatchdogConfig(signals=knobs, only=config.only, results=config.results,
                                   tools=config.tools)
            measured.append(files.measure(swept, implementation=implementation,
                                          progress=progress))
    for value, results in zip(values, measured, strict=True):
        first = [t for r in results if (t := r.first_trip[index]) is not None]
        kinds = [_kind(labels, r) for r in results if r.first_trip[index] is not None]
        healthy = [r.stats[index] for r in results if _kind(labels, r) == "healthy"]
        if healthy:
            healthy_peak = max(healthy)
        points.append(SweepPoint(value, len(first), kinds.count("healthy"),
                                 kinds.count("unhealthy"), kinds.count("unlabelled"),
                                 float(np.median(first)) if first else None))
    safe = None if healthy_peak is None else next(
        (p.value for p in points if p.healthy == 0), None)
    return points, {
        "kind": "summary", "signal": signal, "knob": knob,
        "default": thresholds(WatchdogConfig())[index],
        "smallest_without_healthy_trip": safe,
        "healthy_peak": healthy_peak,
        "margin": None if safe is None or healthy_peak is None else safe - healthy_peak,
    }


def _kind(labels: Labels | None, r: SessionResult) -> str:
    label = labels.of(r.session) if labels is not None else None
    if label is None:
        return "unlabelled"
    return "healthy" if label.healthy else "unhealthy"
