"""Injected loops: does tripwire stop a loop spliced into a healthy recorded session, and how soon?

    python benchmarks/injected_loops.py [--corpus DIR ...] [--labels FILE ...] [-j N]
                                        [--implementation native|python] [--json FILE]

Every healthy session of the corpus directories is read as ``tripwire corpus`` reads it
(``tripwire.corpus.sessions``). By default: the submitted runs of the shared corpus (the
mini-swe-agent SWE-bench runs and the SWE-agent demonstrations, every one of which ended by
submitting) and the tau-bench airline tasks with reward 1. A session that a ``--labels`` file
(``tripwire corpus`` label files) labels not healthy is left out; an unlabelled one is kept.

For each loop kind, each session gets a synthetic loop spliced in at its midpoint (after the
first result at or past the middle event, so no call is separated from its answer), of calls of
the session's own shell tool (``bash`` where it has none: tau-bench's agents have no shell):

- ``same-call``: the same shell call with the same result, 12 times;
- ``ping-pong``: two calls alternating, each with its own unchanging result, 6 laps;
- ``volatile-sleep``: ``sleep N && tail -n 50 app.log`` with N changing, same result, 12 times;
- ``volatile-curl``: ``curl '...?_=<epoch ms>'`` with the timestamp changing, same result, 12 times;
- ``seen-answers``: 20 different calls whose results are all answers the splice point's turn
  already got, in turn (warnings only: no call repeats); a session whose turn has no successful
  result before the splice point has no such loop;
- ``chant``: one agent message that ends in 40 copies of one 90-byte passage (a model looping
  inside its own response, as two recorded Gemini runs did), then one shell call.

Each spliced session is replayed as ``tripwire corpus`` replays (``corpus_config``: warn mode,
no cost ceilings, every event observed; one fleet's batch path, ``Fleet.observe_many``). Per kind
and per signal: the sessions with an alert of that signal inside the injected stretch, and the
median number of injected steps (a call with its result, or a message) from the loop's start to
its first such alert ("calls" in the table); per kind, the same for any critical alert; and the alerts before the injection point, which must be exactly the
unspliced session's (the script fails if they are not).
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from tripwire.base.decision import Decision
from tripwire.base.log import LOGGER
from tripwire.corpus.labels import Labels, read_labels
from tripwire.corpus.measure import corpus_config
from tripwire.corpus.sessions import corpus_files, session_events
from tripwire.errors import InvalidEvent
from tripwire.fleet.fleet import Fleet, batch_row
from tripwire.interchange.adapters import Transcript
from tripwire.interchange.events import (
    Call,
    Event,
    Result,
    Retry,
    StopAttempt,
    TaskEnd,
    TaskStart,
    Text,
    TurnStart,
)
from tripwire.session.guardrails import ResolvedConfig
from tripwire.signals import SIGNAL_IDS, SIGNALS, WatchdogConfig

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "corpus"
DEFAULT_CORPUS = [SHARED / "mini-swe-agent-swebench", SHARED / "swe-agent-demos",
                  SHARED / "tau-bench-airline"]
#: tau-bench's results file: reward 1 is healthy (the other default corpora all submitted)
DEFAULT_LABELS = [SHARED / "tau-bench-airline" / "gpt-4o-airline.json"]
SEVERITY = {s.id: s.severity for s in SIGNALS}
ANY_CRITICAL = "any critical"
#: the host's events: not batch rows (as in tripwire.corpus.measure)
HOST_EVENTS = (TaskStart, TaskEnd, StopAttempt)

#: per injected step: (command, result payload), a call and its result; or (None, text), a
#: message of the agent's
Loop = list[tuple[str | None, str]]


def shell(command: str) -> str:
    return json.dumps({"command": command})


def answer(text: str) -> str:
    return f"<returncode>0</returncode>\n<output>\n{text}\n</output>"


def same_call(_seen: list[Any]) -> Loop:
    out = answer("Traceback (most recent call last):\n  File \"run.py\", line 3\n"
                 "ConnectionRefusedError: [Errno 111] Connection refused")
    return [("python run.py --check", out)] * 12


def ping_pong(_seen: list[Any]) -> Loop:
    status = answer("On branch main\nChanges not staged for commit:\n\tmodified:   app/core.py")
    tests = answer("F\n=== FAILURES ===\ntest_core.py::test_parse FAILED\n1 failed in 0.12s")
    return [("git status", status), ("python -m pytest tests/test_core.py -x -q", tests)] * 6


def volatile_sleep(_seen: list[Any]) -> Loop:
    log = answer("2026-12-07 10:00:01 INFO waiting for worker\n"
                 "2026-12-07 10:00:02 INFO worker not ready")
    return [(f"sleep {n} && tail -n 50 app.log", log) for n in range(3, 15)]


def volatile_curl(_seen: list[Any]) -> Loop:
    body = answer('{"status": "pending", "job": 4711}')
    start = 1733480000123
    return [(f"curl -s 'http://localhost:8000/api/jobs/4711?_={start + 7919 * i}'", body)
            for i in range(12)]


def seen_answers(seen: list[Any]) -> Loop:
    """20 different calls, each answered with an answer the session already got (in turn)."""
    if not seen:
        return []
    return [(f"grep -rn 'def handler_{i}' src/", seen[i % len(seen)]) for i in range(20)]


def chant(_seen: list[Any]) -> Loop:
    lap = "Wait, the test still fails. Let me look at the config loader again, line by line.\n"
    return [(None, "I see the problem now.\n" + lap * 40),
            ("python -m pytest tests/test_config.py -x -q", answer("1 failed in 0.10s"))]


KINDS: dict[str, Callable[[list[Any]], Loop]] = {
    "same-call": same_call, "ping-pong": ping_pong, "volatile-sleep": volatile_sleep,
    "volatile-curl": volatile_curl, "seen-answers": seen_answers, "chant": chant}


def injection_point(events: Sequence[Event]) -> int:
    """The index after the first result at or past the middle event (a call keeps its answer);
    the session's end if there is none."""
    for i in range(len(events) // 2, len(events)):
        if isinstance(events[i], Result):
            return i + 1
    return len(events)


def shell_tool(events: Sequence[Event]) -> str:
    """The session's own shell tool: the most used tool whose arguments have a command."""
    counts: dict[str, int] = {}
    for ev in events:
        if isinstance(ev, Call) and isinstance(ev.args, str) and '"command"' in ev.args:
            counts[ev.name] = counts.get(ev.name, 0) + 1
    return max(counts, key=lambda n: counts[n]) if counts else "bash"


def splice(events: Sequence[Event], at: int, tool: str,
           loop: Loop) -> tuple[list[Event], list[int]]:
    """The session with the loop at ``at``, and per injected event the number of its step
    (1-based: how many steps of the loop had begun at it)."""
    injected: list[Event] = []
    steps: list[int] = []
    for k, (command, payload) in enumerate(loop):
        call_id = f"injected-{k}"
        if command is None:
            injected.append(Text(payload))
        else:
            injected += [Call(tool, shell(command), call_id),
                         Result(tool, call_id, payload=payload)]
        steps += [k + 1] * (len(injected) - len(steps))
    return [*events[:at], *injected, *events[at:]], steps


def replay(events: Sequence[Event], resolved: ResolvedConfig,
           implementation: str | None) -> list[tuple[int, str]]:
    """Every alert of one session as ``(event index, signal)``, through one fleet's batch path,
    as ``tripwire corpus`` replays a transcript."""
    fleet = Fleet(resolved, implementation=implementation)
    name = "session"
    alerts: list[tuple[int, str]] = []
    rows: list[tuple[Any, ...]] = []
    position: list[int] = []

    def observe_rows() -> None:
        for row, _, outcome in fleet.observe_many(rows) if rows else ():
            if type(outcome) is Decision:
                alerts.extend((position[row], a.signal) for a in outcome.alerts)
        rows.clear()
        position.clear()

    fleet.session(name)
    for index, event in enumerate(events):
        if isinstance(event, Retry):
            observe_rows()
            fleet.session(name).on_retry(event.reason, event.calls)
        elif not isinstance(event, HOST_EVENTS):
            rows.append(batch_row(name, event))
            position.append(index)
    observe_rows()
    return alerts


def measure_file(args: tuple[Transcript, Labels, str | None]) -> list[dict[str, Any]]:
    """Per session of one transcript and per kind: where the loop went, and its alerts."""
    transcript, labels, implementation = args
    LOGGER.addFilter(lambda record: False)  # the per-alert operator lines
    logging.getLogger().setLevel(logging.ERROR)
    resolved = corpus_config(WatchdogConfig()).resolve()
    sessions: dict[str, list[Event]] = {}
    for name, event in session_events(transcript):
        sessions.setdefault(name, []).append(event)
    out = []
    for name, events in sessions.items():
        label = labels.of(name)
        if label is not None and not label.healthy:
            continue
        at = injection_point(events)
        tool = shell_tool(events)
        # the answers the turn of the splice point already got (what "already seen" means to
        # no-new-state: a turn's own answers; tau-bench's sessions have a turn per user message)
        turn = max((i for i in range(at) if isinstance(events[i], TurnStart)), default=0)
        # most recent first: a turn remembers its last 64 distinct answers (no-new-state's memory)
        seen = list(dict.fromkeys(
            e.payload for e in reversed(events[turn:at])
            if isinstance(e, Result) and not e.error and isinstance(e.payload, str)
            and e.payload.strip()))  # an empty result is no answer (it counts as no state)
        baseline = replay(events, resolved, implementation)
        before = sorted(a for a in baseline if a[0] < at)
        for kind, make in KINDS.items():
            loop = make(seen)
            if not loop:
                continue
            spliced, steps = splice(events, at, tool, loop)
            alerts = replay(spliced, resolved, implementation)
            end = at + len(steps)
            first: dict[str, int] = {}  # signal -> injected steps up to its first alert
            for index, signal in sorted(alerts):
                if at <= index < end and signal not in first:
                    first[signal] = steps[index - at]
            out.append({"session": f"{transcript.path}#{name}", "kind": kind, "injected_at": at,
                        "calls": len(loop), "first": first,
                        "before": sorted(a for a in alerts if a[0] < at),
                        "baseline_before": before})
    return out


def table(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    rows: list[dict[str, Any]] = []
    for kind in KINDS:
        mine = [r for r in records if r["kind"] == kind]
        if not mine:
            continue
        firsts: dict[str, list[int]] = {}
        for r in mine:
            criticals = [n for s, n in r["first"].items() if SEVERITY[s] == "critical"]
            if criticals:
                firsts.setdefault(ANY_CRITICAL, []).append(min(criticals))
            for s, n in r["first"].items():
                firsts.setdefault(s, []).append(n)
        false_before = sum(len(r["before"]) for r in mine)
        false_baseline = sum(len(r["baseline_before"]) for r in mine)
        critical_before = sum(SEVERITY[s] == "critical" for r in mine for _, s in r["before"])
        for signal in [ANY_CRITICAL, *[s for s in SIGNAL_IDS if s in firsts]]:
            hits = firsts.get(signal, [])
            rows.append({"kind": kind, "calls": mine[0]["calls"], "signal": signal,
                         "severity": "" if signal == ANY_CRITICAL else SEVERITY[signal],
                         "sessions": len(mine), "detected": len(hits),
                         "median_calls": statistics.median(hits) if hits else None,
                         "false_before": false_before, "false_before_unspliced": false_baseline,
                         "critical_before": critical_before})
    lines = [f"{'kind':<15}{'calls':>6}  {'signal':<24}{'severity':<10}{'detected':>14}"
             f"{'median calls':>14}  alerts before the loop"]
    for r in rows:
        rate = f"{r['detected']}/{r['sessions']} {100 * r['detected'] / r['sessions']:.0f}%"
        med = "-" if r["median_calls"] is None else f"{r['median_calls']:g}"
        before = "" if r["signal"] != ANY_CRITICAL else (
            f"{r['false_before']} (unspliced {r['false_before_unspliced']}), "
            f"{r['critical_before']} critical")
        lines.append(f"{r['kind']:<15}{r['calls']:>6}  {r['signal']:<24}{r['severity']:<10}"
                     f"{rate:>14}{med:>14}  {before}".rstrip())
    return rows, "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, nargs="*", default=DEFAULT_CORPUS)
    parser.add_argument("--labels", type=Path, nargs="*", default=None, metavar="FILE",
                        help="label files; sessions labelled not healthy are left out "
                             "(default: tau-bench's results file, with the default corpus)")
    parser.add_argument("-j", "--jobs", type=int, default=1)
    parser.add_argument("--implementation", choices=("native", "python"))
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the table here")
    args = parser.parse_args(argv)
    paths = [str(p) for p in args.corpus if p.exists()]
    if not paths:
        print("skipped: no corpus directory exists ("
              + ", ".join(map(str, args.corpus)) + "; ../shared absent?)")
        return 0
    label_files = args.labels if args.labels is not None else (
        [p for p in DEFAULT_LABELS if p.exists()] if args.corpus == DEFAULT_CORPUS else [])
    try:
        labels = Labels({k: v for f in label_files for k, v in read_labels(f).by_key.items()})
        work = [(t, labels, args.implementation) for _, t in corpus_files(paths)]
        if args.jobs > 1:
            with ProcessPoolExecutor(max_workers=args.jobs) as pool:
                per_file = list(pool.map(measure_file, work))
        else:
            per_file = [measure_file(w) for w in work]
    except (InvalidEvent, OSError) as exc:  # a bad label or session file: one line
        print(f"injected_loops: {exc}", file=sys.stderr)
        return 2
    records = [r for file in per_file for r in file]
    changed = [r["session"] for r in records if r["before"] != r["baseline_before"]]
    if changed:
        print(f"alerts before the injection point differ from the unspliced session's: "
              f"{sorted(set(changed))[:5]}", file=sys.stderr)
        return 1
    sessions = len({(r["session"]) for r in records if r["kind"] == "same-call"})
    rows, text = table(records)
    print(f"{sessions} sessions ({', '.join(paths)}), engine "
          f"{args.implementation or 'default'}; spliced after the first result past the middle")
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"corpus": paths, "sessions": sessions,
                                         "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
