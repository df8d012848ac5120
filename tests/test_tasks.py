"""Task classes and the small-tier-parent guard (SPEC §8)."""

from __future__ import annotations

import pytest

from tripwire.budgets.classes import (
    TASK_CLASSES,
    SmallTierParentRefused,
    check_small_tier_parent,
    resolve_task,
)
from tripwire.errors import ConfigError

BUILTINS = ("read_file", "grep", "bash", "edit_file")


def test_the_five_classes() -> None:
    assert set(TASK_CLASSES) == {"debug", "implement", "chat", "research", "review"}
    expected = {"debug": ("frontier", 0.65, "auto", True, "required"),
                "implement": ("frontier", 0.70, "auto", False, "off"),
                "chat": ("mid", 0.85, "auto", False, "off"),
                "research": ("mid", 0.65, "allow", True, "required"),
                "review": ("frontier", 0.75, "auto", True, "required")}
    for name, (tier, threshold, ask, drops_bash, plan) in expected.items():
        c = TASK_CLASSES[name]
        assert (c.model_tier, c.compaction_threshold, c.ask_mode, "bash" in c.dropped_tools,
                c.plan_mode) == (tier, threshold, ask, drops_bash, plan)


def test_class_defaults() -> None:
    s = resolve_task("debug", builtin_tools=BUILTINS)
    assert (s.model, s.model_source) == ("claude-opus-5", "task class debug")
    assert s.tools == ("read_file", "grep", "edit_file")
    assert (s.compaction_threshold, s.ask_mode, s.plan_mode) == (0.65, "auto", "required")
    assert resolve_task("chat", provider="gemini").model == "gemini-3.5-flash"


def test_explicit_settings_win() -> None:
    s = resolve_task("debug", builtin_tools=BUILTINS, model="gemini-3.7-flash",
                     compaction_threshold=0.5, ask_mode="off", enable_tools=["bash"],
                     plan_mode="advisory")
    assert (s.model, s.model_source) == ("gemini-3.7-flash", "explicit")
    assert s.tools == BUILTINS and s.compaction_threshold == 0.5
    assert (s.ask_mode, s.plan_mode) == ("off", "advisory")
    assert resolve_task("debug", config_model="claude-sonnet-5").model_source == "config file"
    # naming a tool the class never dropped is harmless
    assert resolve_task("implement", builtin_tools=BUILTINS, enable_tools=["grep"]).tools == BUILTINS


def test_conflicts_and_unknowns_are_errors() -> None:
    with pytest.raises(ConfigError, match="both enabled and disabled"):
        resolve_task("debug", enable_tools=["bash"], disabled_tools=["bash"])
    with pytest.raises(ConfigError, match="unknown task class"):
        resolve_task("hack")
    with pytest.raises(ConfigError, match="plan mode"):
        resolve_task("debug", plan_mode="sometimes")


def test_small_tier_parent_guard() -> None:
    notice = check_small_tier_parent("gemini-2.5-flash", worker_model="gemini-2.5-flash")
    assert notice.startswith("small-tier parent: gemini-2.5-flash is a small-tier model.")
    assert "e.g. gemini-3.7-flash" in notice
    with pytest.raises(SmallTierParentRefused):
        check_small_tier_parent("claude-haiku-4-5", mode="refuse")
    assert check_small_tier_parent("claude-haiku-4-5", mode="allow") is None
    assert check_small_tier_parent("claude-haiku-4-5", one_shot=True) is None
    assert check_small_tier_parent("claude-haiku-4-5", mode="refuse", trust_operator=True) is None
    assert check_small_tier_parent("claude-opus-4-5", mode="refuse") is None
    assert check_small_tier_parent("some-future-llm", mode="refuse") is None  # unclassifiable
    with pytest.raises(ConfigError, match="warn, refuse, allow"):
        check_small_tier_parent("x", mode="loud")
