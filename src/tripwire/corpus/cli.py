"""``tripwire corpus stats|validate|sweep``: the command line of threshold validation.

Exit status as the rest of the CLI: 0 done, 2 bad usage or input (one line on stderr), 3 when
``validate`` found a labelled-healthy session tripping a critical signal (or a scenario not
tripping what it must) — the CI gate for a threshold change.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import ConfigError
from ..session.config import read_config_file, watchdog_config
from ..signals import SIGNAL_IDS, WatchdogConfig

if TYPE_CHECKING:  # the analysis imports numpy (the corpus extra): at run time, in the verb
    from .analysis import SweepPoint

EXIT_OK = 0
EXIT_GATED = 3


def _values(text: str) -> list[int]:
    """``3:20`` (inclusive), ``3:20:2`` or ``4,6,8``."""
    try:
        if ":" in text:
            parts = [int(p) for p in text.split(":")]
            if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] <= 0):
                raise ValueError
            start, stop = parts[0], parts[1]
            values = list(range(start, stop + 1, parts[2] if len(parts) == 3 else 1))
        else:
            values = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--values takes START:STOP[:STEP] or a comma list of integers, not {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"--values needs positive integers, not {text!r}")
    return values


def _signal(text: str) -> str:
    if text not in SIGNAL_IDS:
        raise argparse.ArgumentTypeError(
            f"unknown signal {text!r} (known: {', '.join(SIGNAL_IDS)})")
    return text


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"-j needs a positive integer, not {text!r}")
    return n


def add_parser(verbs: Any) -> None:
    corpus = verbs.add_parser(
        "corpus", help="validate thresholds against recorded sessions",
        description="Measure every session under the given paths with the engine's "
                    "statistics mode: per signal, the peak of the quantity its threshold is "
                    "compared with, and the event at which it first trips.")
    commands = corpus.add_subparsers(dest="corpus_command", required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("paths", nargs="+", metavar="PATH",
                        help="session files, or directories of them")
    common.add_argument("--config", metavar="FILE", help="TOML or JSON config file (signals)")
    common.add_argument("-j", "--jobs", type=_jobs, default=1, metavar="N",
                        help="processes over files (default 1)")
    common.add_argument("--dask", metavar="SCHEDULER",
                        help="run on a Dask cluster at this scheduler address "
                             "(needs tripwire[dask])")
    common.add_argument("--implementation", choices=("native", "python"),
                        help="engine to run (default: TRIPWIRE_IMPLEMENTATION, else native)")

    stats = commands.add_parser("stats", parents=[common],
                                help="each signal's statistic across sessions")
    stats.add_argument("--json", action="store_true",
                       help="JSON Lines: one line per session, then a summary line")
    stats.add_argument("--report", metavar="DIR",
                       help="write an HTML page with plots (needs tripwire[report])")

    validate = commands.add_parser("validate", parents=[common],
                                   help="gate: no labelled-healthy session trips a critical "
                                        "signal (exit 3 if one does)")
    validate.add_argument("--labels", metavar="FILE", help="outcome label file (JSON)")

    sweep = commands.add_parser("sweep", parents=[common],
                                help="sessions tripping per threshold value")
    sweep.add_argument("--signal", type=_signal, required=True, metavar="ID")
    sweep.add_argument("--values", type=_values, required=True, metavar="START:STOP",
                       help="threshold values, e.g. 3:20 (inclusive) or 4,6,8")
    sweep.add_argument("--labels", metavar="FILE", help="outcome label file (JSON)")
    sweep.add_argument("--json", action="store_true", help="JSON Lines output")
    sweep.add_argument("--report", metavar="DIR", help="write the curve's plot and page")


def _config(args: argparse.Namespace) -> WatchdogConfig:
    file = read_config_file(args.config) if args.config else {}
    config = watchdog_config(file)  # built-ins only
    config.engine_settings()  # a bad value is a usage error before any file is read
    return config


def _print(record: dict[str, Any], out: TextIO) -> None:
    out.write(json.dumps(record, ensure_ascii=False) + "\n")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        from .analysis import summary, sweep, violations
    except ImportError as exc:  # numpy lives in the corpus extra
        raise ConfigError(f"tripwire corpus needs the corpus extra ({exc.name} is missing): "
                          "pip install 'tripwire[corpus]'") from None
    from .labels import read_labels
    from .measure import measure_paths

    config = _config(args)
    if getattr(args, "report", None):
        _report_directory(args.report)  # before minutes of measuring, not after
    labels = read_labels(args.labels) if getattr(args, "labels", None) else None
    run_options = {"implementation": args.implementation, "jobs": args.jobs, "dask": args.dask}
    if args.corpus_command == "sweep":
        points, result = sweep(args.paths, args.signal, args.values, config, labels,
                               **run_options)
        if args.json:
            for p in points:
                _print(p.record(args.signal), out)
            _print(result, out)
        else:
            out.write(_sweep_table(args.signal, points, result))
        if args.report:
            from .report import write_sweep_report

            _writing(args.report, write_sweep_report, args.report, args.signal, points, result)
        return EXIT_OK
    results = measure_paths(args.paths, config, **run_options)
    if args.corpus_command == "stats":
        table = summary(results, config)
        if args.json:
            for r in results:
                _print(r.record(), out)
            _print(table, out)
        else:
            out.write(_stats_table(table))
        if args.report:
            from .report import write_stats_report

            _writing(args.report, write_stats_report, args.report, results, config, table)
        return EXIT_OK
    found = violations(results, labels)
    for v in found:
        _print(v, out)
    gated = labels is not None and bool(found)
    _print({"kind": "summary", "sessions": len(results),
            "labelled": sum(labels.of(r.session) is not None for r in results) if labels
            else 0,
            "healthy": sum(bool((lab := labels.of(r.session)) and lab.healthy)
                           for r in results) if labels else 0,
            "violations" if labels is not None else "critical_trips": len(found),
            "passed": not gated}, out)
    return EXIT_GATED if gated else EXIT_OK


def _report_directory(directory: str) -> None:
    """``--report DIR`` made (or found) now: a path that is a file, or that cannot be made,
    is a usage error before anything is measured."""
    import os

    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ConfigError(f"--report {directory}: not a directory (the report is a directory "
                          "of an HTML page and its plots)")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--report {directory}: {exc.strerror or exc}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigError(f"--report {directory}: the directory cannot be written")


def _writing(directory: str, write: Any, *args: Any) -> None:
    """Write a report; a directory that cannot be written is a usage error, not a traceback."""
    try:
        write(*args)
    except OSError as exc:
        raise ConfigError(f"--report {directory}: {exc.strerror or exc}") from None


def _stats_table(table: dict[str, Any]) -> str:
    head = (f"{'signal':<24}{'threshold':>10}{'median':>9}{'p90':>8}{'p99':>8}{'max':>6}"
            f"{'margin':>8}{'trips':>7}")
    lines = [f"{table['sessions']} sessions, {table['events']} events", head]
    for signal, s in table["signals"].items():
        lines.append(f"{signal:<24}{s['threshold']:>10}{s['median']:>9.1f}{s['p90']:>8.1f}"
                     f"{s['p99']:>8.1f}{s['max']:>6}{s['margin']:>8}{s['trips']:>7}")
    return "\n".join(lines) + "\n"


def _sweep_table(signal: str, points: list[SweepPoint], result: dict[str, Any]) -> str:
    lines = [f"{signal} ({result['knob']}; default {result['default']})",
             f"{'value':>6}{'trips':>7}{'healthy':>9}{'unhealthy':>11}{'unlabelled':>12}"
             f"{'median first trip':>19}"]
    for p in points:
        median = "-" if p.median_first_trip is None else f"{p.median_first_trip:.1f}"
        lines.append(f"{p.value:>6}{p.trips:>7}{p.healthy:>9}{p.unhealthy:>11}"
                     f"{p.unlabelled:>12}{median:>19}")
    lines.append(f"smallest value with no healthy trip: {result['smallest_without_healthy_trip']}"
                 f" (margin {result['margin']} over the healthy sessions' peak "
                 f"{result['healthy_peak']})")
    return "\n".join(lines) + "\n"
