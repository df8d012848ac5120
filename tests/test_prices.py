"""Prices for usage without a reported cost (SPEC §11.3), through the real genai-prices."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from tripwire.interchange.events import Usage
from tripwire.interchange.prices import PriceCatalogue

genai_prices = pytest.importorskip("genai_prices", reason="the prices extra is not installed")
FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"


def catalogue_price(model: str, provider: str | None, **tokens: int) -> float:
    return float(genai_prices.calc_price(genai_prices.Usage(**tokens), model,
                                         provider_id=provider).total_price)


def test_usage_is_priced_by_provider_model_and_token_classes() -> None:
    usage = Usage("claude-sonnet-4-5", 1104, 57, None, 1000, 100, "anthropic")
    priced = PriceCatalogue().estimate(usage)
    assert priced.estimated and not priced.unpriced
    assert priced.cost_usd == catalogue_price("claude-sonnet-4-5", "anthropic",
                                              input_tokens=1104, output_tokens=57,
                                              cache_read_tokens=1000, cache_write_tokens=100)
    uncached = PriceCatalogue().estimate(Usage("claude-sonnet-4-5", 1104, 57, None, 0, 0,
                                               "anthropic"))
    assert uncached.cost_usd > priced.cost_usd  # cache reads are cheaper than fresh input


def test_a_reported_cost_is_kept_and_provider_prefixed_names_are_found() -> None:
    catalogue = PriceCatalogue()
    assert catalogue.estimate(Usage("gpt-4o", 10, 10, 0.5)).cost_usd == 0.5
    assert not catalogue.estimate(Usage("gpt-4o", 10, 10, 0.5)).estimated
    prefixed = catalogue.estimate(Usage("anthropic/claude-sonnet-4-5", 1000, 100))
    assert prefixed.cost_usd == catalogue_price("claude-sonnet-4-5", "anthropic",
                                                input_tokens=1000, output_tokens=100)


# prompt sizes on both sides of claude-sonnet-4-5's 200,000-token tier, where every token's
# rate doubles; cache reads and writes are parts of the prompt
TIERED_USAGES = [(1, 0, 0, 0), (1104, 57, 1000, 100), (50_000, 1234, 0, 49_000),
                 (199_999, 3, 150_000, 9_999), (200_000, 40_000, 1, 1),
                 (200_001, 7, 0, 0), (200_001, 12_345, 100_000, 100_001),
                 (987_654, 32_000, 500_000, 12_345), (2_000_000, 1, 0, 0)]


def test_the_rate_cache_prices_a_tiered_model_exactly_as_the_catalogue(
        monkeypatch: pytest.MonkeyPatch) -> None:
    catalogue = PriceCatalogue()
    asked = []
    model_calc = genai_prices.types.ModelInfo.calc_price

    def counted(*args: object, **kwargs: object) -> object:
        asked.append(1)
        return model_calc(*args, **kwargs)

    monkeypatch.setattr(genai_prices.types.ModelInfo, "calc_price", counted)
    for _ in range(2):  # the second pass is answered from the rate cards alone
        asked.clear()
        for prompt, output, read, write in TIERED_USAGES:
            priced = catalogue.estimate(Usage("claude-sonnet-4-5", prompt, output, None, read,
                                              write, "anthropic"))
            assert priced.cost_usd == catalogue_price(
                "claude-sonnet-4-5", "anthropic", input_tokens=prompt, output_tokens=output,
                cache_read_tokens=read, cache_write_tokens=write), (prompt, output, read, write)
    # the two calls are the reference prices of this test's own catalogue_price
    assert len(asked) == len(TIERED_USAGES)
    below = catalogue.estimate(Usage("claude-sonnet-4-5", 200_000, 0, None, 0, 0, "anthropic"))
    past = catalogue.estimate(Usage("claude-sonnet-4-5", 200_001, 0, None, 0, 0, "anthropic"))
    assert past.cost_usd == pytest.approx(below.cost_usd * 2, rel=1e-4)  # the tier's cliff


def test_the_rate_cache_keeps_a_price_per_request_and_usage_without_a_prompt() -> None:
    catalogue = PriceCatalogue()  # perplexity's sonar adds a price per request
    for prompt, output, read, write in [(1000, 36_124, 330, 11), (0, 500, 0, 0),
                                        (128_001, 11_783, 8_848, 112_742)]:
        priced = catalogue.estimate(Usage("sonar", prompt, output, None, read, write,
                                          "perplexity"))
        assert priced.cost_usd == catalogue_price(
            "sonar", "perplexity", input_tokens=prompt, output_tokens=output,
            cache_read_tokens=read, cache_write_tokens=write)


def test_an_unknown_model_is_announced_once_and_has_no_cost(
        caplog: pytest.LogCaptureFixture) -> None:
    catalogue = PriceCatalogue()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        first = catalogue.estimate(Usage("no-such-model-7", 100, 10))
        again = catalogue.estimate(Usage("no-such-model-7", 200, 20))
    assert first == again and first.cost_usd is None and first.unpriced
    assert [r.getMessage() for r in caplog.records] == [
        "model 'no-such-model-7' has no price in the catalogue: its usage has no "
        "cost, and cost ceilings cannot trip on it"]


def test_without_the_catalogue_installed_it_says_so_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # import fails
    catalogue = PriceCatalogue()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        assert catalogue.estimate(Usage("gpt-4o", 1, 1)).unpriced
        assert catalogue.estimate(Usage("gpt-4o", 1, 1)).unpriced
    assert len(caplog.records) == 1
    assert "pip install 'tripwire[prices]'" in caplog.records[0].getMessage()


def tripwire(*argv: str) -> subprocess.CompletedProcess:
    """The real command, on the tripwire this process imports (a PYTHONPATH to src/ would pick
    up a tree without the built native core under CI's non-editable install)."""
    return subprocess.run([sys.executable, "-m", "tripwire", *argv], capture_output=True,
                          text=True, timeout=300, check=False)


def test_replay_prices_a_transcript_and_marks_the_trip_estimated(tmp_path: Path) -> None:
    db = tmp_path / "g.sqlite"
    proc = tripwire("replay", str(FIXTURES / "claude-code.jsonl"), "--mode", "enforce",
                    "--max-session-cost-usd", "0.002", "--store", str(db))
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(x) for x in proc.stdout.splitlines()]
    (decision,) = [r for r in records if r.get("action") == "halt_session"]
    assert (decision["event"], decision["guardrail"]) == (8, "cost_ceiling")
    assert decision["reason"].endswith("(estimated: the spend includes costs computed from "
                                       "token prices)")
    summary = records[-1]
    # 4 usages priced before the halt; the main session's later ones are in refused turns
    assert (summary["estimated_costs"], summary["unpriced_models"]) == (4, [])
    status = [json.loads(x) for x in tripwire("status", str(db)).stdout.splitlines()]
    assert [(s["session"], s["halted"], s.get("cost_estimated")) for s in status
            if s["kind"] == "session"] == [
        ("5e1f0000-0000-4000-8000-000000000001", True, True),
        ("5e1f0000-0000-4000-8000-000000000001:agent-abc1234", False, True)]


def test_status_says_a_ceiling_cannot_trip_on_an_unpriced_model(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    usage = {"type": "usage", "model": "no-such-model-7", "input_tokens": 1000,
             "output_tokens": 1000}
    path.write_text("".join(json.dumps(e) + "\n" for e in (
        {"type": "turn_start"}, usage, usage, {"type": "turn_end"})))
    db = tmp_path / "g.sqlite"
    proc = tripwire("replay", str(path), "--quiet", "--max-session-cost-usd", "0.01",
                    "--store", str(db))
    assert proc.returncode == 0
    summary = json.loads(proc.stdout)
    assert (summary["decisions"], summary["unpriced_models"]) == ({}, ["no-such-model-7"])
    assert proc.stderr.count("has no price in the catalogue") == 1
    (status,) = [line for x in tripwire("status", str(db)).stdout.splitlines()
                 for line in [json.loads(x)] if line["kind"] == "session"]
    assert status["unpriced_models"] == ["no-such-model-7"]
    assert status["note"] == ("the cost ceiling cannot trip on usage of 'no-such-model-7': the "
                              "price catalogue has no price for it, so it has no cost")
