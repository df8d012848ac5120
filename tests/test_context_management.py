"""The rest of the context-management seed (issue 15): manual vs automatic compaction, the
teammate handover, checkpoints, the /context view, task classes wired into the config, and the
operator lines of in-turn cuts. Exact records and decisions, on both engines."""

from __future__ import annotations

import io
import json
import logging
import types

import pytest

from tripwire import Guardrails, GuardrailsConfig, OperatorEvent
from tripwire.cli.main import main
from tripwire.context.guard import ContextConfig, SummaryResult
from tripwire.context.histories import rebuild
from tripwire.context.prompts import (
    CHECKPOINT_SECTIONS,
    HANDOVER_SECTIONS,
    checkpoint_prompt,
    handover_prompt,
    missing_sections,
)
from tripwire.durability.sqlite import SQLiteStore
from tripwire.errors import ConfigError, SmallTierParentRefused
from tripwire.policy import lines
from tripwire.session import config as config_module

HISTORY = [
    {"role": "system", "content": "You are a careful engineer."},
    {"role": "user", "content": "Why do requests fail?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "type": "function",
         "function": {"name": "read_file", "arguments": '{"path": "src/app.py"}'}}]},
    {"role": "tool", "tool_call_id": "a", "content": "def app(): ..." * 40},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "b", "type": "function",
         "function": {"name": "grep", "arguments": '{"pattern": "route("}'}}]},
    {"role": "tool", "tool_call_id": "b", "content": "r.py:3"},
    {"role": "assistant", "content": "The router skips parse_header."},
]

HANDOVER = "\n\n".join(f"# {name}\n{what}" for name, what in HANDOVER_SECTIONS)


class Summarizer:
    def __init__(self, *results):
        self.results = list(results)
        self.calls: list[tuple[int, str | None]] = []

    def __call__(self, messages, focus):
        self.calls.append((len(messages), focus))
        result = self.results.pop(0) if self.results else SummaryResult("")
        if isinstance(result, Exception):
            raise result
        return result


def make(implementation: str, *, events: list | None = None, summarize=None, store=None,
         mode: str = "warn", **context) -> Guardrails:
    return Guardrails(GuardrailsConfig(mode=mode, unattended=False,
                                       context=ContextConfig(**context)),
                      session_id="cm", implementation=implementation, summarize=summarize,
                      on_event=events.append if events is not None else None, store=store)


def stored(store: SQLiteStore, kind: str = "context") -> list[dict]:
    return [r.data for r in store.history("cm").rows if r.kind == kind]


def records(events: list[OperatorEvent]) -> list[dict]:
    return [e.record for e in events if e.kind == "context" and e.record is not None]


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIPWIRE_STORE_KEY", "k" * 64)
    s = SQLiteStore(tmp_path / "s.sqlite")
    yield s
    s.close()


# -- 1. manual and automatic compaction ----------------------------------------------------

def test_a_failed_manual_compaction_is_reported_to_the_caller_only(implementation, store) -> None:
    events: list[OperatorEvent] = []
    summarize = Summarizer(SummaryResult("", "MAX_TOKENS"))
    g = make(implementation, events=events, summarize=summarize, store=store)
    result = g.compact(HISTORY, "the router", manual=True)
    assert (result.kind, result.manual, result.records) == ("failed", True, ())
    assert result.reason == ("compaction: model returned no summary text "
                             "(finish_reason=MAX_TOKENS) after 1 attempt")
    assert summarize.calls == [(7, "the router")]  # terminal: not retried
    assert g.flush() and stored(store) == [] and records(events) == []
    assert (g._context.failures, g._context.cooldown) == (0, 0)  # no backoff either
    # twice more: still no fallback to mechanical truncation, still nothing written
    assert g.compact(HISTORY, manual=True).kind == "failed"
    assert g.compact(HISTORY, manual=True).kind == "failed"
    assert g.flush() and stored(store) == []


def test_a_failed_automatic_compaction_writes_its_row_and_backs_off(implementation, store) -> None:
    g = make(implementation, summarize=Summarizer(), store=store)
    result = g.compact(HISTORY)
    assert result.kind == "failed" and not result.manual
    assert g.flush()
    assert stored(store) == [{
        "event": "context-reduction-failed", "operation": "compaction",
        "reason": "model returned no summary text (finish_reason=none given) after 2 attempts",
        "consecutive_failures": 1, "cooldown_turns": 2}]


def test_a_manual_success_writes_its_boundary_and_clears_the_backoff(implementation, store) -> None:
    summarize = Summarizer(SummaryResult(""), SummaryResult(""), SummaryResult(HANDOVER))
    g = make(implementation, summarize=summarize, store=store)
    assert g.compact(HISTORY).kind == "failed"          # automatic: one failure, cooldown 2
    result = g.compact(HISTORY, "auth module", manual=True)
    assert (result.kind, result.text, result.missing_sections) == ("summary", HANDOVER, ())
    assert (g._context.failures, g._context.cooldown) == (0, 0)
    assert g.flush()
    assert stored(store)[-1] == {
        "event": "compaction-boundary", "operation": "compaction", "kind": "summary",
        "trigger": "manual", "focus": "auth module", "messages": 7,
        "summary_chars": len(HANDOVER), "missing_sections": []}


def crossing(g: Guardrails, *, fill: int) -> list:
    """A frontier model at 169,000 measured tokens, then ``fill`` estimated tokens."""
    g.start_turn()
    decisions = [g.on_usage(model="claude-opus-4-5", input_tokens=169_000)]
    decisions.append(g.on_result("read", payload="x" * (3 * fill)))
    return decisions


def test_auto_compact_off_keeps_manual_compaction_and_the_cut(implementation) -> None:
    events: list[OperatorEvent] = []
    g = make(implementation, events=events, summarize=Summarizer(SummaryResult(HANDOVER)),
             auto_compact=False, mode="enforce")
    assert [d.action for d in crossing(g, fill=1000)] == ["continue", "continue"]
    assert not g.status().compaction_pending          # 85% crossed: nothing pending
    assert records(events) == []
    d = g.on_result("read", payload="x" * (3 * 20_000))  # 190,000 of 200,000: 95%
    assert (d.action, d.guardrail) == ("cut_turn", "context")
    assert "automatic compaction is off" in d.reason and "compaction is pending" not in d.reason
    g.end_turn()
    assert not g.start_turn().compact                 # nothing runs it automatically...
    assert g.compact(HISTORY, manual=True).kind == "summary"  # ...the operator can


def test_auto_compact_on_marks_pending_and_the_next_turn_compacts(implementation) -> None:
    g = make(implementation)
    crossing(g, fill=1000)
    assert g.status().compaction_pending
    g.end_turn()
    assert g.start_turn().compact


def test_enabled_false_still_turns_everything_off(implementation) -> None:
    g = make(implementation, enabled=False)
    assert [d.action for d in crossing(g, fill=30_000)] == ["continue", "continue"]
    assert g.compact(HISTORY, manual=True).reason == "the context guard is disabled"
    assert g.utilization() is None


def test_auto_compact_is_a_config_file_key(tmp_path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[context]\nauto_compact = false\ncheckpoint = \"operator\"\n")
    resolved = GuardrailsConfig.from_file(str(path), unattended=False).resolve()
    assert (resolved.context.auto_compact, resolved.context.checkpoint) == (False, "operator")
    path.write_text("[context]\nauto_compact = \"no\"\n")
    with pytest.raises(ConfigError, match="context auto_compact must be true or false"):
        GuardrailsConfig.from_file(str(path)).resolve()


# -- 2. the teammate handover ------------------------------------------------------------

def test_the_handover_prompt_has_the_five_sections_and_the_focus() -> None:
    prompt = handover_prompt()
    headings = [line for line in prompt.splitlines() if line.startswith("# ")]
    assert headings == ["# Current state", "# Files & changes", "# Technical context",
                        "# Strategy & approach", "# Exact next steps"]
    assert "A concrete numbered list of the next developer-style actions." in prompt
    assert "Focus" not in prompt
    focused = handover_prompt("  auth module ")
    assert focused.startswith(prompt)
    assert focused.endswith("Focus: bias the summary toward auth module — keep that thread's "
                            "detail, and still write every section.")
    assert [line for line in checkpoint_prompt("done").splitlines() if line.startswith("# ")] \
        == [f"# {name}" for name, _ in CHECKPOINT_SECTIONS]


def test_missing_sections_reads_headings_in_any_common_form() -> None:
    summary = ("## current state\nx\n**Files & changes:**\ny\nTechnical context\n"
               "we talked about the strategy & approach\n")
    assert missing_sections(summary) == ("Strategy & approach", "Exact next steps")
    assert missing_sections(HANDOVER) == ()
    assert missing_sections("") == tuple(name for name, _ in HANDOVER_SECTIONS)


def test_the_boundary_record_names_the_sections_a_summary_lacks(implementation) -> None:
    events: list[OperatorEvent] = []
    partial = "# Current state\nfixing auth\n# Exact next steps\n1. test"
    g = make(implementation, events=events, summarize=Summarizer(SummaryResult(partial)))
    result = g.compact(HISTORY)
    assert result.missing_sections == ("Files & changes", "Technical context",
                                       "Strategy & approach")
    (boundary,) = [e for e in events if e.kind == "context"]
    assert boundary.record["missing_sections"] == ["Files & changes", "Technical context",
                                                   "Strategy & approach"]
    assert boundary.message.endswith("compaction boundary written (summary, automatic); the "
                                     "summary lacks: Files & changes, Technical context, "
                                     "Strategy & approach")


# -- 3. checkpoints ------------------------------------------------------------------------

def test_a_checkpoint_summary_uses_the_note_as_focus(implementation, store) -> None:
    record = "\n".join(f"# {name}\n." for name, _ in CHECKPOINT_SECTIONS)
    summarize = Summarizer(SummaryResult(record))
    g = make(implementation, summarize=summarize, store=store)
    result = g.checkpoint(HISTORY, "surveyed the router")
    assert (result.kind, result.operation, result.missing_sections) == ("summary", "checkpoint", ())
    assert summarize.calls == [(7, "surveyed the router")]
    assert g.flush()
    assert stored(store) == [{
        "event": "compaction-boundary", "operation": "checkpoint", "kind": "summary",
        "trigger": "automatic", "note": "surveyed the router", "messages": 7,
        "summary_chars": len(record), "missing_sections": []}]
    new = result.apply(HISTORY)
    assert [m["role"] for m in new] == ["system", "user", "user"]
    assert new[2]["content"] == record


def test_checkpoint_failures_back_off_and_fall_back_to_mechanical(implementation, store) -> None:
    g = make(implementation, summarize=Summarizer(), store=store, tail_chars=80)
    first = g.checkpoint(HISTORY, "task one")
    assert (first.kind, first.operation) == ("failed", "checkpoint")
    cooling = g.checkpoint(HISTORY, "task one")
    assert (cooling.kind, cooling.reason) == (
        "skipped", "checkpoints are cooling down after 1 failure(s) (2 turn(s) left)")
    for _ in range(2):
        g.start_turn()
        g.end_turn()
    second = g.checkpoint(HISTORY, "task one")
    assert second.kind == "mechanical" and second.operation == "checkpoint"
    assert second.text.splitlines()[1] == ("It was cut at a task boundary (a checkpoint): "
                                           "task one.")
    assert (g._context.failures, g._context.cooldown) == (0, 0)  # compaction's are its own
    assert g.flush()
    reason = "model returned no checkpoint text (finish_reason=none given) after 2 attempts"
    assert stored(store) == [
        {"event": "context-reduction-failed", "operation": "checkpoint", "reason": reason,
         "consecutive_failures": 1, "cooldown_turns": 2},
        {"event": "context-reduction-failed", "operation": "checkpoint", "reason": reason,
         "consecutive_failures": 2, "cooldown_turns": 4},
        {"event": "context-reduction-degraded", "operation": "mechanical-truncation",
         "of": "checkpoint", "reason": reason, "consecutive_failures": 2,
         "dropped_messages": 4, "tool_calls": 1},
        {"event": "compaction-boundary", "operation": "checkpoint", "kind": "mechanical",
         "trigger": "automatic", "note": "task one", "messages": 7, "kept_messages": 3,
         "summary_chars": len(second.text)},
    ]
    # the mechanical history is valid for its format: system prompt and task kept in place,
    # no tool result without its call
    new = second.apply(HISTORY)
    assert new == rebuild(HISTORY, 3, second.text, "user", None)
    assert [m["role"] for m in new[:3]] == ["system", "user", "user"]
    calls = {c["id"] for m in new for c in m.get("tool_calls") or ()}
    assert all(m["tool_call_id"] in calls for m in new if m["role"] == "tool")


@pytest.mark.parametrize("mode, automatic, manual", [
    ("model", "summary", "summary"), ("operator", "skipped", "summary"),
    ("off", "skipped", "skipped")])
def test_checkpoint_modes(implementation, mode, automatic, manual) -> None:
    g = make(implementation, summarize=lambda m, f: SummaryResult("done"), checkpoint=mode)
    assert g.checkpoint(HISTORY, "n").kind == automatic
    assert g.checkpoint(HISTORY, "n", manual=True).kind == manual
    assert g.compact(HISTORY).kind == "summary"  # checkpoints off is not compaction off


def test_a_failed_manual_checkpoint_writes_nothing(implementation, store) -> None:
    g = make(implementation, summarize=Summarizer(), store=store)
    result = g.checkpoint(HISTORY, "x", manual=True)
    assert (result.kind, result.reason) == (
        "failed", "checkpoint: model returned no checkpoint text (finish_reason=none given) "
                  "after 2 attempts")
    assert g.flush() and stored(store) == []


# -- 4. the /context view ------------------------------------------------------------------

def test_context_stats_counts_boundaries_and_models_by_cost(implementation, monkeypatch) -> None:
    clock = iter([1000.0, 1100.0, 1200.0])
    # the /context view's clock alone (patching time.time would feed the task's clock too)
    monkeypatch.setattr("tripwire.context.stats.time", types.SimpleNamespace(time=lambda: next(clock)))
    g = make(implementation, summarize=lambda m, f: SummaryResult("s" * 10))
    g.start_turn()
    g.on_usage(model="gemini-2.5-flash", input_tokens=16_000, output_tokens=200,
               cost_usd=0.005)
    g.on_usage(model="gemini-3.1-pro-preview-customtools", input_tokens=30_000,
               output_tokens=500, cost_usd=0.06)
    g.end_turn()
    g.start_turn()
    g.on_usage(model="gemini-3.1-pro-preview-customtools", input_tokens=800,
               output_tokens=58, cost_usd=0.0083)
    g.compact(HISTORY, "auth module", manual=True)
    g.checkpoint(HISTORY, "surveyed messageKinds")
    g.checkpoint(HISTORY, "finished the survey")
    stats = g.context_stats()
    assert (stats.compactions, stats.last_compaction_at, stats.last_focus) == \
        (1, 1000.0, "auth module")
    assert (stats.checkpoints, stats.last_checkpoint_at, stats.last_note) == \
        (2, 1200.0, "finished the survey")
    assert stats.summarized_chars == 30
    assert [m.to_dict() for m in stats.models] == [
        {"model": "gemini-3.1-pro-preview-customtools", "turns": 2, "input_tokens": 30_800,
         "output_tokens": 558, "cost_usd": 0.0683},
        {"model": "gemini-2.5-flash", "turns": 1, "input_tokens": 16_000,
         "output_tokens": 200, "cost_usd": 0.005}]
    assert stats.show_models and stats.window == 1_048_576 and stats.tokens == 800
    assert stats.render(now=1252.0).splitlines() == [
        "Context-management activity:",
        "  Compactions:  1 (last 4m12s ago, focus: auth module)",
        "  Checkpoints:  2 (last 52s ago, note: finished the survey)",
        "  Summarized:   30 chars across all boundaries",
        "  Context:      800 of 1,048,576 tokens (0.1%)",
        "  Models:       gemini-3.1-pro-preview-customtools (2 turns, 30800 in / 558 out, "
        "$0.0683)",
        "              + gemini-2.5-flash (1 turns, 16000 in / 200 out, $0.0050)",
    ]


def test_one_model_shows_no_models_row_and_an_unknown_window_no_percentage(implementation) -> None:
    g = make(implementation)
    g.start_turn()
    g.on_usage(model="acme-proxy-7", input_tokens=5000, cost_usd=0.01)
    stats = g.context_stats()
    assert not stats.show_models and stats.window is None and stats.utilization is None
    assert stats.to_dict() == {
        "compactions": 0, "last_compaction_at": None, "last_focus": None, "checkpoints": 0,
        "last_checkpoint_at": None, "last_note": None, "summarized_chars": 0,
        "tokens": 5000, "estimated": False, "window": "unknown", "utilization": "unknown"}
    assert stats.render().splitlines()[-1] == \
        "  Context:      5,000 tokens, of an unknown window"
    assert "%" not in stats.render()


def test_tripwire_status_prints_the_view_of_a_stored_session(implementation, store,
                                                            monkeypatch) -> None:
    g = make(implementation, summarize=lambda m, f: SummaryResult("abcdef"), store=store)
    g.start_turn()
    g.on_usage(model="claude-opus-4-5", input_tokens=1000, output_tokens=10, cost_usd=0.02)
    g.on_usage(model="claude-haiku-4-5", input_tokens=500, output_tokens=5, cost_usd=0.001)
    g.compact(HISTORY, "router", manual=True)
    g.checkpoint(HISTORY, "task A")
    g.end_turn()
    assert g.flush()
    times = [r.time for r in store.history("cm").rows if r.kind == "context"]
    out, err = io.StringIO(), io.StringIO()
    assert main(["status", str(store.path), "--session", "cm"], out=out, err=err) == 0
    (line,) = [json.loads(x) for x in out.getvalue().splitlines()]
    assert line["context"] == {
        "compactions": 1, "last_compaction_at": times[0], "last_focus": "router",
        "checkpoints": 1, "last_checkpoint_at": times[1], "last_note": "task A",
        "summarized_chars": 12,
        "models": [
            {"model": "claude-opus-4-5", "turns": 1, "input_tokens": 1000, "output_tokens": 10,
             "cost_usd": 0.02},
            {"model": "claude-haiku-4-5", "turns": 1, "input_tokens": 500, "output_tokens": 5,
             "cost_usd": 0.001}]}


# -- 5. task classes wired into the config ---------------------------------------------------

def test_the_task_class_threshold_is_a_default_explicit_settings_win(tmp_path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[session]\ntask_class = "debug"\nunattended = false\n')
    resolved = GuardrailsConfig.from_file(str(path)).resolve()
    assert resolved.task is not None and resolved.task.task == "debug"
    assert resolved.task_source == "config file"
    assert resolved.context.threshold == 0.65
    assert resolved.task.model == "claude-opus-5" and resolved.task.model_source == \
        "task class debug"
    # an explicit class beats the file's; the file's [context] threshold beats the class's
    path.write_text('[session]\ntask_class = "debug"\n[context]\nthreshold = 0.9\n')
    resolved = GuardrailsConfig.from_file(str(path), task_class="review").resolve()
    assert (resolved.task.task, resolved.task_source, resolved.context.threshold) == \
        ("review", "explicit", 0.9)
    # an explicit ContextConfig threshold wins too
    explicit = GuardrailsConfig(task_class="chat", context=ContextConfig(threshold=0.5))
    assert explicit.resolve().context.threshold == 0.5
    # and the class's fallback reaches the guard: an unknown-tier model compacts at 0.65
    g = Guardrails(GuardrailsConfig(mode="warn", unattended=False, task_class="debug"),
                   implementation="python")
    g.start_turn()
    g.on_usage(model="acme-proxy-7", input_tokens=83_200)  # 0.65 x 128,000 assumed
    assert g.status().compaction_pending


def test_small_tier_parent_modes(tmp_path, caplog) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[session]\nmodel = "claude-haiku-4-5"\n[safety]\nsmall_tier_parent = '
                    '"refuse"\n')
    with pytest.raises(SmallTierParentRefused, match="small-tier parent: claude-haiku-4-5 is a "
                                                     "small-tier model"):
        GuardrailsConfig.from_file(str(path)).resolve()
    # explicit beats the file; one-shot runs skip the guard
    assert GuardrailsConfig.from_file(str(path), small_tier_parent="allow").resolve() \
        .small_tier_notice is None
    assert GuardrailsConfig.from_file(str(path), one_shot=True).resolve() \
        .small_tier_notice is None
    warn = GuardrailsConfig.from_file(str(path), small_tier_parent="warn").resolve()
    assert (warn.small_tier_parent, warn.small_tier_source) == ("warn", "explicit")
    assert warn.small_tier_notice.startswith("small-tier parent: claude-haiku-4-5")
    path.write_text('[safety]\nsmall_tier_parent = "sometimes"\n')
    with pytest.raises(ConfigError, match="small_tier_parent must be one of warn, refuse, allow"):
        GuardrailsConfig.from_file(str(path)).resolve()


def test_refuse_is_one_line_and_exit_2_on_the_cli(tmp_path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[session]\nmodel = "gemini-2.5-flash"\n[safety]\nsmall_tier_parent = '
                      '"refuse"\n')
    events = tmp_path / "e.jsonl"
    events.write_text('{"type": "call", "name": "ls"}\n')
    out, err = io.StringIO(), io.StringIO()
    assert main(["replay", str(events), "--config", str(config)], out=out, err=err) == 2
    assert out.getvalue() == ""
    assert err.getvalue().startswith("tripwire: small-tier parent: gemini-2.5-flash is a "
                                     "small-tier model.")
    assert err.getvalue().count("\n") == 1


def test_one_startup_line_names_the_mode_and_its_source(caplog, monkeypatch) -> None:
    monkeypatch.setattr(config_module, "_ANNOUNCED", set())
    config = GuardrailsConfig(mode="feedback", unattended=True, task_class="research",
                              model="claude-haiku-4-5", small_tier_parent="warn")
    with caplog.at_level(logging.INFO, logger="tripwire"):
        for sid in ("a", "b", "c"):  # three sessions, one configuration: one line
            Guardrails(config, session_id=sid, implementation="python")
    lines_ = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "tripwire"]
    assert lines_[0] == ("INFO", (
        "watchdog: feedback mode [explicit] (reports alerts and tells the model on its next "
        "turn); cost ceiling: per turn off, per session $10.0000 [unattended default]; "
        "task class research [explicit]; small-tier parent: warn [explicit]"))
    assert lines_[1][0] == "WARNING" and lines_[1][1].startswith("small-tier parent: ")
    assert len(lines_) == 2


# -- 6. operator lines true in both worlds ---------------------------------------------------

ONE_SHOT = ("Nothing starts that turn on its own, though: under a driver (TUI, attach, "
            "auto-continue) the run goes on, and a one-shot (-p) run ends here with exit 1.")


def test_every_in_turn_cut_line_carries_the_one_shot_sentence(implementation, store) -> None:
    assert lines.ONE_SHOT == ONE_SHOT
    events: list[OperatorEvent] = []
    g = make(implementation, events=events, store=store, mode="enforce")
    assert crossing(g, fill=22_000)[-1].action == "cut_turn"
    (cut,) = [e for e in events if e.kind == "cut"]
    assert cut.message.endswith("a next turn would start by reducing context. " + ONE_SHOT)
    assert g.flush()
    (row,) = [r for r in stored(store) if r.get("operation") == "turn-cut"]
    assert row == {
        "event": "context-reduction-degraded", "operation": "turn-cut",
        "estimate_tokens": 191_000, "window": 200_000, "unmeasured_bytes": 66_000,
        "utilization": 0.955, "enforced": True,
        "reason": "the context window is 95.5% full (191,000 of 200,000 tokens, 66,000 bytes "
                  "of it estimated), past the 95% hard ceiling; compaction is pending, so a "
                  "next turn would start by reducing context"}
    assert "will run" not in row["reason"] and ONE_SHOT not in row["reason"]

    cost: list[OperatorEvent] = []
    c = Guardrails(GuardrailsConfig(mode="warn", unattended=False, max_turn_cost_usd=0.05),
                   implementation=implementation, on_event=cost.append)
    c.start_turn()
    assert c.on_usage(model="m", cost_usd=0.06).action == "cut_turn"
    (line,) = [e.message for e in cost if e.kind == "cut"]
    assert ONE_SHOT + " 1 in a row now" in line

    wd: list[OperatorEvent] = []
    w = Guardrails(GuardrailsConfig(mode="enforce", unattended=False),
                   implementation=implementation, on_event=wd.append)
    w.start_turn()
    decisions = [w.on_result("mark_task_done", no_op=True) for _ in range(3)]
    assert decisions[-1].action == "cut_turn"  # no-op-streak: turn-scoped
    (line,) = [e.message for e in wd if e.kind == "cut"]
    assert ONE_SHOT + " 1 in a row now" in line


@pytest.mark.parametrize("auto", [True, False])
def test_batch_ingest_cuts_at_95_percent_with_or_without_auto_compaction(implementation,
                                                                         auto) -> None:
    from tripwire.fleet.fleet import Fleet

    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=False,
                                   context=ContextConfig(auto_compact=auto)),
                  implementation=implementation)
    out = fleet.observe_many([
        ("a", "turn_start"), ("a", "usage", "claude-opus-4-5", 180_000, 10, 0.0),
        ("a", "result", "read", "x" * 3000), ("a", "usage", "claude-opus-4-5", 185_000),
        ("a", "result", "read", "x" * 18_000)])  # 185,000 + 6,000: 95.5%
    assert [(i, o.action, o.guardrail) for i, _, o in out] == [(4, "cut_turn", "context")]
    assert ("automatic compaction is off" in out[0][2].reason) is not auto
    g = fleet.session("a")
    assert g.status().compaction_pending is auto
    g.end_turn()
    assert g.start_turn().compact is auto
