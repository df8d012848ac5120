"""Per signal: how many runaways tripwire stops, how early, and how many healthy runs it alarms.

    python benchmarks/runaways/measure.py RUNAWAY_DIR [--healthy PATH ...] [-j N]
                                          [--implementation native|python]

RUNAWAY_DIR is the set fetch.py downloads (every session in it ended by exhausting its budget).
The healthy paths default to the submitted runs of the shared corpus: the mini-swe-agent
SWE-bench runs and the SWE-agent demonstrations (every one of them ended by submitting).

Both go through ``tripwire corpus stats --json`` with the default thresholds (warn mode, every
event observed; a first trip is the alert as it would really be raised). Printed for each set,
per signal: the sessions it trips and the median *fraction of the run* at its first trip
((0-based tripping event + 1) / events: 1 is the last event). Then: the sessions with any
critical alert and the median fraction at the earliest one, the sessions with warnings only
(and how early the first warning came), and what ``persistent-warnings`` adds: the sessions it
trips that no other critical signal trips, and how early.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from tripwire.signals import SIGNALS

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "corpus"
DEFAULT_HEALTHY = [SHARED / "mini-swe-agent-swebench", SHARED / "swe-agent-demos"]
NEW_SIGNAL = "persistent-warnings"
CRITICAL = [s.id for s in SIGNALS if s.severity == "critical"]


def sessions(paths: list[Path], jobs: int, implementation: str | None) -> list[dict[str, Any]]:
    """The session lines of ``tripwire corpus stats --json`` over ``paths``."""
    if not paths:
        return []
    command = [sys.executable, "-m", "tripwire", "corpus", "stats", *map(str, paths), "--json",
               "-j", str(jobs)]
    if implementation:
        command += ["--implementation", implementation]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"tripwire corpus stats failed ({done.returncode}): {done.stderr.strip()}")
    lines = (json.loads(line) for line in done.stdout.splitlines() if line.strip())
    return [line for line in lines if line.get("kind") == "session"]


def fraction(session: dict[str, Any], event: int) -> float:
    return (event + 1) / session["events"] if session["events"] else 1.0


def median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "-"


def first_critical(session: dict[str, Any], signals: list[str]) -> int | None:
    trips = [session["first_trip"][s] for s in signals if session["first_trip"][s] is not None]
    return min(trips) if trips else None


def report(name: str, found: list[dict[str, Any]]) -> None:
    print(f"\n{name}: {len(found)} sessions, {sum(s['events'] for s in found)} events")
    if not found:
        return
    print(f"  {'signal':24} {'severity':8} {'trips':>6} {'median fraction at first trip':>30}")
    for spec in SIGNALS:
        tripped = [s for s in found if s["first_trip"][spec.id] is not None]
        early = [fraction(s, s["first_trip"][spec.id]) for s in tripped]
        print(f"  {spec.id:24} {spec.severity:8} {len(tripped):6d} {median(early):>30}")
    warn = [s.id for s in SIGNALS if s.severity != "critical"]
    older = [s for s in CRITICAL if s != NEW_SIGNAL]
    critical = [s for s in found if first_critical(s, CRITICAL) is not None]
    warned_only = [s for s in found if first_critical(s, CRITICAL) is None
                   and first_critical(s, warn) is not None]
    newly = [s for s in found if s["first_trip"][NEW_SIGNAL] is not None
             and first_critical(s, older) is None]
    at_first = [fraction(s, first_critical(s, CRITICAL) or 0) for s in critical]
    print(f"  any critical alert: {len(critical)} of {len(found)}"
          f" (median fraction at the first: {median(at_first)})")
    at_warning = [fraction(s, first_critical(s, warn) or 0) for s in warned_only]
    print(f"  warnings only: {len(warned_only)} (median fraction at the first warning: "
          f"{median(at_warning)}); no alert: "
          f"{len(found) - len(critical) - len(warned_only)}")
    alone = [fraction(s, s["first_trip"][NEW_SIGNAL]) for s in newly]
    print(f"  {NEW_SIGNAL} alone (no other critical signal trips): {len(newly)}"
          f" (median fraction: {median(alone)})")
    print(f"  without {NEW_SIGNAL}: {sum(first_critical(s, older) is not None for s in found)}"
          f" with a critical alert")
    peaks = [s["stats"][NEW_SIGNAL] for s in found]
    print(f"  {NEW_SIGNAL} statistic (warn alerts with no new answer between): median "
          f"{statistics.median(peaks)}, max {max(peaks)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runaways", type=Path)
    parser.add_argument("--healthy", type=Path, nargs="*", default=DEFAULT_HEALTHY)
    parser.add_argument("-j", "--jobs", type=int, default=1)
    parser.add_argument("--implementation", choices=("native", "python"))
    args = parser.parse_args(argv)
    runaway_files = [p for p in args.runaways.rglob("*") if p.is_file()] \
        if args.runaways.is_dir() else []
    runaways = sessions([args.runaways] if runaway_files else [], args.jobs, args.implementation)
    report(f"runaways ({args.runaways})", runaways)
    healthy = [p for p in args.healthy if p.exists()]
    if not healthy:
        print("\nhealthy: no healthy path given, or none exists (../shared absent?)")
    else:
        report("healthy (" + ", ".join(str(p) for p in healthy) + ")",
               sessions(healthy, args.jobs, args.implementation))
    return 0


if __name__ == "__main__":
    sys.exit(main())
