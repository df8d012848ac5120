"""Task classes and the small-tier-parent guard (SPEC §8, ``seeds/context-management.md``).

A task class is a bundle of defaults an operator picks up front (``debug``, ``implement``,
``chat``, ``research``, ``review``): the parent's model tier, the compaction threshold, the
ask mode, the built-in tools it drops and whether a plan comes first. Operator-declared, not
inferred: the operator knows whether they are debugging or chatting. Every explicit setting
wins over the class; the class's compaction threshold is the *fallback*, so per-tier overrides
still win for their tier.

The small-tier-parent guard speaks when the parent model (chosen explicitly or by config) is
small-tier: small models work well as subtask workers but loop and stall as the parent of a
long session. ``warn`` (default) returns a notice, ``refuse`` raises, ``allow`` is silent; it
is skipped for one-shot runs (the operator may be scripting a small model on purpose),
trust-the-operator runs, and models whose tier does not classify.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..context.tiers import DEFAULT_CATALOGUE, ModelCatalogue
from ..errors import ConfigError, SmallTierParentRefused

__all__ = [
    "TaskClass",
    "TASK_CLASSES",
    "TaskSettings",
    "resolve_task",
    "SmallTierParentRefused",
    "check_small_tier_parent",
    "TIER_MODELS",
]

#: The model each tier resolves to, per provider (seed table "Resolution per-provider").
TIER_MODELS: Mapping[str, Mapping[str, str]] = {
    "anthropic": {"frontier": "claude-opus-5", "mid": "claude-sonnet-5",
                  "small": "claude-haiku-4-5"},
    "gemini": {"frontier": "gemini-3.7-flash", "mid": "gemini-3.5-flash",
               "small": "gemini-3.5-flash-lite"},
}

ASK_MODES = ("off", "stdin", "auto", "allow")
PLAN_MODES = ("off", "advisory", "required")


@dataclass(frozen=True)
class TaskClass:
    name: str
    model_tier: str
    compaction_threshold: float
    ask_mode: str
    dropped_tools: tuple[str, ...]
    plan_mode: str
    when: str


# Investigation-shaped classes drop bash and plan first: in the measured session the model
# reached for `bash grep -rn` with the native grep tool in its schema, and wrote no plan.
TASK_CLASSES: Mapping[str, TaskClass] = {
    c.name: c for c in (
        TaskClass("debug", "frontier", 0.65, "auto", ("bash",), "required",
                  "bug hunts, root-cause investigations, multi-file traces"),
        TaskClass("implement", "frontier", 0.70, "auto", (), "off",
                  "feature work, multi-file refactors (edit-then-test needs the shell)"),
        TaskClass("chat", "mid", 0.85, "auto", (), "off",
                  "Q&A, pairing, lightweight design discussion"),
        TaskClass("research", "mid", 0.65, "allow", ("bash",), "required",
                  "read-heavy codebase exploration"),
        TaskClass("review", "frontier", 0.75, "auto", ("bash",), "required", "PR / diff review"),
    )
}


@dataclass(frozen=True)
class TaskSettings:
    """A task class with explicit settings applied. ``*_source`` says which won."""

    task: str | None
    model: str | None
    model_source: str
    compaction_threshold: float | None  # the fallback threshold (per-tier overrides still win)
    ask_mode: str | None
    tools: tuple[str, ...]
    plan_mode: str | None


def resolve_task(
    task: str | None,
    *,
    builtin_tools: Iterable[str] = (),
    model: str | None = None,
    config_model: str | None = None,
    provider: str = "anthropic",
    compaction_threshold: float | None = None,
    ask_mode: str | None = None,
    enable_tools: Iterable[str] = (),
    disabled_tools: Iterable[str] = (),
    plan_mode: str | None = None,
) -> TaskSettings:
    """Apply a task class's defaults under explicit settings.

    ``model`` (explicit) > ``config_model`` (the config file's) > the class's tier model for
    ``provider``. ``enable_tools`` adds back tools the class dropped (naming one it never
    dropped is harmless), but cannot re-enable a tool the operator disabled: asking for both is
    an error rather than a silent win for either side.
    """
    cls = None
    if task is not None:
        key = task.strip().lower()
        if key not in TASK_CLASSES:
            raise ConfigError(f"unknown task class {task!r} (known: {', '.join(TASK_CLASSES)})")
        cls = TASK_CLASSES[key]
    if provider not in TIER_MODELS:
        raise ConfigError(f"unknown provider {provider!r} (known: {', '.join(TIER_MODELS)})")
    if ask_mode is not None and ask_mode not in ASK_MODES:
        raise ConfigError(f"ask mode must be one of {', '.join(ASK_MODES)}, not {ask_mode!r}")
    if plan_mode is not None and plan_mode not in PLAN_MODES:
        raise ConfigError(f"plan mode must be one of {', '.join(PLAN_MODES)}, not {plan_mode!r}")
    if compaction_threshold is not None and not 0 < compaction_threshold <= 1:
        raise ConfigError(f"compaction threshold must be in (0, 1], not {compaction_threshold!r}")
    enable, disabled = set(enable_tools), set(disabled_tools)
    both = sorted(enable & disabled)
    if both:
        raise ConfigError(f"tool(s) {', '.join(both)} both enabled and disabled")
    if model is not None:
        chosen, source = model, "explicit"
    elif config_model is not None:
        chosen, source = config_model, "config file"
    elif cls is not None:
        chosen, source = TIER_MODELS[provider][cls.model_tier], f"task class {cls.name}"
    else:
        chosen, source = None, "unset"
    dropped = set(cls.dropped_tools) if cls is not None else set()
    tools = tuple(
        t for t in builtin_tools if (t not in dropped or t in enable) and t not in disabled
    )
    return TaskSettings(
        task=cls.name if cls is not None else None,
        model=chosen,
        model_source=source,
        compaction_threshold=compaction_threshold if compaction_threshold is not None
        else (cls.compaction_threshold if cls is not None else None),
        ask_mode=ask_mode if ask_mode is not None else (cls.ask_mode if cls else None),
        tools=tools,
        plan_mode=plan_mode if plan_mode is not None else (cls.plan_mode if cls else None),
    )


SMALL_TIER_MODES = ("warn", "refuse", "allow")


def check_small_tier_parent(
    model: str | None,
    *,
    mode: str = "warn",
    one_shot: bool = False,
    trust_operator: bool = False,
    worker_model: str | None = None,
    catalogue: ModelCatalogue = DEFAULT_CATALOGUE,
) -> str | None:
    """The notice for a small-tier parent (``warn``), None when nothing is to be said, or
    ``SmallTierParentRefused`` (``refuse``)."""
    key = mode.strip().lower() if isinstance(mode, str) else mode
    if key not in SMALL_TIER_MODES:
        raise ConfigError(f"small-tier-parent mode must be one of {', '.join(SMALL_TIER_MODES)}, "
                          f"not {mode!r}")
    if key == "allow" or one_shot or trust_operator or not model:
        return None
    if catalogue.tier(model) != "small":
        return None  # frontier, mid, or unclassifiable: nothing to say
    suggestion = TIER_MODELS["gemini" if "gemini" in model.lower() else "anthropic"]["frontier"]
    notice = (
        f"small-tier parent: {model} is a small-tier model. Small-tier models work well as "
        f"subtask workers but loop and stall as the parent for long interactive sessions. "
        f"Consider a frontier or mid-tier model for the parent (e.g. {suggestion}, with "
        f"{worker_model or model} as the subtask worker). Set the small-tier-parent guard to "
        "allow to suppress this notice."
    )
    if key == "refuse":
        raise SmallTierParentRefused(notice)
    return notice
