"""``tripwire``: the command line.

Exit status: 0 done; 2 bad usage or bad input (a missing file, an invalid event line, a bad
config), with a one-line message on stderr naming the file and line; 3 when ``--fail-on`` saw
what it gates on (so CI pipelines can gate agent runs).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from .config import read_config_file
from .errors import ConfigError, InvalidEvent
from .guardrails import GuardrailsConfig
from .modes import parse_mode
from .replay import ReplayOptions, ReplayStats, event_files, replay_file
from .signals import SIGNAL_IDS, WatchdogConfig

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_GATED = 3


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
    policy = replay.add_argument_group(
        "policy", "replay analyses a recording: with none of these it runs in warn mode with no "
        "cost ceilings and reports every alert")
    policy.add_argument("--mode", type=_mode, help="watchdog mode: off, warn, feedback, enforce")
    attended = policy.add_mutually_exclusive_group()
    attended.add_argument("--unattended", dest="unattended", action="store_const", const=True,
                          help="as a daemon/one-shot would run: enforce, $10 session ceiling")
    attended.add_argument("--interactive", dest="unattended", action="store_const", const=False,
                          help="as an interactive run would: warn, no session ceiling")
    policy.add_argument("--max-turn-cost-usd", type=float, metavar="USD")
    policy.add_argument("--max-session-cost-usd", type=float, metavar="USD")
    policy.add_argument("--fail-on", choices=("critical", "halt"),
                        help="exit 3 if a critical alert (or a session halt) happened")
    return parser


def _mode(text: str) -> str:
    try:
        return str(parse_mode(text))
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def replay_config(args: argparse.Namespace) -> GuardrailsConfig:
    """Replay's policy: explicit flags > the config file > warn with no ceilings (a recording
    is analysed, not guarded, unless asked)."""
    file = read_config_file(args.config) if args.config else {}
    watchdog = WatchdogConfig.from_mapping({"signals": file.get("signals", {})})
    if args.signals:
        watchdog = watchdog.restricted_to(args.signals)
    unattended = args.unattended
    if unattended is None:
        unattended = file.get("session", {}).get("unattended", False)
    config = GuardrailsConfig(
        watchdog=watchdog, mode=args.mode, unattended=unattended,
        max_turn_cost_usd=args.max_turn_cost_usd, max_session_cost_usd=args.max_session_cost_usd,
        file=file,
    )
    config.resolve()  # a bad value is a usage error before any file is read
    return config


def _replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    options = ReplayOptions(guardrails=replay_config(args), skip_invalid=args.skip_invalid,
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
    if args.fail_on == "critical" and stats.critical_alerts:
        return EXIT_GATED
    halted = stats.decisions["halt_session"] or stats.decisions["refuse_turn"]
    if args.fail_on == "halt" and halted:
        return EXIT_GATED
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
