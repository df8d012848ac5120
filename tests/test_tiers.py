"""The model catalogue (tripwire.tiers): conformance lines, then behaviour."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tripwire.context import tiers
from tripwire.context.tiers import (
    ASSUMED_CONTEXT_WINDOW,
    DEFAULT_CATALOGUE,
    DEFAULT_TIER_THRESHOLDS,
    FALLBACK_THRESHOLD,
    TIERS,
    ContextWindow,
    ModelCatalogue,
    TierRule,
    WindowRule,
    classify,
    compaction_threshold,
    context_window,
    is_small,
)
from tripwire.errors import ConfigError

# ---------------------------------------------------------------------------------------------
# Conformance: ../shared/conformance/model-cases.jsonl
# ---------------------------------------------------------------------------------------------

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
MODEL_CASES = SHARED / "conformance" / "model-cases.jsonl"
MISSING = (
    f"conformance data in ../shared is missing ({MODEL_CASES} not found): "
    "the model-cases.jsonl lines are not checked"
)

#: The fields this module answers for; `compaction` belongs to the context guard's tests.
FIELDS = ("tier", "is_small", "context_window", "window_assumed")


def _expected(line: dict[str, Any]) -> dict[str, Any]:
    """What tripwire must answer: the `tripwire` object's fields, else the reference's."""
    tw = line.get("tripwire")
    tw = tw if isinstance(tw, dict) else {}
    out: dict[str, Any] = {}
    if "tier" in tw or "tier" in line:
        tier = tw.get("tier", line.get("tier"))
        out["tier"] = tier or None  # "" = unknown
    if "is_small" in tw or "is_small" in line:
        out["is_small"] = tw.get("is_small", line.get("is_small"))
    if "context_window" in tw:
        out["context_window"] = tw["context_window"]
        out["window_assumed"] = tw.get("window_assumed", False)
    elif "context_window" in line:
        # Reference 0 = unknown, which SPEC §6 / §10.14 turns into the announced 128,000.
        window = line["context_window"]
        out["context_window"] = window or ASSUMED_CONTEXT_WINDOW
        out["window_assumed"] = window == 0
    if "window_assumed" in tw:
        out["window_assumed"] = tw["window_assumed"]
    return out


def _load() -> list[Any]:
    if not MODEL_CASES.is_file():
        return [pytest.param(None, None, id="model-cases-missing", marks=pytest.mark.skip(MISSING))]
    params = []
    for number, text in enumerate(MODEL_CASES.read_text(encoding="utf-8").splitlines(), 1):
        if not text.strip():
            continue
        line = json.loads(text)
        source = str(line.get("source", ""))
        short = source if len(source) <= 60 else source[:57] + "..."
        ident = f"L{number}:{line.get('model') or '<empty>'}@{short}"
        params.append(pytest.param(number, line, id=ident))
    return params


CASES = _load()


@pytest.mark.parametrize(("number", "line"), CASES)
def test_model_case(number: int, line: dict[str, Any]) -> None:
    expected = _expected(line)
    if not expected:
        # Compaction-only line: nothing for the catalogue to assert (see test below).
        assert set(line) - {"model", "source", "tripwire"} == {"compaction"}, line
        pytest.skip("compaction-only line: checked by the context guard's tests")
    model = line["model"]
    got: dict[str, Any] = {}
    if "tier" in expected:
        got["tier"] = classify(model)
    if "is_small" in expected:
        got["is_small"] = is_small(model)
    if "context_window" in expected:
        window = context_window(model)
        got["context_window"] = window.tokens
        got["window_assumed"] = window.assumed
    assert got == expected, f"line {number}: {line}"


@pytest.mark.skipif(not MODEL_CASES.is_file(), reason=MISSING)
def test_every_model_case_is_accounted_for() -> None:
    # Guards against a line being skipped silently, e.g. through a field misspelled in the data.
    known = {"model", "source", "compaction", "tripwire", *FIELDS}
    asserted = compaction_only = 0
    for param in CASES:
        _, line = param.values
        assert set(line) <= known, line
        assert isinstance(line["model"], str), line
        if _expected(line):
            asserted += 1
        else:
            assert "compaction" in line, line
            compaction_only += 1
    assert asserted + compaction_only == len(CASES)
    assert asserted >= 100  # 133 lines at the time of writing, 117 with catalogue fields


# ---------------------------------------------------------------------------------------------
# Tiers
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model", ["claude-opus-4-7", "CLAUDE-OPUS-4-7", "Claude-Opus-4-7-1M", "cLaUdE-oPuS-4-7"]
)
def test_tier_is_case_insensitive(model: str) -> None:
    assert classify(model) == "frontier"


@pytest.mark.parametrize(
    "model",
    [
        "gemini-2.0-flash-lite",
        "gemini-2.5-flash-lite",
        "gemini-3-flash-lite",
        "gemini-3.6-flash-lite",
        "gemini-3.7-flash-lite-preview",
        "gemini-3.8-flash-lite",
        "GEMINI-3.9-FLASH-LITE",
        "acme/flash-lite-9",
    ],
)
def test_flash_lite_is_small_before_every_flash_rule(model: str) -> None:
    assert classify(model) == "small"
    assert is_small(model)


def test_flash_lite_rule_precedes_every_flash_rule() -> None:
    position = {rule: i for i, rule in enumerate(tiers.BUILTIN_TIER_RULES)}
    lite = next(r for r in tiers.BUILTIN_TIER_RULES if "flash-lite" in r.substrings)
    for rule in tiers.BUILTIN_TIER_RULES:
        if any("flash" in s for s in rule.substrings) and rule is not lite:
            assert position[lite] < position[rule], rule


@pytest.mark.parametrize(
    "model",
    [
        "gemini-3-pro",
        "gemini-3.0-pro",
        "gemini-3.1-pro",
        "gemini-3.4-pro-preview",
        "gemini-3.5-pro",
        "gemini-3.12-pro",
        "vertex/GEMINI-3.9-PRO-latest",
    ],
)
def test_gemini_3_any_minor_pro_is_frontier(model: str) -> None:
    assert classify(model) == "frontier"


@pytest.mark.parametrize(
    ("model", "tier"),
    [
        ("gemini-3.x-pro", None),
        ("gemini-3.-pro", None),
        ("gemini-30-pro", None),
        # Mid through the 3.5-flash rule: the pattern wants digits right before -pro.
        ("gemini-3.5-flash-pro", "mid"),
    ],
)
def test_gemini_3_pro_pattern_needs_a_number(model: str, tier: str | None) -> None:
    assert classify(model) == tier


def test_gemini_3_8_flash_is_frontier() -> None:
    assert classify("gemini-3.8-flash") == "frontier"
    assert classify("gemini-3.8-flash-preview-09-2026") == "frontier"


@pytest.mark.parametrize(
    "model",
    [
        "",
        "echo",
        "gpt-5",
        "gpt-4o-mini",
        "claude-haiku-5",
        "claude-3-opus-20240229",
        "gemini-1.5-pro",
        "gemini-1.5-flash",
        "llama-3-70b",
        "some-future-model-9000",
    ],
)
def test_unknown_models_have_no_tier_and_are_not_small(model: str) -> None:
    assert classify(model) is None
    assert DEFAULT_CATALOGUE.tier(model) is None
    assert not is_small(model)


def test_is_small_only_for_small_tier() -> None:
    assert is_small("claude-haiku-4-5")
    assert not is_small("claude-sonnet-4-6")
    assert not is_small("claude-opus-4-7")
    assert not is_small("")


def test_tiers_are_the_three_known_ones() -> None:
    assert TIERS == ("frontier", "mid", "small")
    assert {rule.tier for rule in tiers.BUILTIN_TIER_RULES} == set(TIERS)


def test_model_id_must_be_a_string() -> None:
    with pytest.raises(TypeError):
        classify(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        context_window(b"gpt-5")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Windows
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        ("gemini-2.5-flash", 1_048_576),  # exact table
        ("gemini-2.5-flash-preview-05-20", 1_000_000),  # substring rule
        ("GEMINI-2.5-FLASH", 1_048_576),
        ("claude-opus-4-1", 200_000),
        ("claude-opus-4-1-1m", 1_000_000),
        ("claude-haiku-4-5-1m", 1_000_000),
        ("claude-sonnet-4-5-20250929", 200_000),
        ("claude-opus-4-6-20260101", 1_000_000),  # dated ids fall to the rules, same window
        ("claude-mythos-5", 1_000_000),
    ],
)
def test_known_windows(model: str, tokens: int) -> None:
    assert context_window(model) == ContextWindow(tokens, False)


@pytest.mark.parametrize(
    "model",
    [
        "",
        "gpt-5",
        "claude-3-opus",
        "claude-instant-1",
        "claude",
        "gemini-1.5-pro",
        "gemini-3.8-flash",
        "gemini-3.5-pro",
        "my-flash-lite-finetune",
    ],
)
def test_unmatched_windows_are_assumed_128k(model: str) -> None:
    # No catch-alls (SPEC §10.14): no 200,000 for unlisted claude-*, no 0 for the rest.
    assert context_window(model) == ContextWindow(ASSUMED_CONTEXT_WINDOW, True)
    assert ASSUMED_CONTEXT_WINDOW == 128_000


def test_builtin_window_tables_are_read_only() -> None:
    with pytest.raises(TypeError):
        tiers.BUILTIN_EXACT_WINDOWS["gpt-5"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        DEFAULT_TIER_THRESHOLDS["small"] = 0.1  # type: ignore[index]


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------


def test_user_tier_rule_beats_builtin_rule() -> None:
    cat = ModelCatalogue.from_config(
        {"models": {"tiers": [{"match": ["claude-haiku-4-5"], "tier": "mid"}]}}
    )
    assert cat.tier("claude-haiku-4-5") == "mid"
    assert not cat.is_small("claude-haiku-4-5")
    assert cat.tier("claude-haiku-4-1") == "small"  # built-ins still apply behind it
    assert classify("claude-haiku-4-5") == "small"  # the default catalogue is untouched


def test_user_tier_rule_for_an_unknown_model() -> None:
    cat = ModelCatalogue.from_config(
        {
            "models": {
                "tiers": [
                    {"match": "My-Proxy-Opus", "tier": "frontier"},
                    {"regex": [r"^acme-\d+b$"], "tier": "small"},
                ]
            }
        }
    )
    assert cat.tier("my-proxy-opus-2") == "frontier"
    assert cat.tier("ACME-7B") == "small"
    assert cat.tier("acme-7b-instruct") is None


def test_user_rules_keep_their_order() -> None:
    cat = ModelCatalogue.from_config(
        {
            "models": {
                "tiers": [
                    {"match": ["x-lite"], "tier": "small"},
                    {"match": ["x-"], "tier": "frontier"},
                ]
            }
        }
    )
    assert cat.tier("x-lite-1") == "small"
    assert cat.tier("x-big") == "frontier"


def test_user_window_for_unknown_model_is_not_assumed() -> None:
    cat = ModelCatalogue.from_config({"models": {"windows": {"My-Proxy-Opus": 200_000}}})
    assert cat.context_window("my-proxy-opus") == ContextWindow(200_000, False)
    assert cat.context_window("MY-PROXY-OPUS") == ContextWindow(200_000, False)
    assert cat.context_window("my-proxy-opus-2") == ContextWindow(128_000, True)


def test_user_window_rule_beats_builtin_exact_and_rules() -> None:
    cat = ModelCatalogue.from_config(
        {
            "models": {
                "windows": {"gemini-2.5-flash": 500_000},
                "window_rules": [
                    {"match": ["gemini-2.5"], "tokens": 400_000},
                    {"match": ["proxy-"], "requires": ["-1m"], "tokens": 1_000_000},
                    {"match": ["proxy-"], "tokens": 100_000},
                ],
            }
        }
    )
    assert cat.context_window("gemini-2.5-flash").tokens == 500_000  # user exact first
    assert cat.context_window("gemini-2.5-pro").tokens == 400_000  # user rule over built-in exact
    assert cat.context_window("proxy-a-1m").tokens == 1_000_000
    assert cat.context_window("proxy-a").tokens == 100_000
    assert cat.context_window("claude-opus-4-5").tokens == 200_000  # built-ins behind


def test_assumed_window_is_configurable() -> None:
    cat = ModelCatalogue.from_config({"models": {"assumed_window": 32_000}})
    assert cat.context_window("gpt-5") == ContextWindow(32_000, True)
    assert cat.assumed_window == 32_000


def test_config_without_models_section_is_the_builtin_catalogue() -> None:
    for config in (None, {}, {"compaction": {"threshold": 0.5}}, {"models": {}}):
        cat = ModelCatalogue.from_config(config)
        assert cat.tier("claude-haiku-4-5") == "small"
        assert cat.context_window("gemini-2.5-flash") == ContextWindow(1_048_576, False)


def test_from_config_extends_a_given_base() -> None:
    first = ModelCatalogue.from_config({"models": {"windows": {"a": 10}}})
    second = ModelCatalogue.from_config({"models": {"windows": {"b": 20}}}, base=first)
    assert second.context_window("a") == ContextWindow(10, False)
    assert second.context_window("b") == ContextWindow(20, False)


def test_constructor_replaces_tables() -> None:
    empty = ModelCatalogue(tier_rules=(), exact_windows={}, window_rules=())
    assert empty.tier("claude-opus-4-7") is None
    assert empty.context_window("claude-opus-4-7") == ContextWindow(128_000, True)
    custom = ModelCatalogue(
        tier_rules=[TierRule(["foo"], "mid")], window_rules=[WindowRule("foo", 42)]
    )
    assert custom.tier("FOO-1") == "mid"
    assert custom.context_window("foo-1") == ContextWindow(42, False)
    assert custom.context_window("gemini-2.5-flash").tokens == 1_048_576  # built-in exact kept


def test_extended() -> None:
    cat = DEFAULT_CATALOGUE.extended(
        tier_rules=[TierRule("gpt-5", "frontier")], exact_windows={"gpt-5": 400_000}
    )
    assert cat.tier("gpt-5") == "frontier"
    assert cat.context_window("gpt-5") == ContextWindow(400_000, False)
    assert cat.tier_rules[1:] == DEFAULT_CATALOGUE.tier_rules
    assert classify("gpt-5") is None


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ({"tiers": [{"match": ["x"], "tier": "huge"}]}, r"models\.tiers\[0\].*unknown tier 'huge'"),
        ({"tiers": [{"match": ["x"]}]}, r"models\.tiers\[0\].*missing 'tier'"),
        ({"tiers": [{"tier": "mid"}]}, r"models\.tiers\[0\].*at least one"),
        ({"tiers": [{"match": [""], "tier": "mid"}]}, r"models\.tiers\[0\].*empty string"),
        ({"tiers": [{"match": [1], "tier": "mid"}]}, r"models\.tiers\[0\]: match must be"),
        ({"tiers": [{"match": ["x"], "tier": 3}]}, r"models\.tiers\[0\]: tier must be a string"),
        ({"tiers": [{"regex": ["("], "tier": "mid"}]}, r"models\.tiers\[0\].*invalid regular"),
        ({"tiers": [{"match": ["x"], "tier": "mid", "tokens": 5}]}, r"unknown key.*'tokens'"),
        ({"tiers": [{"match": ["a"], "tier": "mid"}, "b"]}, r"models\.tiers\[1\] must be a map"),
        ({"tiers": {"match": ["x"], "tier": "mid"}}, r"models\.tiers must be a list"),
        ({"windows": {"x": 0}}, r"models\.windows\['x'\] must be positive"),
        ({"windows": {"x": -5}}, r"models\.windows\['x'\] must be positive"),
        ({"windows": {"x": 1.5}}, r"models\.windows\['x'\] must be an integer"),
        ({"windows": {"x": True}}, r"models\.windows\['x'\] must be an integer"),
        ({"windows": {"x": "200000"}}, r"models\.windows\['x'\] must be an integer"),
        ({"windows": {"X": 1, "x": 2}}, r"listed twice"),
        ({"windows": [["x", 1]]}, r"models\.windows must be a mapping"),
        ({"window_rules": [{"match": ["x"], "tokens": 0}]}, r"window_rules\[0\].*positive"),
        ({"window_rules": [{"match": ["x"]}]}, r"window_rules\[0\].*missing 'tokens'"),
        ({"window_rules": [{"match": ["x"], "tokens": 1, "requires": [2]}]}, r"requires must"),
        ({"assumed_window": 0}, r"models\.assumed_window must be positive"),
        ({"tier": []}, r"models: unknown key.*'tier'"),
    ],
)
def test_config_validation(models: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ModelCatalogue.from_config({"models": models})


def test_config_errors_are_value_errors() -> None:
    with pytest.raises(ValueError):
        ModelCatalogue.from_config({"models": []})
    with pytest.raises(ValueError):
        ModelCatalogue.from_config(["models"])  # type: ignore[arg-type]


def test_direct_rule_construction_is_validated() -> None:
    with pytest.raises(ConfigError, match="unknown tier"):
        TierRule(["x"], "tiny")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="positive"):
        WindowRule(["x"], -1)
    with pytest.raises(ConfigError, match="must be a TierRule"):
        ModelCatalogue(tier_rules=[WindowRule("x", 1)])  # type: ignore[list-item]
    # A bare string is one substring, not a list of characters.
    assert TierRule("gpt", "mid").substrings == ("gpt",)


# ---------------------------------------------------------------------------------------------
# Compaction thresholds
# ---------------------------------------------------------------------------------------------


def test_default_thresholds() -> None:
    assert dict(DEFAULT_TIER_THRESHOLDS) == {"frontier": 0.85, "mid": 0.65, "small": 0.35}
    assert FALLBACK_THRESHOLD == 0.85
    for tier in TIERS:
        assert compaction_threshold(tier) == DEFAULT_TIER_THRESHOLDS[tier]


def test_small_below_mid_below_frontier() -> None:
    t = DEFAULT_TIER_THRESHOLDS
    assert 0 < t["small"] < t["mid"] < t["frontier"] <= 1


@pytest.mark.parametrize("tier", [None, "", "huge"])
def test_unknown_tier_uses_fallback(tier: str | None) -> None:
    assert compaction_threshold(tier) == 0.85
    assert compaction_threshold(tier, fallback=0.5) == 0.5
    assert compaction_threshold(tier, {"small": 0.2}, fallback=0.5) == 0.5


def test_override_wins_for_its_tier_only() -> None:
    overrides = {"small": 0.2}
    assert compaction_threshold("small", overrides) == 0.2
    assert compaction_threshold("mid", overrides) == 0.65
    # A task class sets only the fallback: per-tier values still win for known tiers.
    assert compaction_threshold("small", overrides, fallback=0.7) == 0.2
    assert compaction_threshold("frontier", overrides, fallback=0.7) == 0.85
    assert compaction_threshold("mid", {"mid": 1}) == 1.0


def test_zero_means_unset_as_in_the_reference() -> None:
    # model-cases: "a 0 tier entry is ignored -> fallback 0.5"; "fallback 0 -> default 0.85".
    assert compaction_threshold("small", {"small": 0.0}, fallback=0.5) == 0.5
    assert compaction_threshold("small", {"small": 0}) == 0.85
    assert compaction_threshold(None, {}, fallback=0.0) == 0.85
    assert compaction_threshold("small", {}, fallback=0.0) == 0.35


@pytest.mark.parametrize("bad", [-0.1, 1.01, 2, math.nan, math.inf, True, "0.5", None])
def test_threshold_validation(bad: Any) -> None:
    if bad is not None:
        with pytest.raises(ConfigError, match="threshold"):
            compaction_threshold("small", {"small": bad})
        with pytest.raises(ConfigError, match="fallback threshold"):
            compaction_threshold(None, fallback=bad)
    else:
        # None is "not set" for the fallback; as a per-tier value it is unset too.
        assert compaction_threshold(None, fallback=None) == 0.85
        assert compaction_threshold("small", {"small": None}) == 0.85  # type: ignore[dict-item]


def test_override_for_unknown_tier_is_rejected() -> None:
    with pytest.raises(ConfigError, match="unknown tier 'smal'"):
        compaction_threshold("mid", {"smal": 0.3})
    with pytest.raises(ValueError):
        compaction_threshold(None, {"": 0.3})


def test_invalid_override_for_another_tier_is_still_rejected() -> None:
    with pytest.raises(ConfigError):
        compaction_threshold("frontier", {"small": 5})
