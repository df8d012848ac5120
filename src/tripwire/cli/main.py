"""``tripwire``: the command line.

Verbs: ``replay`` (recordings through the guardrails), ``convert`` (other harnesses'
transcripts as interchange events), ``status`` / ``reset`` / ``verify`` (a durable store
written by any process), ``corpus`` (threshold validation, ``corpus/cli.py``), ``hook`` (a
harness's live hook command).

Exit status: 0 done; 1 ``verify`` found a broken chain; 2 bad usage or bad input (a missing
file, an invalid event line, a bad config, an invalid reset), with a one-line message on stderr
naming the file and line; 3 when ``--fail-on`` saw what it gates on (so CI pipelines can gate
agent runs); 4 a reset refused because it would re-trip at once (HTTP 409 semantics: the
message says how much budget to add); 130 interrupted (Ctrl-C), without a traceback.

Output is UTF-8 JSON Lines; on a stream that cannot encode it (``PYTHONIOENCODING=ascii``)
non-ASCII characters are written as JSON ``\\u`` escapes, which decode to the same records.
"""

from __future__ import annotations

import argparse
import codecs
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ..base.names import Guardrail
from ..errors import (
    ConfigError,
    InvalidEvent,
    ResetRefused,
    StoreError,
    StoreUnreadable,
    TripwireError,
    TruncatedLine,
)
from ..interchange.adapters import FORMAT_NAMES
from . import usage
from .usage import OneLineParser

# Each verb imports what it needs when it runs (``tripwire replay`` starts without the store,
# the server, the corpus tools or the hooks: tests/test_import_laziness.py).
if TYPE_CHECKING:
    from ..durability.rows import TaskRecord
    from ..session.guardrails import GuardrailsConfig
    from .replay import ReplayOptions

EXIT_OK = 0
EXIT_BROKEN = 1
EXIT_USAGE = 2
EXIT_GATED = 3
EXIT_REFUSED = 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it

def _encodes_unicode(out: TextIO) -> bool:
    encoding = getattr(out, "encoding", None) or "utf-8"
    try:
        return codecs.lookup(encoding).name in ("utf-8", "utf-16", "utf-32", "gb18030")
    except LookupError:
        return False


def _print(record: dict[str, Any], out: TextIO) -> None:
    out.write(json.dumps(record, ensure_ascii=not _encodes_unicode(out)) + "\n")


_Parser = OneLineParser  # usage errors in one line on stderr, exit 2 (``_usage``)


class _Version(argparse.Action):
    """``--version``: the installed distribution's version, looked up only when asked
    (``importlib.metadata`` is milliseconds of import every other run would pay)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0,
                         help=help or "show program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        from .. import __version__

        sys.stdout.write(f"tripwire {__version__}\n")  # as argparse's own version action
        parser.exit()


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; given the ``verb`` about to run, the options of the verbs
    that import modules to declare theirs (``corpus``, ``hook``) are left out unless it is
    theirs."""
    parser = _Parser(
        prog="tripwire",
        description="Guardrails for AI-agent harnesses: watch tool calls, spend and context.",
    )
    parser.add_argument("-V", "--version", action=_Version)
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    replay = verbs.add_parser(
        "replay",
        help="replay recorded event files and print what tripwire would have said",
        description=(
            "Read recordings — interchange event files (JSON Lines, one event per line) or "
            "any supported harness's transcripts, detected from their content — and run each "
            "session through the guardrails (the watchdog, the cost ceiling, the context "
            "guard, task budgets). Prints JSON Lines: one line per alert, decision (cut, halt, "
            "refused turn), feedback block, context record and task outcome, then a summary "
            "line. With no policy option it runs in warn mode with no ceilings and skips no "
            "event, so every alert of the recording is reported; under enforce a cut skips "
            "the rest of its turn, as the harness would have cancelled it. The JSON Lines go "
            "to standard output; the operator's log lines (the same alerts, cuts and halts as "
            "sentences, and notices about the run) go to standard error, so on a terminal the "
            "two interleave: redirect one (2>replay.log), or use --quiet."
        ),
    )
    replay.add_argument("paths", nargs="+", metavar="PATH",
                        help="event files or transcripts, directories of them, or - for stdin")
    _format_argument(replay)
    replay.add_argument("--quiet", action="store_true",
                        help="print only the summary line (and no operator log lines)")
    replay.add_argument("--per-file", action="store_true",
                        help="add a per-file breakdown (\"per_file\") to the summary line")
    replay.add_argument("--signals", type=usage.signal_set, metavar="IDS",
                        help="comma-separated ids of the signals to run, among the built-in "
                             "signals and the config file's custom ones ([signals] custom); "
                             "default: all (an unknown id is an error listing them)")
    replay.add_argument("--config", metavar="FILE", help="TOML or JSON config file")
    replay.add_argument("--skip-invalid", action="store_true",
                        help="report invalid lines and go on instead of stopping")
    replay.add_argument("--implementation", choices=("native", "python"),
                        help="engine to run (default: TRIPWIRE_IMPLEMENTATION, else native)")
    policy = replay.add_argument_group(
        "policy", "replay analyses a recording: with none of these it runs in warn mode with no "
        "cost ceilings and reports every alert")
    policy.add_argument("--mode", type=usage.mode,
                        help="watchdog mode: off, warn, feedback, enforce")
    attended = policy.add_mutually_exclusive_group()
    attended.add_argument("--unattended", dest="unattended", action="store_const", const=True,
                          help="as a daemon/one-shot would run: enforce, $10 session ceiling")
    attended.add_argument("--interactive", dest="unattended", action="store_const", const=False,
                          help="as an interactive run would: warn, no session ceiling")
    policy.add_argument("--max-turn-cost-usd", type=usage.dollars, metavar="USD",
                        help="per-turn cost ceiling (0: none; negative is refused)")
    policy.add_argument("--max-session-cost-usd", type=usage.dollars, metavar="USD",
                        help="per-session cost ceiling (0: none; negative is refused)")
    policy.add_argument("--fail-on", choices=("critical", "halt", "exhausted"),
                        help="exit 3 if a critical alert (or a session halt, or a task "
                             "exhausted) happened")
    budget = replay.add_argument_group(
        "task budget", "caps of each session's task (0: off); an outcome line is printed "
                       "for every task a cap bounds")
    for flag, counter, kind, what in _BUDGET_FLAGS:
        metavar = {"usd": "USD", "deadline_s": "S", "tool_timeout_s": "S"}.get(counter, "N")
        budget.add_argument(flag, dest=f"budget_{counter}", type=kind, metavar=metavar,
                            help=what)
    durable = replay.add_argument_group("durability")
    durable.add_argument("--store", metavar="STORE",
                         help="restore the session from this store (a SQLite file or a "
                              "postgresql:// URL) before the first "
                              "event, and persist every trip and reset")
    durable.add_argument("--session", metavar="ID",
                         help="the session id in the store (default: the transcript's own "
                              "session id, else its path relative to the argument)")

    convert = verbs.add_parser(
        "convert", help="write transcripts as interchange events (JSON Lines)",
        description="Read transcripts (any supported format) and write their events in the "
                    "interchange format, one JSON object per line, each with its session.")
    convert.add_argument("paths", nargs="+", metavar="PATH",
                         help="transcripts, or directories of them")
    convert.add_argument("--to", choices=("interchange",), default="interchange",
                         help="output format (default: interchange)")
    _format_argument(convert)
    convert.add_argument("--skip-invalid", action="store_true",
                         help="report invalid lines and go on instead of stopping")

    status = verbs.add_parser("status", help="halts, spend and chain state in a store")
    status.add_argument("store", metavar="STORE", help="a SQLite file or a postgresql:// URL")
    status.add_argument("--session", metavar="ID", help="one session (default: all)")
    status.add_argument("--fail-on", choices=("halt", "exhausted"),
                        help="exit 3 when a session shown is halted (halt) or a task shown is "
                             "exhausted (exhausted): a CI step after an agent run "
                             "(`claude -p`, `codex exec`) tells a halt from success")

    reset = verbs.add_parser(
        "reset", help="an operator reset of a session in a store",
        description="Write an operator reset of one session into a store; the process hosting "
                    "the session applies it at the session's next turn (or when it restores). "
                    "A store that cannot be read is moved aside first and a new chain started "
                    "with what its anchor proves (docs/durability.md).")
    reset.add_argument("store", metavar="STORE", help="a SQLite file or a postgresql:// URL")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--session", metavar="ID",
                        help="the session to reset (as `tripwire status STORE` lists them)")
    target.add_argument("--task", metavar="ID",
                        help="the task to raise or check in (--raise, --check-in)")
    reset.add_argument("--guardrail", type=usage.reset_scope, default=Guardrail.ALL,
                       metavar="{watchdog,cost_ceiling,all}",
                       help="which halt to clear (default: all)")
    reset.add_argument("--add-budget", type=usage.dollars, default=0.0, metavar="USD",
                       help="raise the per-session ceiling by this much")
    reset.add_argument("--raise", dest="raise_", action="append", type=usage.raise_spec,
                       metavar="COUNTER=+N",
                       help="with --task: raise the task's cap of COUNTER by N (COUNTER=N: to "
                            "N); continues a task that counter exhausted; exit 4 when it would "
                            "stay exhausted (repeatable)")
    reset.add_argument("--check-in", action="store_true",
                       help="with --task: the operator checked in: a new check-in window")

    verify = verbs.add_parser("verify", help="check every session's hash chain in a store")
    verify.add_argument("store", metavar="STORE", help="a SQLite file or a postgresql:// URL")

    serve = verbs.add_parser(
        "serve", help="a fleet's guardrails over HTTP (tripwire[serve]): decisions, resets",
        description="Serve GET /sessions/{id}/guardrails, POST /sessions/{id}/guardrails/reset, "
                    "POST /sessions/{id}/events, GET /healthz and GET /metrics. A bearer token "
                    "is required (--token-file, else $TRIPWIRE_SERVE_TOKEN).")
    serve.add_argument("--store", metavar="STORE",
                       help="the durable store (a SQLite file or a postgresql:// URL)")
    serve.add_argument("--config", metavar="FILE", help="a tripwire config file (TOML or JSON)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default: 127.0.0.1, loopback only)")
    serve.add_argument("--port", type=usage.port, default=8737,
                       help="port to listen on (default: 8737; 0: any free port)")
    serve.add_argument("--token-file", metavar="PATH",
                       help="file holding the bearer token (default: $TRIPWIRE_SERVE_TOKEN)")
    serve.add_argument("--agent-token-file", metavar="PATH",
                       help="file holding an agent's token: events and status only, never a "
                            "reset or raise (403)")
    usage.add_notify_arguments(serve)

    if verb in (None, "corpus"):
        from ..corpus.cli import add_parser as add_corpus_parser

        add_corpus_parser(verbs)
    else:
        verbs.add_parser("corpus")
    from .doctor import add_parser as doctor_parser
    from .gateway import add_parser as gateway_parser

    gateway_parser(verbs)

    doctor_parser(verbs)
    hook = verbs.add_parser(
        "hook", help="a live hook command for Claude Code, Codex, Gemini CLI or Cursor (reads "
                     "one event on stdin)")
    if verb in (None, "hook"):
        from .hook import build_parser as hook_parser

        hook_parser(hook)
    return parser


def _format_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("auto", *FORMAT_NAMES), default="auto",
                        help="transcript format (default: auto, detected from the content)")


#: (flag, Budget counter, type, help) of replay's task-budget flags (SPEC §7.1)
_BUDGET_FLAGS = (
    ("--max-steps", "steps", usage.count, "model requests (usage events) per task"),
    ("--max-tool-calls", "tool_calls", usage.count, "tool calls per task"),
    ("--max-tokens", "tokens", usage.count, "input + output tokens per task"),
    ("--max-task-usd", "usd", usage.dollars, "US dollars per task, across its sessions"),
    ("--deadline-s", "deadline_s", usage.seconds,
     "seconds since the task started, by the events' ts"),
    ("--tool-timeout-s", "tool_timeout_s", usage.seconds,
     "seconds a tool call may stay without its result, by the events' ts"),
    ("--max-stop-rejections", "stop_rejections", usage.count,
     "refused attempts to finish (default 8)"),
)


def replay_config(args: argparse.Namespace) -> GuardrailsConfig:
    """Replay's policy: explicit flags > the config file > warn with no ceilings (a recording
    is analysed, not guarded, unless asked)."""
    from ..session.config import read_config_file, watchdog_config
    from ..session.guardrails import GuardrailsConfig
    from ..signals import SIGNAL_IDS
    from ..signals.custom import factories_from_config, signal_ids

    file = read_config_file(args.config) if args.config else {}
    watchdog = watchdog_config(file)
    factories = factories_from_config(file)
    if args.signals:
        custom = dict(zip(signal_ids(factories), factories, strict=True))
        unknown = sorted(args.signals - set(SIGNAL_IDS) - set(custom))
        if unknown:
            known = ", ".join((*SIGNAL_IDS, *custom))
            raise ConfigError(f"--signals: unknown signal(s) {', '.join(unknown)} "
                              f"(known: {known})")
        watchdog = watchdog.restricted_to(args.signals & set(SIGNAL_IDS))
        factories = tuple(f for sid, f in custom.items() if sid in args.signals)
    unattended = args.unattended
    if unattended is None:
        unattended = file.get("session", {}).get("unattended", False)
    from ..budgets.caps import Budget

    caps = {counter: getattr(args, f"budget_{counter}", None)
            for _, counter, _, _ in _BUDGET_FLAGS}
    config = GuardrailsConfig(
        watchdog=watchdog, mode=args.mode, unattended=unattended,
        max_turn_cost_usd=args.max_turn_cost_usd, max_session_cost_usd=args.max_session_cost_usd,
        budget=Budget(**caps), custom_signals=factories, file=file,
    )
    config.resolve()  # a bad value is a usage error before any file is read
    return config


def _halt_cannot_fire(args: argparse.Namespace, config: GuardrailsConfig) -> str | None:
    """Why ``--fail-on halt`` cannot fire with this policy (None when it can): only enforce
    mode halts for the watchdog, and only a cost ceiling halts in the other modes."""
    from ..base.modes import Mode

    resolved = config.resolve()
    if args.fail_on != "halt" or resolved.mode == Mode.ENFORCE or args.store \
            or resolved.max_turn_cost_usd or resolved.max_session_cost_usd:
        return None
    return (f"--fail-on halt cannot fire: in {resolved.mode} mode the watchdog never halts and "
            "no cost ceiling is set (add --mode enforce, --unattended or a --max-*-cost-usd)")


def _replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .replay import ReplayOptions, event_files

    config = replay_config(args)
    bounded = any(getattr(args, f"budget_{c}", None) for _, c, _, _ in _BUDGET_FLAGS) or \
        "budget" in (config.file or {})
    options = ReplayOptions(guardrails=config, skip_invalid=args.skip_invalid,
                            implementation=args.implementation, report_outcomes=bounded)
    files = event_files(args.paths, args.format)
    if args.session and len(files) > 1:
        raise InvalidEvent("--session names one session: give one event file")
    note = _halt_cannot_fire(args, config)
    if note:
        err.write(f"tripwire: note: {note}\n")
    store = _open_store(args.store) if args.store else None
    logger = logging.getLogger("tripwire")
    quiet = _OperatorLinesOff()
    if args.quiet:  # the summary line only: no alert, cut or halt log lines either
        logger.addFilter(quiet)
    try:
        return _replay_files(args, options, files, store, out, err)
    finally:
        logger.removeFilter(quiet)


class _OperatorLinesOff(logging.Filter):
    """Drops the sessions' operator lines (alerts, cuts, halts, resets: what the JSON records
    already say); notices about the run itself (an unpriced model, the store) still show."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not hasattr(record, "tripwire_event")


def _replay_files(args: argparse.Namespace, options: ReplayOptions, files: list[Any],
                  store: Any, out: TextIO, err: TextIO) -> int:
    from ..budgets.clock import ReplayClock
    from .replay import ReplayStats, replay_transcript, shown_path

    factory = None
    if store is not None:
        from ..session.guardrails import Guardrails

        def factory(name: str) -> Guardrails:
            return Guardrails(options.resolved(), session_id=name,
                              implementation=args.implementation, store=store,
                              clock=ReplayClock())
    stats = ReplayStats()
    per_file = []
    many = len(files) > 1
    for transcript in files:
        path = shown_path(transcript)
        total, stats = stats, ReplayStats()
        for record in replay_transcript(transcript, options, stats, session_id=args.session,
                                        guardrails_for=factory):
            if _reported(record, path, err):
                continue
            if args.quiet:
                continue
            if many:
                record = {**record, "file": path}
            _print(record, out)
        if args.per_file:
            per_file.append({"file": path, "format": transcript.format,
                             **stats.summary(per_file=True)})
        total.merge(stats)
        stats = total
    summary = stats.summary()
    if args.per_file:
        summary["per_file"] = per_file
    _print(summary, out)
    if args.fail_on == "critical" and stats.critical_alerts:
        return EXIT_GATED
    halted = stats.decisions["halt_session"] or stats.decisions["refuse_turn"]
    if args.fail_on == "halt" and halted:
        return EXIT_GATED
    if args.fail_on == "exhausted" and stats.outcomes["exhausted"]:
        return EXIT_GATED
    return EXIT_OK


def _reported(record: dict[str, Any], path: Any, err: TextIO) -> bool:
    """Invalid and truncated lines go to stderr, one line each; True if ``record`` was one."""
    if record["kind"] == "invalid":
        err.write(f"tripwire: {path}:{record['line']}: skipped: {record['error']}\n")
        return True
    if record["kind"] == "truncated":
        err.write(f"tripwire: {path}:{record['line']}: {record['error']}\n")
        return True
    return False


def _convert(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Each transcript's events as interchange JSON Lines, with their session (and the
    1-based source line they came from)."""
    from ..interchange.adapters import read as read_items
    from ..interchange.events import event_record
    from .replay import event_files

    for transcript in event_files(args.paths, args.format):
        for item in read_items(transcript):
            if item.error is not None:
                kind = "truncated" if isinstance(item.error, TruncatedLine) else "invalid"
                if kind == "invalid" and not args.skip_invalid:
                    raise item.error
                _reported({"kind": kind, "line": item.line, "error": item.error.message},
                          transcript.path, err)
                continue
            if item.event is not None:
                _print({**event_record(item.event), "session": item.session}, out)
    return EXIT_OK


def _open_store(path: str) -> Any:
    """A store to write (replay --store): created when missing. A ``postgresql://`` URL is a
    PostgreSQL store, anything else a SQLite file. One that cannot be opened is one line."""
    from ..durability.open import open_store

    return open_store(path, check=True)


def _existing_store(path: str, *, write: bool = False) -> Any:
    """A store the operator verbs work on: it must exist and be a tripwire store, sealed with
    the key in use (a wrong key is a ``StoreKeyMismatch``, exit 2: not tampering). Read-only
    verbs open it read-only (nothing is written into a foreign or empty file); ``reset``
    checks it read-only first, then opens it to append. ``StoreUnreadable`` when it exists
    but cannot be read."""
    from ..durability.open import open_existing

    return open_existing(path, write=write)


def _unreadable_view(path: str, problem: StoreError, only: str | None) -> tuple[Any, list[str]]:
    """A store that cannot be read, as the operator verbs show it: the store object (its
    anchor is still readable) and the sessions to report (those the anchor knows; ``only``:
    that one)."""
    from ..durability.open import open_store

    store = open_store(path, read_only=True)  # not opened: the anchor is read without it
    return store, [only] if only else store.anchored_sessions()


def _status(args: argparse.Namespace, out: TextIO) -> int:
    from ..budgets.task_rows import TASK_PREFIX
    from ..context.stats import context_stats_from_rows
    from ..durability.fold import fold_history

    try:
        store = _existing_store(args.store)
        histories = store.histories([args.session] if args.session else None)
    except StoreUnreadable as exc:
        return _status_unreadable(args, exc, out)
    if args.session and not histories[args.session].exists:
        if not args.fail_on:
            raise InvalidEvent(f"{store.path}: no session {args.session!r}")
        # a gate after a run: a session that recorded nothing halted nothing (a halt is rows)
        _print({"kind": "session", "session": args.session, "halted": False, "rows": 0,
                "note": "the store holds no rows of this session"}, out)
        store.close()
        return EXIT_OK
    halted = exhausted = False
    for sid, history in sorted(histories.items()):
        folded = fold_history(history)
        report = history.report
        if sid.startswith(TASK_PREFIX):  # a task's own chain: its task line only
            exhausted |= _print_tasks(sid, None, folded.task_rows, report, out)
            continue
        halted |= bool(folded.halted_by)
        _print({**_price_notes(history.rows),
            "kind": "session", "session": sid, "halted": bool(folded.halted_by),
            "halted_by": list(folded.halted_by), "reason": folded.reason or None,
            "spent_usd": round(folded.spent_usd, 9), "granted_usd": round(folded.granted_usd, 9),
            "rows": report.rows, "chain": "intact" if report.intact else "broken",
            "problem": report.problem,
            # the /context view, rebuilt from the stored rows (the live window is not stored)
            "context": context_stats_from_rows(history.rows).to_dict(),
        }, out)
        exhausted |= _print_tasks(sid, sid, folded.task_rows, report, out)
    store.close()
    if (args.fail_on == "halt" and halted) or (args.fail_on == "exhausted" and exhausted):
        return EXIT_GATED
    return EXIT_OK


def _status_unreadable(args: argparse.Namespace, exc: StoreUnreadable, out: TextIO) -> int:
    """``status`` of a store that cannot be read: a store line, then each session the anchor
    knows (or the one asked) as a restore would see it: halted (store_unreadable), with the
    spend the anchor proves. Exit 1: a finding, as ``verify``'s."""
    from ..durability.fold import fold_unreadable

    store, sessions = _unreadable_view(args.store, exc, args.session)
    _print({"kind": "store", "store": store.path, "chain": "unreadable", "problem": str(exc),
            "anchor": store.anchor, "anchored_sessions": len(store.anchored_sessions())}, out)
    for sid in sessions:
        folded = fold_unreadable(str(exc), store.anchored(sid))
        _print({"kind": "session", "session": sid, "halted": True,
                "halted_by": list(folded.halted_by), "reason": folded.reason,
                "spent_usd": round(folded.spent_usd, 9), "granted_usd": 0.0, "rows": None,
                "chain": "unreadable", "problem": str(exc), "context": None}, out)
    return EXIT_BROKEN


def _print_tasks(chain: str, session: str | None, rows: list[TaskRecord], report: Any,
                 out: TextIO) -> bool:
    """One line per task whose rows a chain holds; whether one of them is exhausted."""
    from .task_ops import print_tasks

    return print_tasks(chain, session, rows, report, out, _print)


def _price_notes(rows: Any) -> dict[str, Any]:
    """What the latest spend row says of prices (SPEC §11.3): estimated costs, and models with
    no price, on whose usage a cost ceiling cannot trip."""
    from ..durability.rows import NO_SPEND, parse, spend_of

    last = next((spend for spend in (spend_of(parse(r.kind, r.data)) for r in reversed(rows))
                 if spend.spent_usd is not None), NO_SPEND)
    notes: dict[str, Any] = {}
    if last.estimated:
        notes["cost_estimated"] = True
    unpriced = last.unpriced_models
    if unpriced:
        notes["unpriced_models"] = list(unpriced)
        if last.max_session_usd or last.max_turn_usd:
            names = ", ".join(repr(m) for m in unpriced)
            notes["note"] = (f"the cost ceiling cannot trip on usage of {names}: the price "
                             "catalogue has no price for it, so it has no cost")
    return notes


def _reset(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """A reset written into the store; the process hosting the session applies it at the
    session's next turn (or on restore). Refused exactly as SPEC §4 says."""
    from ..durability.rows import append
    from ..policy.halts import reset_stored

    if args.task is not None or args.raise_ or args.check_in:
        return _reset_task(args, out, err)
    try:
        store = _existing_store(args.store, write=True)
        history = store.history(args.session)
    except StoreUnreadable as exc:
        store = _replace_unreadable(args, exc, out)
        history = store.history(args.session)
    else:
        if not history.exists:
            raise InvalidEvent(f"{store.path}: no session {args.session!r}")
    scope: Guardrail = args.guardrail
    try:  # the library's own rule, on the session its rows describe
        row, outcome = reset_stored(history, scope, args.add_budget, by="tripwire reset")
    except ResetRefused as refused:
        err.write(f"tripwire: {refused.reason}\n")
        return EXIT_REFUSED
    append(store, args.session, row)
    _print({"kind": "reset", "session": args.session, "guardrail": scope.value,
            "cleared": list(outcome.cleared),
            "max_session_cost_usd": outcome.max_session_cost_usd}, out)
    store.close()
    return EXIT_OK


def _reset_task(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .task_ops import reset_task

    if args.task is None or not (args.raise_ or args.check_in):
        raise ConfigError("reset: --raise and --check-in go with --task, which needs one of "
                          "them")
    store = _existing_store(args.store, write=True)
    try:
        return reset_task(args, store, out, err, _print)
    finally:
        store.close()


def _replace_unreadable(args: argparse.Namespace, problem: StoreUnreadable,
                        out: TextIO) -> Any:
    """The operator's reset of a store that cannot be read: move it (and its anchor) aside as
    evidence, and start a new chain that carries what the anchor proves of each session (its
    spend, its tasks' consumption, its standing halts: ``restore.carried_rows``). A session the
    anchor does not know starts afresh; without an anchor, every session does. The reset
    itself is then written as on any store."""
    import time

    from ..durability.fold import carried_rows
    from ..durability.open import open_store
    from ..durability.rows import append

    old, sessions = _unreadable_view(args.store, problem, None)
    entries = {sid: old.anchored(sid) for sid in sessions}
    suffix = "unreadable-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    moved = old.quarantine(suffix)
    store = open_store(args.store, check=True)
    why = (f"the store was unreadable ({problem}) and was moved aside by tripwire reset; this "
           "is what its anchor proved")
    for sid, entry in entries.items():
        if entry is not None:
            for row in carried_rows(entry, why):
                append(store, sid, row)
    _print({"kind": "store_replaced", "store": store.path, "problem": str(problem),
            "moved_to": moved, "carried_sessions": sum(1 for e in entries.values() if e)}, out)
    return store


def _verify(args: argparse.Namespace, out: TextIO) -> int:
    from ..durability.chain import format_reports

    try:
        store = _existing_store(args.store)
        reports = store.verify()
    except StoreUnreadable as exc:
        return _verify_unreadable(args, exc, out)
    if reports:
        out.write(format_reports(reports) + "\n")
    sessions = [r for r in reports if r.session != "*"]
    rows = sum(r.rows for r in sessions)
    broken = [r for r in reports if not r.intact]
    counts = f"{len(sessions)} session{'s' if len(sessions) != 1 else ''}, {rows} row" + (
        "s" if rows != 1 else "")
    if broken:  # always a verdict, even for an empty store
        out.write(f"verdict: BROKEN ({len(broken)} of the reports above; {counts})\n")
    else:
        out.write(f"verdict: intact ({counts})\n")
    store.close()
    return EXIT_OK if not broken else EXIT_BROKEN


def _verify_unreadable(args: argparse.Namespace, exc: StoreUnreadable, out: TextIO) -> int:
    from ..base.money import usd

    store, sessions = _unreadable_view(args.store, exc, None)
    out.write(f"*: UNREADABLE: {exc}\n")
    for sid in sessions:
        entry = store.anchored(sid)
        if entry is None:
            continue
        halts = f", halted by {', '.join(entry.halted)}" if entry.halted else ""
        out.write(f"{sid}: UNREADABLE: the anchor proves {usd(entry.spend_nano)} spent{halts}\n")
    anchored = f"{len(sessions)} session{'s' if len(sessions) != 1 else ''} in its anchor" \
        if store.anchor else "no anchor"
    out.write(f"verdict: UNREADABLE (the store cannot be read; {anchored}; `tripwire reset "
              "STORE --session ID` moves it aside and starts a new chain)\n")
    return EXIT_BROKEN


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise ConfigError("tripwire serve needs Starlette and uvicorn: "
                          "pip install 'tripwire[serve]'") from None
    from ..fleet.fleet import Fleet
    from ..session.guardrails import GuardrailsConfig
    from ..web.console import EventFeed, fanout
    from ..web.notify import attach, notifier_for
    from . import serve

    token = serve.read_token(args.token_file)
    agent_token = serve.read_agent_token(args.agent_token_file)
    config = GuardrailsConfig.from_file(args.config) if args.config else GuardrailsConfig()
    store = _open_store(args.store) if args.store else None
    if store is not None and store.key_source == "default":
        from ..durability.chain import notice_default_key

        notice_default_key()  # once, at the start (a store made now said it already)
    notifier = notifier_for(args.notify, args.notify_format, config.file.get("notify"))
    feed = EventFeed()  # what the operator page shows as it happens
    fleet = Fleet(config, store=store,
                  on_event=fanout(feed.on_event, notifier.on_event if notifier else None))
    attach(notifier, fleet)

    def announce(line: str) -> None:
        out.write(f"tripwire serve: {line}\n")
        out.flush()

    serve.run(fleet, token, args.host, args.port, announce, notifier, agent_token, feed)
    if store is not None:
        store.close()
    return EXIT_OK


#: options whose value may start with "-" (argparse would read "-5:3" as an option)
_DASHED = ("--values",)


def _dashed_values(argv: list[str]) -> list[str]:
    """``--values -5:3`` as ``--values=-5:3``, so the option's own check answers (a range of
    positive integers), not argparse's "expected one argument"."""
    out: list[str] = []
    values = iter(argv)
    for arg in values:
        if arg in _DASHED:
            value = next(values, None)
            if value is not None and value.startswith("-") and value not in ("-h", "--help"):
                out.append(f"{arg}={value}")
                continue
            out.append(arg)
            if value is not None:
                out.append(value)
            continue
        out.append(arg)
    return out


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hook"]:  # the hook path skips the rest of the CLI: it runs on every event
        from .hook import main as hook_main

        return hook_main(argv[1:], stdout=out, stderr=err)
    out = out or sys.stdout
    err = err or sys.stderr
    argv = _dashed_values(argv)
    parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
    args = parser.parse_args(argv)
    try:
        if args.verb == "replay":
            return _replay(args, out, err)
        if args.verb == "convert":
            return _convert(args, out, err)
        if args.verb == "status":
            return _status(args, out)
        if args.verb == "reset":
            return _reset(args, out, err)
        if args.verb == "verify":
            return _verify(args, out)
        if args.verb == "serve":
            return _serve(args, out)
        if args.verb == "gateway":
            from .gateway import run as gateway

            return gateway(args, out, err)
        if args.verb == "doctor":
            from .doctor import run as doctor

            return doctor(args, out, err)
        if args.verb == "corpus":
            from ..corpus.cli import run as corpus

            return corpus(args, out, err)
    except (TripwireError, FileNotFoundError, StoreError) as exc:
        err.write(f"tripwire: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:  # `tripwire replay ... | head`
        return EXIT_OK
    except KeyboardInterrupt:
        err.write("tripwire: interrupted\n")
        return EXIT_INTERRUPTED
    parser.error(f"unknown verb {args.verb}")  # pragma: no cover
    return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
