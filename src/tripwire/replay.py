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
- ``{"kind": "context", "event", "utilization", "estimated", "action"}``: ``compact`` when
  compaction becomes pending, ``turn_cut`` when the context reaches 95% of the window; a
  ``turn_cut`` carries ``"enforced"``: true when the turn was cut (``enforce`` mode: the rest
  of the turn is skipped, as a harness would have cancelled it), false when it is only
  reported (``warn``, ``feedback``, ``off``: a recording analysis skips nothing, so every
  later alert is still reported). Replay cannot compact a recording: without usage events the
  estimate only grows, so under ``enforce`` each later turn is cut at its first large result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .decision import HALT_SESSION, REFUSE_TURN, Decision
from .errors import GuardrailHalted, InvalidEvent, InvalidReset, ResetRefused
from .events import STDIN, Call, Reset, Result, Text, TurnEnd, TurnStart, Usage, read_events
from .guardrails import Guardrails, GuardrailsConfig, ResolvedConfig
from .modes import Mode
from .reporting import OperatorEvent
from .signals import Alert

__all__ = ["ReplayOptions", "ReplayStats", "replay_file", "event_files", "analysis_config"]

#: The output schema's version, the summary line's ``"v"``: bumped by a change that is not
#: purely additive (a field renamed, removed or given another meaning).
SUMMARY_VERSION = 1


@dataclass
class ReplayOptions:
    guardrails: GuardrailsConfig = field(
        default_factory=lambda: GuardrailsConfig(mode="warn", unattended=False)
    )
    skip_invalid: bool = False
    implementation: str | None = None


@dataclass
class ReplayStats:
    files: int = 0
    events: int = 0
    invalid_lines: int = 0
    skipped_events: int = 0
    alerts: Counter = field(default_factory=Counter)
    critical_alerts: int = 0
    decisions: Counter = field(default_factory=Counter)
    halted_sessions: int = 0

    def merge(self, other: ReplayStats) -> None:
        """Add another run's counts (one file's, for ``--per-file``)."""
        self.files += other.files
        self.events += other.events
        self.invalid_lines += other.invalid_lines
        self.skipped_events += other.skipped_events
        self.alerts.update(other.alerts)
        self.critical_alerts += other.critical_alerts
        self.decisions.update(other.decisions)
        self.halted_sessions += other.halted_sessions

    def summary(self, *, per_file: bool = False) -> dict[str, Any]:
        """The summary line (``per_file``: one file's entry, without kind, v and files)."""
        head = {} if per_file else {"kind": "summary", "v": SUMMARY_VERSION, "files": self.files}
        return {
            **head,
            "events": self.events,
            "invalid_lines": self.invalid_lines,
            "skipped_events": self.skipped_events,
            "alerts": sum(self.alerts.values()),
            "by_signal": dict(sorted(self.alerts.items())),
            "decisions": dict(sorted(self.decisions.items())),
            "halted_sessions": self.halted_sessions,
        }


def event_files(paths: Iterable[str]) -> list[Path]:
    """Expand paths: a file is itself, a directory is every ``*.jsonl`` below it (sorted).
    Raises FileNotFoundError / InvalidEvent with a message a user can act on."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if raw == STDIN:
            if path in files:
                raise InvalidEvent("standard input (-) can be read once only")
            files.append(path)
        elif path.is_dir():
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


def decision_record(decision: Decision, index: int) -> dict[str, Any]:
    return {"kind": "decision", "event": index, **decision.to_dict()}


def analysis_config(config: GuardrailsConfig | ResolvedConfig) -> ResolvedConfig:
    """Replay's policy: as configured, except that below ``enforce`` the context guard
    reports its 95% crossing instead of cutting the turn (a warn-mode analysis must see every
    event, and so every alert, of the recording)."""
    resolved = config if isinstance(config, ResolvedConfig) else config.resolve()
    if resolved.mode < Mode.ENFORCE and resolved.context.cut_turns:
        resolved = replace(resolved, context=replace(resolved.context, cut_turns=False))
    return resolved


def session_name(path: Path) -> str:
    """The default session id of a file: its name without suffix; ``stdin`` for ``-``."""
    return "stdin" if str(path) == STDIN else path.stem


class _Session:
    """One file's replay state: the guardrails and the turn being skipped, if any."""

    def __init__(self, path: Path, options: ReplayOptions, stats: ReplayStats,
                 session_id: str | None = None, guardrails: Guardrails | None = None):
        self.stats = stats
        self.notes: list[OperatorEvent] = []
        self.guardrails = guardrails or Guardrails(
            analysis_config(options.guardrails), session_id=session_id or session_name(path),
            on_event=self.notes.append, implementation=options.implementation)
        self.skipping: str | None = None  # why this turn's remaining events are not observed
        self.skipped = 0
        self.skip_from = 0

    def records(self, index: int, event: Any) -> Iterator[dict[str, Any]]:
        if self.skipping is not None:
            if isinstance(event, Reset):
                # an operator reset is not part of the cancelled turn: it always applies
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
        decision = self.observe(index, event)
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
                if not isinstance(event, (TurnEnd, TurnStart)):
                    self.start_skip("turn cut" if decision.action != HALT_SESSION
                                    else "session halted", index)
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
        yield from out

    def start_skip(self, reason: str, index: int) -> None:
        self.skipping, self.skipped, self.skip_from = reason, 0, index + 1

    def end_skip(self) -> Iterator[dict[str, Any]]:
        if self.skipped:
            yield {"kind": "skipped", "event": self.skip_from, "count": self.skipped,
                   "reason": self.skipping}
        self.skipping = None

    def observe(self, index: int, event: Any) -> Decision | dict[str, Any] | None:
        g = self.guardrails
        if isinstance(event, Call):
            return g.on_call(event.name, event.args, id=event.id)
        if isinstance(event, Result):
            return g.on_result(event.name, id=event.id, error=event.error, no_op=event.no_op,
                               payload=event.payload)
        if isinstance(event, Text):
            return g.on_text(event.text)
        if isinstance(event, Usage):
            return g.on_usage(model=event.model, input_tokens=event.input_tokens,
                              output_tokens=event.output_tokens, cost_usd=event.cost_usd)
        if isinstance(event, TurnEnd):
            return g.end_turn()
        if isinstance(event, TurnStart):
            try:
                turn = g.start_turn()
            except GuardrailHalted:
                refusal = g.refusal()
                self.stats.decisions[REFUSE_TURN] += 1
                self.start_skip("turn refused", index)
                return decision_record(refusal, index)
            if turn.feedback:
                return {"kind": "feedback", "event": index, "text": turn.feedback}
            return None
        if isinstance(event, Reset):
            try:
                outcome = g.reset(event.guardrail, event.additional_budget_usd)
            except ResetRefused as refused:
                return {"kind": "reset_refused", "event": index, "guardrail": event.guardrail,
                        "reason": refused.reason, "spent_usd": refused.spent_usd,
                        "needed_usd": refused.needed_usd}
            except InvalidReset as invalid:
                return {"kind": "reset_invalid", "event": index, "guardrail": event.guardrail,
                        "reason": str(invalid)}
            return {"kind": "reset", "event": index, "guardrail": event.guardrail,
                    "cleared": list(outcome.cleared),
                    "still_halted_by": list(outcome.still_halted_by),
                    "max_session_cost_usd": outcome.max_session_cost_usd}
        raise AssertionError(event)  # pragma: no cover - parse_event admits nothing else

    def finish(self) -> Iterator[dict[str, Any]]:
        if self.skipping is not None:
            yield from self.end_skip()
        self.stats.halted_sessions += self.guardrails.halted


def replay_file(path: Path, options: ReplayOptions, stats: ReplayStats,
                session_id: str | None = None,
                guardrails: Guardrails | None = None) -> Iterator[dict[str, Any]]:
    """Run one file (one session) through fresh guardrails; yield its records."""
    session = _Session(path, options, stats, session_id, guardrails)
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
        yield from session.records(line.index, line.event)
    yield from session.finish()
