"""The context-window guard (SPEC §6): utilization, thresholds, the 95% cut, compaction policy
and mechanical truncation, on both engines (the token estimator is native or reference)."""

from __future__ import annotations

import itertools

import pytest
from conftest import CONFORMANCE, SHARED, read_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st

from tripwire import Guardrails, GuardrailsConfig, OperatorEvent
from tripwire.context.guard import _ANNOUNCED, ContextConfig, ContextGuard, SummaryResult
from tripwire.context.prompts import TRUNCATION_NOTICE, mechanical_truncation
from tripwire.engine import select as _engine
from tripwire.errors import ConfigError


def guard(implementation: str, **config) -> ContextGuard:
    engine = _engine.load(implementation)
    return ContextGuard(ContextConfig(**config), engine.TokenEstimator, engine.utf8_length)


def guardrails(implementation: str, events: list | None = None, summarize=None,
               mode: str = "enforce", **context):
    """Under enforce (the 95% crossing cuts the turn only there); the watchdog stays quiet on
    these events (results and distinct calls)."""
    return Guardrails(GuardrailsConfig(mode=mode, unattended=False,
                                       context=ContextConfig(**context)),
                      session_id="ctx", on_event=events.append if events is not None else None,
                      implementation=implementation, summarize=summarize)


# -- the compaction lines of ../shared/conformance/model-cases.jsonl ---------------------------

def _cases():
    if not SHARED.exists():
        return []
    out = []
    for line in read_jsonl(CONFORMANCE / "model-cases.jsonl"):
        tw = line.get("tripwire") or {}
        compaction = tw.get("compaction") or line.get("compaction")
        if compaction is None:
            continue
        out.append(pytest.param(line, compaction, tw, id=f"{line['model']}|{line['source']}"))
    return out


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/conformance is missing")
@pytest.mark.parametrize("line, compaction, tw", _cases())
def test_model_case_compaction(implementation: str, line: dict, compaction: dict, tw: dict) -> None:
    config = {"threshold_by_tier": compaction.get("threshold_by_tier", {}),
              "threshold": compaction.get("threshold")}
    if "force_tier" in compaction:
        config["tier"] = compaction["force_tier"]
    g = guard(implementation, **config)
    g.observe_usage(line["model"], compaction["input_tokens"])
    if "unmeasured_bytes" in compaction:
        g.observe_bytes(b"x" * compaction["unmeasured_bytes"])
    for n in compaction.get("unmeasured_chunks", ()):
        g.observe_bytes("y" * n)
    u = g.utilization()
    if "context_window" in tw:
        assert u.window == tw["context_window"]
        assert u.window_assumed is tw.get("window_assumed", False)
    verdict = g.check()
    assert g.pending is compaction["should_compact"]
    if "turn_cut" in compaction:
        assert (verdict == "turn_cut") is compaction["turn_cut"]
    assert u.estimated is bool(compaction.get("unmeasured_bytes") or compaction.get("unmeasured_chunks"))


def test_the_conformance_cases_were_found() -> None:
    if SHARED.exists():
        assert len(_cases()) >= 33


# -- utilization ---------------------------------------------------------------------------

def test_utilization_is_measured_plus_estimated(implementation: str) -> None:
    g = guard(implementation)
    g.observe_usage("claude-opus-4-5", 1000)
    g.observe_bytes("a" * 10)      # ceil(10 / 3) = 4 tokens
    g.observe_bytes(b"b" * 2)      # 12 bytes: 4 tokens
    u = g.utilization()
    assert (u.tokens, u.measured_tokens, u.unmeasured_bytes, u.estimated) == (1004, 1000, 12, True)
    assert u.window == 200_000 and u.tier == "frontier" and u.threshold == 0.85
    g.observe_usage(None, 1500)    # a measured count replaces the estimate
    u = g.utilization()
    assert (u.tokens, u.estimated, u.model) == (1500, False, "claude-opus-4-5")


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=4000) | st.text(max_size=1000), st.lists(st.integers(0, 4000), max_size=10))
def test_any_chunking_gives_the_same_estimate(data, cuts) -> None:
    bounds = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    counts = set()
    for implementation in __import__("conftest").IMPLEMENTATIONS:
        g = guardrails(implementation)
        g.start_turn()
        for a, b in itertools.pairwise(bounds):
            g.on_result_chunk(data[a:b])
        g.on_result("cat", payload=data)  # the final payload is not counted again
        counts.add(g.utilization().unmeasured_bytes)
        one = guardrails(implementation)
        one.start_turn()
        one.on_result("cat", payload=data)
        counts.add(one.utilization().unmeasured_bytes)
    total = len(data.encode("utf-8", "surrogatepass")) if isinstance(data, str) else len(data)
    assert counts == {total}


def test_decoded_payloads_are_estimated_by_their_json(implementation: str) -> None:
    g = guardrails(implementation)
    g.start_turn()
    g.on_result("get", payload={"b": [1, 2], "a": "x"})  # {"a":"x","b":[1,2]}: 19 bytes
    assert g.utilization().unmeasured_bytes == 19


# -- compaction pending and the 95% cut, in-turn ----------------------------------------------

@pytest.mark.parametrize("mode", ["warn", "feedback"])
def test_below_enforce_the_95_percent_crossing_is_reported_and_recorded_not_cut(
        implementation: str, mode: str, tmp_path) -> None:
    """Issue 23: in warn the context guard used to cut the turn, against the mode ladder
    (nothing is cut in warn or feedback, as for a task's budget). The crossing is still
    reported and its record written, marked ``enforced: false``."""
    from tripwire.durability.sqlite import SQLiteStore

    events: list[OperatorEvent] = []
    store = SQLiteStore(tmp_path / "ctx.db")
    g = Guardrails(GuardrailsConfig(mode=mode, unattended=False), session_id="ctx",
                   on_event=events.append, implementation=implementation, store=store)
    g.start_turn()
    g.on_usage(model="claude-opus-4-5", input_tokens=180_000)
    assert g.on_result("kubectl_get", payload=b"{" * 29_997).proceed  # 189,999
    assert g.on_result("kubectl_get", payload=b"}" * 6).proceed       # 190,001: not cut
    assert g.on_call("read_file", "{}").proceed  # the turn goes on, observed
    (record,) = [e.record for e in events if e.kind == "context"
                 and e.record.get("operation") == "turn-cut"]
    assert record["enforced"] is False and record["estimate_tokens"] == 190_001
    rows = [r.data for r in store.history("ctx").rows if r.kind == "context"]
    assert [(r["operation"], r["enforced"]) for r in rows] == [("turn-cut", False)]


def test_compaction_becomes_pending_the_moment_the_threshold_is_crossed(implementation: str) -> None:
    events: list[OperatorEvent] = []
    g = guardrails(implementation, events)
    g.start_turn()
    g.on_usage(model="claude-opus-4-5", input_tokens=169_000)
    for i in range(333):  # 333 x 3 bytes = 333 tokens: 169,333 (each a new answer: identical
        assert g.on_result("read", payload=f"{i:03}").proceed  # ones are persistent-warnings)
    assert not g.status().compaction_pending
    assert g.on_result("read", payload="x" * 2001).proceed  # +667 tokens: 170,000
    assert g.status().compaction_pending
    (pending,) = [e for e in events if e.kind == "context"]
    assert pending.record["event"] == "compaction-pending"
    assert pending.record["tokens"] == 170_000 and pending.record["estimated"] is True
    g.on_result("read", payload="more")  # already pending: reported once
    assert len([e for e in events if e.kind == "context"]) == 1
    g.end_turn()
    turn = g.start_turn()
    assert turn.compact and bool(turn)
    assert not g.status().compaction_pending  # consumed by the turn that compacts


def test_past_95_percent_the_turn_is_cut(implementation: str) -> None:
    events: list[OperatorEvent] = []
    g = guardrails(implementation, events)
    g.start_turn()
    g.on_usage(model="claude-opus-4-5", input_tokens=180_000)
    assert g.on_result("kubectl_get", payload=b"{" * 29_997).proceed  # 189,999
    decision = g.on_result("kubectl_get", payload=b"}" * 6)            # 190,001
    assert (decision.action, decision.guardrail) == ("cut_turn", "context")
    assert "95.0% full (190,001 of 200,000 tokens, 30,003 bytes of it estimated)" in decision.reason
    assert g.on_call("read_file", "{}") is decision  # the rest of the turn is not observed
    (cut,) = [e for e in events if e.kind == "cut"]
    assert cut.record == {"event": "context-reduction-degraded", "operation": "turn-cut",
                          "estimate_tokens": 190_001, "window": 200_000,
                          "unmeasured_bytes": 30_003, "utilization": 0.950005}
    assert cut.message.startswith("[session ctx] context guard cut the turn in flight")
    assert not g.halted
    g.end_turn()
    assert g.start_turn().compact  # compaction is already pending: the session heals


def test_a_measured_count_past_95_percent_cuts_too(implementation: str) -> None:
    g = guardrails(implementation)
    g.start_turn()
    decision = g.on_usage(model="some-future-llm-7b", input_tokens=121_600)  # exactly 95%
    assert (decision.action, decision.guardrail) == ("cut_turn", "context")


def test_an_unknown_window_is_assumed_and_announced_once(implementation: str) -> None:
    _ANNOUNCED.discard("my-proxy-model")
    events: list[OperatorEvent] = []
    for _ in range(2):
        g = guardrails(implementation, events)
        g.on_usage(model="my-proxy-model", input_tokens=100)
        g.on_usage(model="my-proxy-model", input_tokens=200)
        u = g.utilization()
        assert (u.window, u.window_assumed, u.threshold) == (128_000, True, 0.85)
    (notice,) = [e for e in events if e.kind == "context"]
    assert notice.record == {"event": "context-reduction-degraded", "operation": "assumed-window",
                             "model": "my-proxy-model", "window": 128_000}
    assert "'my-proxy-model' is unknown: assuming 128,000 tokens" in notice.message


def test_per_tier_overrides_win_for_their_tier(implementation: str) -> None:
    g = guard(implementation, threshold=0.5, threshold_by_tier={"small": 0.2})
    g.observe_usage("claude-haiku-4-5", 40_000)  # 20% of 200K
    assert g.check() == "compact"
    g2 = guard(implementation, threshold=0.5, threshold_by_tier={"small": 0.2})
    g2.observe_usage("gpt-5", 60_000)  # unknown tier: the fallback 0.5 of 128K = 64,000
    assert g2.check() is None


@pytest.mark.parametrize("bad", [{"threshold": 1.5}, {"cut_at": 0}, {"tier": "huge"},
                                 {"threshold_by_tier": {"tiny": 0.3}}, {"tail_chars": 0}])
def test_bad_context_config(bad: dict) -> None:
    with pytest.raises(ConfigError):
        ContextConfig(**bad)


def test_context_config_from_a_file() -> None:
    config = GuardrailsConfig(file={
        "context": {"threshold_by_tier": {"mid": 0.6}, "tail_chars": 500},
        "models": {"windows": {"acme-9b": 32_000}, "tiers": [{"match": "acme", "tier": "small"}]},
    }).resolve().context
    assert config.threshold_by_tier == {"mid": 0.6} and config.tail_chars == 500
    assert config.catalogue.context_window("acme-9b").tokens == 32_000
    assert config.catalogue.tier("ACME-9B") == "small"
    with pytest.raises(ConfigError, match="unknown setting"):
        GuardrailsConfig(file={"context": {"treshold": 0.5}}).resolve()


# -- compaction policy -------------------------------------------------------------------------

class Summarizer:
    def __init__(self, *results):
        self.results = list(results)
        self.calls = 0

    def __call__(self, messages, focus):
        self.calls += 1
        result = self.results.pop(0) if self.results else SummaryResult("")
        if isinstance(result, Exception):
            raise result
        return result


HISTORY = [
    {"role": "user", "content": "Why do requests fail?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "function": {"name": "read_file", "arguments": '{"path": "src/app.py"}'}}]},
    {"role": "tool", "tool_call_id": "a", "content": "def app(): ..."},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Checking the router."},
        {"type": "tool_use", "id": "b", "name": "grep", "input": {"pattern": "route("}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": "r.py:3"}]},
    {"role": "assistant", "content": "The router skips parse_header."},
]


@pytest.mark.parametrize("finish, calls", [
    ("SAFETY", 1), ("MAX_TOKENS", 1), ("MALFORMED_FUNCTION_CALL", 1), ("length", 1),
    ("HARM_CATEGORY_SAFETY_blocked", 1), (None, 2), ("", 2), ("STOP", 2), ("SOMETHING_NEW", 2),
])
def test_the_retry_matrix(implementation: str, finish: str | None, calls: int) -> None:
    summarize = Summarizer(SummaryResult("", finish), SummaryResult("", finish))
    g = guardrails(implementation, summarize=summarize)
    result = g.compact(HISTORY)
    assert summarize.calls == calls
    assert result.kind == "failed" and not result.ok
    assert f"(finish_reason={finish or 'none given'}) after {calls} attempt" in result.reason
    (failed,) = result.records
    assert (failed["event"], failed["consecutive_failures"], failed["cooldown_turns"]) == (
        "context-reduction-failed", 1, 2)


def test_an_unexplained_empty_summary_retried_once_can_succeed(implementation: str) -> None:
    summarize = Summarizer(SummaryResult("  "), SummaryResult("# Current state\n..."))
    result = guardrails(implementation, summarize=summarize).compact(HISTORY, focus="router")
    assert (summarize.calls, result.kind, result.text) == (2, "summary", "# Current state\n...")
    # the task stays in place ahead of the summary (HISTORY holds no system prompt)
    assert result.apply(HISTORY) == [HISTORY[0], {"role": "user", "content": "# Current state\n..."}]


def test_backoff_then_fallback_to_mechanical_truncation(implementation: str) -> None:
    summarize = Summarizer()  # always empty, unexplained: two calls per attempt
    events: list[OperatorEvent] = []
    g = guardrails(implementation, events, summarize=summarize, tail_chars=60)
    kinds = []
    for _ in range(4):  # four consecutive turns with compaction pending
        g._context.pending = True
        if g.start_turn().compact:
            kinds.append(g.compact(HISTORY).kind)
        else:
            kinds.append("skipped (cooling down)")
        g.end_turn()
    # turn 1 fails (cooldown 2), turns 2-3 skipped, turn 4 fails again -> mechanical fallback
    assert kinds == ["failed", "skipped (cooling down)", "skipped (cooling down)", "mechanical"]
    assert summarize.calls == 4
    assert g._context.failures == 2 and g._context.cooldown == 0  # count kept, cooldown cleared
    records = [e.record["event"] for e in events if e.kind == "context"]
    assert records == ["context-reduction-failed", "context-reduction-failed",
                       "context-reduction-degraded", "compaction-boundary"]
    # the next pending cycle makes one summarizer attempt, then falls back again at once
    g._context.pending = True
    assert g.start_turn().compact
    assert g.compact(HISTORY).kind == "mechanical" and summarize.calls == 6


@pytest.mark.parametrize("failures, cooldown", [(1, 2), (2, 4), (3, 8), (4, 16), (5, 32), (6, 32)])
def test_backoff_lengths(implementation: str, failures: int, cooldown: int) -> None:
    g = guardrails(implementation, summarize=Summarizer(), fallback_after=99)
    for _ in range(failures):
        result = g.compact(HISTORY)
    assert result.records[0]["cooldown_turns"] == cooldown


def test_a_summarizer_exception_is_a_failure(implementation: str) -> None:
    result = guardrails(implementation, summarize=Summarizer(RuntimeError("429 Too Many Requests"))
                        ).compact(HISTORY)
    assert result.kind == "failed"
    assert result.reason == "summarizer raised RuntimeError: 429 Too Many Requests"


def test_a_success_resets_the_failure_count(implementation: str) -> None:
    g = guardrails(implementation, summarize=Summarizer(SummaryResult(""), SummaryResult(""),
                                                        SummaryResult("ok")))
    assert g.compact(HISTORY).kind == "failed"
    assert g.compact(HISTORY).kind == "summary"
    assert g._context.failures == 0 and g._context.cooldown == 0


def test_without_a_summarizer_compaction_is_mechanical(implementation: str) -> None:
    assert guardrails(implementation, tail_chars=60).compact(HISTORY).kind == "mechanical"


def test_mechanical_digest_exact_content() -> None:
    text, keep, calls = mechanical_truncation(HISTORY, tail_chars=60)
    assert (keep, calls) == (2, 2)
    assert text == "\n".join([
        TRUNCATION_NOTICE,
        "Dropped: 3 messages, 2 tool calls.",
        "Tool calls, most recent first:",
        '1. grep {"pattern":"route("}',
        '2. read_file {"path": "src/app.py"}',
        "Kept in place before this note: the first user message.",
        "The most recent 2 messages follow verbatim.",
    ])
    assert TRUNCATION_NOTICE.startswith("[context truncated] This is a mechanical truncation")
    assert "re-run the tool rather than guess" in TRUNCATION_NOTICE
    assert mechanical_truncation(HISTORY, tail_chars=60) == (text, keep, calls)  # deterministic


def test_mechanical_truncation_applies_to_the_history(implementation: str) -> None:
    result = guardrails(implementation, tail_chars=60).compact(HISTORY)
    new = result.apply(HISTORY)
    assert new[0] == HISTORY[0]  # the task
    assert new[1]["content"] == result.text and new[2:] == HISTORY[-2:]


def test_mechanical_truncation_with_nothing_to_drop_is_a_failure(implementation: str) -> None:
    result = guardrails(implementation).compact([{"role": "user", "content": "hi"}])
    assert result.kind == "failed"
    assert result.records[-1]["operation"] == "mechanical-truncation"
    assert guardrails(implementation).compact([]).kind == "skipped"
