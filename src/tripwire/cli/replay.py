"""Replay recorded sessions through ``Guardrails`` and report what tripwire would have done.

Each file is one session. Output records (``tripwire replay`` prints them as JSON Lines; the
format is a public contract), with ``event`` the 0-based index of the event being processed:

- ``{"kind": "alert", "event", "signal", "severity", "scope", "reason", "guidance"}``: a signal
  tripped at that event, in every mode (warn and feedback report after the turn, but the record
  names the tripping event);
- ``{"kind": "decision", "event", "action", "guardrail", "reason"}``: ``cut_turn``,
  ``halt_session`` or ``refuse_turn``;
- ``{"kind": "feedback", "event", "text"}``: the block delivered at a ``turn_start``;
- ``{"kind": "feedback_withdrawn", "event", "signal", "alert_event"}``: the agent spoke before a
  queued tools-without-text note was delivered;
- ``{"kind": "skipped", "event", "count", "reason"}``: events a harness would never have sent,
  because tripwire cut (or refused) their turn; replay resumes at the next ``turn_start``;
- ``{"kind": "reset" | "reset_refused" | "reset_invalid", "event", ...}``: operator resets;
- ``{"kind": "outcome", "event", "outcome", "task", "counter", "by_task", ..., "report"}``: a
  task ended (SPEC §7.2): at its ``task_end``, at the event that exhausted it, or at the end of
  the recording (``interrupted``) for a task begun by ``task_start`` or bounded by a budget
  flag; printed once per task. Events may carry ``ts`` (seconds): the recording's clock for
  deadlines and tool timeouts (a ``cancel_tool`` decision names the timed-out ``call_ids``);
- ``{"kind": "context", "event", "utilization", "estimated", "action"}``: ``compact`` when
  compaction becomes pending, ``turn_cut`` when the context reaches 95% of the window; a
  ``turn_cut`` carries ``"enforced"``: true when the turn was cut (``enforce`` mode: the rest
  of the turn is skipped, as a harness would have cancelled it), false when it is only
  reported (``warn``, ``feedback``, ``off``: a recording analysis skips nothing, so every
  later alert is still reported). Replay cannot compact a recording: without usage events the
  estimate only grows, so under ``enforce`` each later turn is cut at its first large result.

The summary line carries ``"v"``, the output schema's version (``SUMMARY_VERSION``).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.decision import CONTINUE, HALT_SESSION, REFUSE_TURN, Decision, Turn
from ..budgets.caps import Budget
from ..budgets.clock import ReplayClock
from ..budgets.outcomes import Outcome
from ..budgets.task import Task
from ..errors import InvalidEvent, InvalidReset, ResetRefused, TruncatedLine
from ..interchange.adapters import Item, Transcript, detect_or_fail, transcripts
from ..interchange.adapters import read as read_transcript
from ..interchange.events import (
    BudgetRaise,
    CheckIn,
    Reset,
    TaskEnd,
    TaskStart,
    TurnEnd,
    TurnStart,
    Usage,
)
from ..interchange.prices import Priced, model_name
from ..policy.halts import ResetOutcome
from ..policy.reporting import OperatorEvent
from ..session.dispatch import observe_event
from ..session.guardrails import Guardrails, GuardrailsConfig, ResolvedConfig
from ..signals import Alert

__all__ = ["ReplayOptions", "ReplayStats", "replay_file", "replay_transcript", "event_files",
           "analysis_config", "STDIN", "shown_path"]

#: The output schema's version, the summary line's ``"v"``: bumped by a change that is not
#: purely additive (a field renamed, removed or given another meaning).
SUMMARY_VERSION = 1
#: The path argument that names standard input (``tripwire replay -``).
STDIN = "-"


@dataclass
class ReplayOptions:
    guardrails: GuardrailsConfig = field(
        default_factory=lambda: GuardrailsConfig(mode="warn", unattended=False)
    )
    skip_invalid: bool = False
    implementation: str | None = None
    #: print an outcome for the session's implicit task too (a budget flag bounds it)
    report_outcomes: bool = False
    _resolved: ResolvedConfig | None = field(default=None, init=False, repr=False,
                                             compare=False)

    def resolved(self) -> ResolvedConfig:
        """The guardrails config, resolved once for every session of the run (a directory of
        transcripts is hundreds of sessions)."""
        if self._resolved is None:
            self._resolved = analysis_config(self.guardrails)
        return self._resolved


@dataclass
class ReplayStats:
    files: int = 0
    sessions: int = 0
    events: int = 0
    invalid_lines: int = 0
    skipped_lines: int = 0  # recognized transcript lines that carry no event
    truncated_lines: int = 0
    skipped_events: int = 0
    alerts: Counter[str] = field(default_factory=Counter)
    critical_alerts: int = 0
    decisions: Counter[str] = field(default_factory=Counter)
    halted_sessions: int = 0
    estimated_costs: int = 0  # usages priced from token prices, not reported
    unpriced_models: set[str] = field(default_factory=set)  # models of usages with no price
    outcomes: Counter[str] = field(default_factory=Counter)  # task outcomes by kind

    def merge(self, other: ReplayStats) -> None:
        """Add another run's counts (one file's, for ``--per-file``)."""
        for name in ("files", "sessions", "events", "invalid_lines", "skipped_lines",
                     "truncated_lines", "skipped_events", "critical_alerts", "halted_sessions",
                     "estimated_costs"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.alerts.update(other.alerts)
        self.decisions.update(other.decisions)
        self.unpriced_models |= other.unpriced_models
        self.outcomes.update(other.outcomes)

    def summary(self, *, per_file: bool = False) -> dict[str, Any]:
        """The summary line (``per_file``: one file's entry, without kind, v and files)."""
        head = {} if per_file else {"kind": "summary", "v": SUMMARY_VERSION, "files": self.files}
        return {
            **head,
            "sessions": self.sessions,
            "events": self.events,
            "invalid_lines": self.invalid_lines,
            "skipped_lines": self.skipped_lines,
            "truncated_lines": self.truncated_lines,
            "skipped_events": self.skipped_events,
            "alerts": sum(self.alerts.values()),
            "by_signal": dict(sorted(self.alerts.items())),
            "decisions": dict(sorted(self.decisions.items())),
            "halted_sessions": self.halted_sessions,
            "estimated_costs": self.estimated_costs,
            "unpriced_models": sorted(self.unpriced_models),
            **({"outcomes": dict(sorted(self.outcomes.items()))} if self.outcomes else {}),
        }


def event_files(paths: Iterable[str], fmt: str = "auto") -> list[Transcript]:
    """Expand paths: a file is itself, a directory is every transcript below it (sorted),
    ``-`` standard input (session ``stdin``). Raises FileNotFoundError / InvalidEvent with a
    message a user can act on."""
    found: list[Transcript] = []
    paths = list(paths)
    if paths.count(STDIN) > 1:
        raise InvalidEvent("standard input (-) can be read once only")
    for raw in paths:
        found.extend([_stdin_transcript(fmt)] if raw == STDIN else transcripts([raw], fmt))
    return found


def _stdin_transcript(fmt: str) -> Transcript:
    """Standard input, spooled to a temporary file: format detection reads a transcript's
    first lines before its reader reads them all, and a pipe can be read only once."""
    import atexit
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="tripwire-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "stdin"
    with path.open("wb") as spool:
        if sys.stdin is not None:
            shutil.copyfileobj(sys.stdin.buffer, spool)
    _SPOOLED.add(path)
    return Transcript(path, detect_or_fail(path) if fmt == "auto" else fmt, "stdin")


_SPOOLED: set[Path] = set()


def shown_path(transcript: Transcript) -> str:
    """The path a record's ``file`` names: ``-`` for standard input."""
    return STDIN if transcript.path in _SPOOLED else str(transcript.path)


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


def decision_record(decision: Decision, index: int) -> dict[str, Any]:
    return {"kind": "decision", "event": index, **decision.to_dict()}


def analysis_config(config: GuardrailsConfig | ResolvedConfig) -> ResolvedConfig:
    """Replay's policy: as configured. (Below ``enforce`` the context guard reports its 95%
    crossing instead of cutting the turn, as it does in every host: a warn-mode analysis sees
    every event, and so every alert, of the recording.)"""
    return config if isinstance(config, ResolvedConfig) else config.resolve()


class _Session:
    """One file's replay state: the guardrails and the turn being skipped, if any."""

    def __init__(self, name: str, options: ReplayOptions, stats: ReplayStats,
                 guardrails: Guardrails | None = None):
        self.stats = stats
        self.name = name
        self.notes: list[OperatorEvent] = []
        self.index = 0  # the next event's 0-based index in this session
        self.clock = ReplayClock()  # the recording's own time (events' ts)
        self.budget = options.resolved().budget
        self.guardrails = guardrails or Guardrails(
            options.resolved(), session_id=name, on_event=self.notes.append,
            implementation=options.implementation, clock=self.clock)
        given = self.guardrails.task.clock
        if isinstance(given, ReplayClock):  # guardrails made for replay (--store): its clock
            self.clock = given
        self.task: Task = self.guardrails.task
        self.tasks = 0  # tasks begun by task_start
        # the task's outcome is printed (a task_start began it, or a budget flag bounds it)
        self.reporting = options.report_outcomes
        self.reported: Outcome | None = None
        self.labelled = True  # its records carry its session name
        self.skipping: str | None = None  # why this turn's remaining events are not observed
        self.skipped = 0
        self.skip_from = 0
        self.priced = self.count_price  # bound once: every usage event is told to it

    def records(self, index: int, event: Any) -> Iterator[dict[str, Any]]:
        if self.skipping is not None:
            if isinstance(event, (Reset, TaskStart, TaskEnd, BudgetRaise, CheckIn)):
                # an operator reset (a task's boundary) is not part of the cancelled turn
                reason = self.skipping
                yield from self.end_skip()
                yield from self.records(index, event)
                self.start_skip(reason, index)
                return
            if not isinstance(event, TurnStart):
                self.skipped += 1
                self.stats.skipped_events += 1
                return
            yield from self.end_skip()
        yield from self.report(index, event, self.observe(index, event))

    def report(self, index: int, event: Any,
               decision: Decision | dict[str, Any] | None) -> Iterator[dict[str, Any]]:
        """The records of one observed event: its alerts, decision and operator notes."""
        out = []
        if isinstance(decision, dict):
            out.append(decision)
        elif decision is not None:
            for alert in decision.alerts:
                self.stats.alerts[alert.signal] += 1
                self.stats.critical_alerts += alert.critical
                out.append(alert_record(alert, index))
            if not decision.proceed:
                self.stats.decisions[decision.action] += 1
                out.append(decision_record(decision, index))
                if not isinstance(event, (TurnEnd, TurnStart, TaskEnd)):
                    self.start_skip("turn cut" if decision.action != HALT_SESSION
                                    else "session halted", index)
            elif decision.cancel_tool:
                self.stats.decisions[decision.action] += 1
                out.append(decision_record(decision, index))
        for note in self.notes:
            if note.kind == "feedback_withdrawn" and note.alert is not None:
                out.append({"kind": "feedback_withdrawn", "event": index,
                            "signal": note.alert.signal, "alert_event": note.alert.event})
            elif note.record is not None and note.record.get("event") == "compaction-pending":
                out.append({"kind": "context", "event": index,
                            "utilization": note.record["utilization"],
                            "estimated": note.record["estimated"], "action": "compact"})
            elif note.record is not None and note.record.get("operation") == "turn-cut":
                out.append({"kind": "context", "event": index,
                            "utilization": note.record["utilization"],
                            "estimated": note.record["unmeasured_bytes"] > 0,
                            "action": "turn_cut",
                            "enforced": note.record.get("enforced", True)})
        self.notes.clear()
        outcome = self.task.outcome
        if outcome is not None and self.reported is None:
            out.append(self.outcome_record(outcome, index))
        yield from out

    def outcome_record(self, outcome: Outcome, index: int) -> dict[str, Any]:
        self.reported = outcome
        self.stats.outcomes[outcome.kind] += 1
        return {"kind": "outcome", "event": index, **outcome.to_dict()}

    def start_skip(self, reason: str, index: int) -> None:
        self.skipping, self.skipped, self.skip_from = reason, 0, index + 1

    def end_skip(self) -> Iterator[dict[str, Any]]:
        if self.skipped:
            yield {"kind": "skipped", "event": self.skip_from, "count": self.skipped,
                   "reason": self.skipping}
        self.skipping = None

    def observe(self, index: int, event: Any) -> Decision | dict[str, Any] | None:
        """One event through the session (``session.dispatch``); what replay makes of its
        outcome: a decision as it is, a started turn's feedback, a refused turn or a reset
        as their records. A task's start and end are replay's own (its outcome records)."""
        if event.ts is not None:
            self.clock.advance(event.ts)
        own = _OWN_EVENTS.get(type(event))
        if own is not None:  # a task's start or end, a reset: records of replay's own
            return own(self, index, event)
        outcome = observe_event(self.guardrails, event, self.priced)
        if not isinstance(event, TurnStart):
            return outcome  # type: ignore[return-value]
        if isinstance(outcome, Turn):
            if outcome.feedback:
                return {"kind": "feedback", "event": index, "text": outcome.feedback}
            return None
        self.stats.decisions[REFUSE_TURN] += 1  # the turn was refused
        self.start_skip("turn refused", index)
        return decision_record(outcome, index)  # type: ignore[arg-type]

    def count_price(self, usage: Usage, priced: Priced) -> None:
        """A usage the dispatcher priced (SPEC §11.3), for the summary's counts."""
        if priced.estimated:
            self.stats.estimated_costs += 1
        if priced.unpriced:
            self.stats.unpriced_models.add(model_name(usage.model))

    def reset(self, index: int, event: Reset) -> dict[str, Any]:
        """An operator reset and its record (refused or invalid ones too)."""
        try:
            outcome = observe_event(self.guardrails, event)
        except ResetRefused as refused:
            return {"kind": "reset_refused", "event": index, "guardrail": event.guardrail,
                    "reason": refused.reason, "spent_usd": refused.spent_usd,
                    "needed_usd": refused.needed_usd}
        except InvalidReset as invalid:
            return {"kind": "reset_invalid", "event": index, "guardrail": event.guardrail,
                    "reason": str(invalid)}
        assert isinstance(outcome, ResetOutcome)
        return {"kind": "reset", "event": index, "guardrail": event.guardrail,
                "cleared": list(outcome.cleared),
                "still_halted_by": list(outcome.still_halted_by),
                "max_session_cost_usd": outcome.max_session_cost_usd}

    def end_task_event(self, index: int, event: TaskEnd) -> dict[str, Any] | None:
        """The host says the task ended: its outcome record (once)."""
        if self.reported is not None and self.reported.task_id == self.task.task_id:
            self.task.finish(event.answer, evidence=event.evidence,
                             unfinished=event.unfinished)
            return None  # its outcome was printed when it was exhausted
        self.reporting = True
        if event.exhausted is not None:  # the host's own cap ended it (a harness's)
            ended = self.task.exhaust(
                event.exhausted,
                event.unfinished or f"the host's own cap of {event.exhausted} was reached",
                answer=event.answer, unfinished=event.unfinished)
        elif event.interrupted is not None:
            ended = self.task.interrupt(event.interrupted, unfinished=event.unfinished)
        else:
            ended = self.task.finish(event.answer, evidence=event.evidence,
                                     unfinished=event.unfinished)
        return self.outcome_record(ended, index)

    def raise_budget(self, index: int, event: BudgetRaise) -> dict[str, Any]:
        """An operator's raise (SPEC §13): a ``budget_raise`` record, refused or not; a task
        it continues is reported again at its next outcome."""
        from ..errors import RaiseRefused, TaskEnded

        task = self.task
        was = task.outcome
        record: dict[str, Any] = {"kind": "budget_raise", "event": index,
                                  "task": task.task_id, "counter": event.counter,
                                  "by": event.by}
        try:
            record["cap"] = task.raise_cap(event.counter, event.by, who="replay")
        except RaiseRefused as refused:
            return {**record, "refused": True, "raise_needed": refused.raise_needed,
                    "reason": str(refused)}
        except TaskEnded as ended:
            return {**record, "refused": True, "reason": f"the task has ended ({ended.outcome})"}
        return {**record, **self._resumed(was)}

    def check_in(self, index: int, event: CheckIn) -> dict[str, Any]:
        """An operator's check-in (SPEC §13): a ``check_in`` record."""
        from ..errors import TaskEnded

        task = self.task
        was = task.outcome
        record: dict[str, Any] = {"kind": "check_in", "event": index, "task": task.task_id}
        try:
            record["opened"] = task.check_in(who="replay")
        except TaskEnded as ended:
            return {**record, "refused": True, "reason": f"the task has ended ({ended.outcome})"}
        return {**record, **self._resumed(was)}

    def _resumed(self, was: Outcome | None) -> dict[str, Any]:
        if was is not None and self.task.outcome is None:
            if self.reported is was:
                self.reported = None  # its next outcome is printed too
            return {"resumed": str(was)}
        return {"resumed": None}

    def start_task(self, index: int, event: TaskStart) -> dict[str, Any] | None:
        """A new task: the one before it, if unfinished, ends interrupted."""
        # the task before it ends interrupted (the session's implicit one is just replaced)
        record = self.end_task(index, "a new task started before this one ended") \
            if self.tasks else None
        self.tasks += 1
        budget = Budget.from_mapping(event.budget or {}).over(self.budget)
        log = self.guardrails.durable_log
        task = Task(event.objective, budget, task_id=f"{self.name}#{self.tasks}",
                    clock=self.clock, store=log.store if log is not None else None)
        self.guardrails.run_task(task)
        self.task, self.reported, self.reporting = task, None, True
        return record

    def end_task(self, index: int, why: str) -> dict[str, Any] | None:
        if not self.reporting or self.reported is not None:
            return None
        return self.outcome_record(self.task.interrupt(why), index)

    def finish(self) -> Iterator[dict[str, Any]]:
        if self.skipping is not None:
            yield from self.end_skip()
        record = self.end_task(max(0, self.index - 1), "the recording ended before the task did")
        if record is not None:
            yield record
        if self.task.outcome is None:
            # (--store) a counter without a cap is written only with the rows a capped one
            # causes: the recording's end writes them all, so the task agrees with the spend
            self.task.seal()
        self.stats.halted_sessions += self.guardrails.halted


#: The events replay runs itself rather than through the session's dispatch: a task's start
#: and end (replay is the host that runs tasks, and prints their outcomes) and an operator
#: reset (whose refusal is a record, not an error)
_OWN_EVENTS: dict[type, Callable[[_Session, int, Any], dict[str, Any] | None]] = {
    TaskStart: _Session.start_task,
    TaskEnd: _Session.end_task_event,
    Reset: _Session.reset,
    BudgetRaise: _Session.raise_budget,
    CheckIn: _Session.check_in,
}


#: makes the guardrails of a session, given its name (e.g. bound to a durable store)
GuardrailsFactory = Callable[[str], Guardrails]


def replay_transcript(transcript: Transcript, options: ReplayOptions, stats: ReplayStats,
                      session_id: str | None = None,
                      guardrails_for: GuardrailsFactory | None = None,
                      ) -> Iterator[dict[str, Any]]:
    """Run one transcript through fresh guardrails per session; yield its records.

    Records carry their ``session``, except those of an interchange file's own session (an
    interchange line may name its session: ``convert`` writes one on every line). Invalid
    lines raise (or, with ``skip_invalid``, yield ``{"kind": "invalid"}``); a truncated last
    line yields ``{"kind": "truncated"}`` and the lines before it are kept. A file with lines
    of which none yielded an event raises ``InvalidEvent`` at its end, even when skipping.
    """
    stats.files += 1
    named = transcript.format != "interchange"
    sessions: dict[str, _Session] = {}
    skipped = stats.skipped_lines
    for item in read_transcript(transcript):
        if item.event is None and item.error is None:
            stats.skipped_lines += 1
            continue
        session = sessions.get(item.session)
        if session is None:
            if session_id is not None and sessions:
                raise InvalidEvent("--session names one session, but this transcript holds "
                                   "several", source=str(transcript.path))
            name = session_id or item.session
            guardrails = guardrails_for(name) if guardrails_for is not None else None
            session = sessions[item.session] = _Session(name, options, stats, guardrails)
            session.labelled = named or item.session != transcript.name
            stats.sessions += 1
        index = session.index
        session.index += 1
        if item.error is None and session.skipping is None:  # the common case, inline
            stats.events += 1
            decision = session.observe(index, item.event)
            if decision is CONTINUE and not session.notes and (
                    session.task.outcome is None or session.reported is not None):
                continue
            records = session.report(index, item.event, decision)
        else:
            records = _item_records(item, index, session, options, stats)
        for record in records:
            yield {**record, "session": session.name} if session.labelled else record
    if not sessions and stats.skipped_lines > skipped:
        stats.sessions += 1  # a recording the reader took, with no event: an empty session
    for session in sessions.values():
        for record in session.finish():
            yield {**record, "session": session.name} if session.labelled else record


def _item_records(item: Item, index: int, session: _Session, options: ReplayOptions,
                  stats: ReplayStats) -> Iterator[dict[str, Any]]:
    error = item.error
    if error is not None:
        if isinstance(error, TruncatedLine):
            stats.truncated_lines += 1
            yield {"kind": "truncated", "event": index, "line": item.line,
                   "error": error.message}
            return
        if not options.skip_invalid:
            raise error
        stats.invalid_lines += 1
        yield {"kind": "invalid", "event": index, "line": item.line, "error": error.message}
        return
    stats.events += 1
    yield from session.records(index, item.event)


def replay_file(path: Path, options: ReplayOptions, stats: ReplayStats,
                session_id: str | None = None, guardrails: Guardrails | None = None,
                fmt: str = "auto") -> Iterator[dict[str, Any]]:
    """Run one file through fresh guardrails (or ``guardrails``, for a one-session file)."""
    (transcript,) = transcripts([str(path)], fmt)
    factory = (lambda name: guardrails) if guardrails is not None else None
    return replay_transcript(transcript, options, stats, session_id, factory)
