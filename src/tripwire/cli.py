"""``tripwire``: the command line.

Exit status: 0 done; 2 bad usage or bad input (a missing file, an invalid event line, a bad
config), with a one-line message on stderr naming the file and line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from .config import read_config_file
from .errors import ConfigError, InvalidEvent
from .replay import ReplayOptions, ReplayStats, event_files, replay_file
from .signals import SIGNAL_IDS, WatchdogConfig

EXIT_OK = 0
EXIT_USAGE = 2


def _print(record: dict[str, Any], out: TextIO) -> None:
    out.write(json.dumps(record, ensure_ascii=False) + "\n")


def _signal_set(text: str) -> frozenset[str]:
    ids = frozenset(s.strip() for s in text.split(",") if s.strip())
    unknown = sorted(ids - set(SIGNAL_IDS))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown signal(s) {', '.join(unknown)} (known: {', '.join(SIGNAL_IDS)})"
        )
    if not ids:
        raise argparse.ArgumentTypeError("--signals needs at least one signal id")
    return ids


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tripwire",
        description="Guardrails for AI-agent harnesses: watch tool calls, spend and context.",
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    replay = verbs.add_parser(
        "replay",
        help="replay recorded event files and print what tripwire would have said",
        description=(
            "Read interchange-format event files (JSON Lines, one event per line), run the "
            "watchdog over each file as one session, and print one JSON line per alert, then "
            "a summary line."
        ),
    )
    replay.add_argument("paths", nargs="+", metavar="PATH",
                        help="event files, or directories of *.jsonl files")
    replay.add_argument("--quiet", action="store_true", help="print only the summary line")
    replay.add_argument("--signals", type=_signal_set, metavar="IDS",
                        help="comma-separated signal ids to run (default: all eight)")
    replay.add_argument("--config", metavar="FILE", help="TOML or JSON config file")
    replay.add_argument("--skip-invalid", action="store_true",
                        help="report invalid lines and go on instead of stopping")
    replay.add_argument("--implementation", choices=("native", "python"),
                        help="engine to run (default: TRIPWIRE_IMPLEMENTATION, else native)")
    return parser


def _replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    config = WatchdogConfig()
    if args.config:
        config = WatchdogConfig.from_mapping(read_config_file(args.config))
    if args.signals:
        config = config.restricted_to(args.signals)
    options = ReplayOptions(watchdog=config, skip_invalid=args.skip_invalid,
                            implementation=args.implementation)
    files = event_files(args.paths)
    stats = ReplayStats()
    many = len(files) > 1
    for path in files:
        for record in replay_file(path, options, stats):
            if record["kind"] == "invalid":
                err.write(f"tripwire: {path}:{record['line']}: skipped: {record['error']}\n")
                continue
            if args.quiet:
                continue
            if many:
                record = {**record, "file": str(path)}
            _print(record, out)
    _print(stats.summary(), out)
    return EXIT_OK


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.verb == "replay":
            return _replay(args, out, err)
    except (InvalidEvent, ConfigError, FileNotFoundError) as exc:
        err.write(f"tripwire: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:  # `tripwire replay ... | head`
        return EXIT_OK
    parser.error(f"unknown verb {args.verb}")  # pragma: no cover
    return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
