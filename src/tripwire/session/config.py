"""Configuration: config files (TOML or JSON) and their resolution into ``ResolvedConfig``.

A config file is one table whose sections configure each part of tripwire:

    [signals.repeated-tool-call]     # SPEC §1 knobs, by signal id
    threshold = 3

    [watchdog]                       # SPEC §3
    mode = "enforce"                 # off | warn | feedback | enforce
    escalate_after = 3               # turns in a row cut by one signal that halt the session
    feedback_queue = 4

    [cost]                           # SPEC §4, US dollars; 0 disables a bound
    max_turn_usd = 0.50
    max_session_usd = 20.0
    escalate_after = 3

    [session]
    unattended = true                # default: stdin is not a TTY
    task_class = "debug"             # debug | implement | chat | research | review
    model = "claude-opus-4-8"        # the parent model (the small-tier-parent guard reads it)

    [safety]
    small_tier_parent = "warn"       # warn | refuse | allow

    [budget]                         # task counters; 0 turns one off
    steps = 200
    deadline_s = 1800

    [results]                        # SPEC §12.1: how results are compared
    volatile = ["durations", "timestamps", "hex", "pids", "line_counters", "temp_paths",
            "duration_keys", "id_counters"]
    ignore_json_keys = ["request_id"]
    [results.tools.http_get]
    ignore_json_keys = ["etag"]

    [tools."mcp__gdb__*"]            # issue 39: per-tool rules, a threshold or "off" per signal
    repeated-tool-call = "off"
    repeated-tool-name = 40

Unknown sections, signals or knobs are errors that name the file: a typo that silently
changed nothing would leave an operator believing in a threshold that is not in force.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..base.log import ONCE
from ..base.modes import Mode, detect_unattended, resolve_mode
from ..base.money import parse_dollars
from ..base.validate import check_hook, check_session_id
from ..budgets.caps import Budget
from ..budgets.classes import SMALL_TIER_MODES, TaskSettings, check_small_tier_parent, resolve_task
from ..context.config import ContextConfig
from ..errors import ConfigError
from ..signals import WatchdogConfig

if TYPE_CHECKING:  # read_config_file imports it: most runs read no config file
    from pathlib import Path

__all__ = ["read_config_file", "builtin_signals", "watchdog_config", "SECTIONS", "GuardrailsConfig",
           "ResolvedConfig", "resolve_session"]

#: Top-level sections a config file may hold.
# [notify]: the servers' (web.notify), not a session's; [tools]: per-tool rules (issue 39)
SECTIONS = ("signals", "watchdog", "cost", "session", "context", "models", "safety",
            "budget", "results", "notify", "tools")


#: Bytes a config file may hold: far more than any configuration (a hook reads its config on
#: every event, and the file may be in a folder the agent writes).
MAX_CONFIG = 1 << 20


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Parse a config file: ``.toml`` as TOML, ``.json`` as JSON, anything else as whichever
    parses. Raises ConfigError naming the file on a missing file, bad syntax or unknown section.
    Read as a file an agent may have replaced (``base.files``): a regular file (a link to one
    is followed) of at most ``MAX_CONFIG`` bytes, never a FIFO or a device."""
    from pathlib import Path

    from ..base.files import NotRead, read_whole

    path = Path(path)
    try:
        raw = read_whole(str(path), MAX_CONFIG)
    except NotRead as exc:
        if not os.path.lexists(path) or (os.path.islink(path) and not path.exists()):
            raise ConfigError(f"{path}: config file not found") from None
        if path.is_dir():
            raise ConfigError(f"{path}: is a directory, not a config file") from None
        if exc.reason.startswith("is over "):
            raise ConfigError(f"{path}: config file is over {MAX_CONFIG} bytes: not a "
                              "config") from None
        raise ConfigError(f"{path}: cannot read config file ({exc.reason})") from None
    data = _parse(path, raw)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: a config file must hold a table/object at the top level")
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise ConfigError(
            f"{path}: unknown config section(s) {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(SECTIONS)})"
        )
    return dict(data)


def _parse(path: Path, raw: bytes) -> Any:
    # imported here: most runs read no config file (a hook pays for each import on every event)
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    suffix = path.suffix.lower()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: config file is not UTF-8") from None
    errors = []
    kinds = {".toml": ("toml",), ".json": ("json",)}.get(suffix, ("json", "toml"))
    for kind in kinds:
        try:
            return json.loads(text) if kind == "json" else tomllib.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            errors.append(f"{kind.upper()}: {exc}")
    raise ConfigError(f"{path}: cannot parse config file ({'; '.join(errors)})")


#: SPEC §4: an unattended run has nobody watching the spend.
UNATTENDED_SESSION_CEILING_USD = 10.0
#: SPEC §3/§4: this many turns in a row cut by the same thing halt the session.
ESCALATE_AFTER = 3
#: SPEC §3: the feedback queue's bound.
FEEDBACK_QUEUE = 4

_WATCHDOG_FILE_KEYS = {"mode", "escalate_after", "feedback_queue"}
_COST_FILE_KEYS = {"max_turn_usd", "max_session_usd", "escalate_after"}
_SESSION_FILE_KEYS = {"unattended", "task_class", "model", "provider", "one_shot",
                      "trust_operator"}
_SAFETY_FILE_KEYS = {"small_tier_parent"}


#: [notify]: the servers' notification URLs and body format (read by ``web.notify``)
NOTIFY_FILE_KEYS = frozenset({"urls", "format"})


def file_keys() -> dict[str, frozenset[str]]:
    """Every key of every section a config file takes but ``[signals]`` (whose keys are the
    signal catalogue's: each signal's ``enabled`` and knobs, and ``custom``): what
    ``examples/tripwire.toml`` must name, all of it."""
    from ..budgets.caps import COUNTERS
    from ..context.config import FILE_KEYS
    from ..context.tiers import MODELS_KEYS

    return {"watchdog": frozenset(_WATCHDOG_FILE_KEYS), "cost": frozenset(_COST_FILE_KEYS),
            "session": frozenset(_SESSION_FILE_KEYS), "safety": frozenset(_SAFETY_FILE_KEYS),
            "budget": frozenset({*COUNTERS, "checkin"}), "context": FILE_KEYS,
            "models": MODELS_KEYS, "notify": NOTIFY_FILE_KEYS}


# --------------------------------------------------------------------------------------------
# Configuration


@dataclass(frozen=True)
class ResolvedConfig:
    """Every setting with its final value, and where the mode and session ceiling came from."""

    mode: Mode
    mode_source: str
    unattended: bool
    watchdog: WatchdogConfig
    max_turn_cost_usd: float
    max_session_cost_usd: float
    session_ceiling_source: str
    watchdog_escalate_after: int
    cost_escalate_after: int
    feedback_queue: int
    context: ContextConfig
    task: TaskSettings | None = None      # the task class applied (None: no class)
    task_source: str = "unset"
    small_tier_parent: str = "warn"
    small_tier_source: str = "default"
    small_tier_notice: str | None = None  # the guard's notice (warn mode, small-tier parent)
    custom_signals: tuple[Any, ...] = ()  # factories of host-defined signals
    budget: Budget = field(default_factory=lambda: Budget.defaults(False))

    def describe(self) -> str:
        """The startup line: the mode, its source and what it does."""
        effect = {
            Mode.OFF: "observes nothing",
            Mode.WARN: "reports alerts to the operator only",
            Mode.FEEDBACK: "reports alerts and tells the model on its next turn",
            Mode.ENFORCE: "reports, tells the model, cuts a turn on a critical alert and halts "
                          "the session on a session-scoped one",
        }[self.mode]
        turn = f"${self.max_turn_cost_usd:.4f}" if self.max_turn_cost_usd else "off"
        session = f"${self.max_session_cost_usd:.4f}" if self.max_session_cost_usd else "off"
        task = (f"task class {self.task.task} [{self.task_source}]"
                if self.task is not None and self.task.task is not None else "no task class")
        return (f"watchdog: {self.mode} mode [{self.mode_source}] ({effect}); cost ceiling: "
                f"per turn {turn}, per session {session} [{self.session_ceiling_source}]; "
                f"{task}; small-tier parent: {self.small_tier_parent} "
                f"[{self.small_tier_source}]")

    def announce(self) -> None:
        """The startup line on the ``tripwire`` logger (INFO), and the small-tier-parent notice
        (WARNING): once per process for each distinct configuration, however many sessions
        share it (a fleet's sessions do)."""
        line: str | None = self.__dict__.get("_startup_line")
        if line is None:  # a fleet's sessions share one ResolvedConfig: describe it once
            line = self.describe()
            object.__setattr__(self, "_startup_line", line)
        with _ANNOUNCED_LOCK:
            if line in _ANNOUNCED:
                return
            _ANNOUNCED.add(line)
        logger = logging.getLogger("tripwire")
        logger.info(line, extra=ONCE)
        if self.small_tier_notice:
            logger.warning(self.small_tier_notice, extra=ONCE)


@dataclass(frozen=True)
class GuardrailsConfig:
    """Explicit settings; ``None`` means "not set here". Precedence (SPEC §3, §4): a field set
    here > the config ``file`` (a parsed config file's sections) > the default for an
    unattended or interactive run. An explicit 0 disables a cost bound even when unattended."""

    watchdog: WatchdogConfig | None = None
    mode: str | Mode | None = None
    unattended: bool | None = None
    max_turn_cost_usd: float | None = None
    max_session_cost_usd: float | None = None
    watchdog_escalate_after: int | None = None
    cost_escalate_after: int | None = None
    feedback_queue: int | None = None
    context: ContextConfig | None = None
    task_class: str | None = None
    model: str | None = None
    provider: str | None = None
    small_tier_parent: str | None = None
    one_shot: bool | None = None
    trust_operator: bool | None = None
    custom_signals: tuple[Any, ...] | None = None
    budget: Budget | None = None  # task caps (SPEC §7.1): set ones win over [budget]
    #: the host's tools: a call of any other name is unknown-tool's (SPEC §12.4); the same as
    #: [signals.unknown-tool] known_tools, which this one overrides
    known_tools: Iterable[str] | None = None
    #: per-tool rules (issue 39): tool name or glob -> {signal id: threshold or "off"}; the
    #: same as the file's [tools.<name>] tables, which this one replaces whole
    tools: Mapping[str, Mapping[str, Any]] | None = None
    file: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_file(cls, path: str, **explicit: Any) -> GuardrailsConfig:
        """Read a TOML/JSON config file; keyword arguments override it."""
        return cls(file=read_config_file(path), **explicit)

    def resolve(self) -> ResolvedConfig:
        f = self.file
        wd_file = _section(f, "watchdog", _WATCHDOG_FILE_KEYS)
        cost_file = _section(f, "cost", _COST_FILE_KEYS)
        session_file = _section(f, "session", _SESSION_FILE_KEYS)
        unattended = _first(self.unattended, session_file.get("unattended"))
        # a one-shot run (``-p``) is unattended whatever stdin is (SPEC §13)
        one_shot = _flag(_first(self.one_shot, session_file.get("one_shot"), False), "one_shot")
        if unattended is None:
            unattended = True if one_shot else detect_unattended()
        elif not isinstance(unattended, bool):
            raise ConfigError(f"unattended must be true or false, not {unattended!r}")
        elif one_shot and not unattended:
            raise ConfigError("a one-shot run is unattended: one_shot = true with "
                              "unattended = false contradicts it")
        if self.mode is not None and not isinstance(self.mode, (str, Mode)):
            raise ConfigError(f"mode must be a string, not {self.mode!r}")
        mode, mode_source = resolve_mode(self.mode, wd_file.get("mode"), unattended)
        watchdog = self.watchdog
        if watchdog is None:
            watchdog = watchdog_config(f)
        elif not isinstance(watchdog, WatchdogConfig):
            raise ConfigError("GuardrailsConfig(watchdog=...) must be a WatchdogConfig, e.g. "
                              "WatchdogConfig(signals={'repeated-tool-call': {'threshold': 3}}), "
                              f"not {type(watchdog).__name__}")
        if self.known_tools is not None:
            known = self.known_tools
            watchdog = watchdog.with_knobs(  # a str is refused by the knob, as a name list
                "unknown-tool", known_tools=known if isinstance(known, str) else tuple(known))
        if self.tools is not None:
            watchdog = watchdog.with_tools(self.tools)
        if self.context is not None and not isinstance(self.context, ContextConfig):
            raise ConfigError("GuardrailsConfig(context=...) must be a ContextConfig, "
                              f"not {type(self.context).__name__}")
        session, session_source = self.max_session_cost_usd, "explicit"
        if session is None and "max_session_usd" in cost_file:
            session, session_source = cost_file["max_session_usd"], "config file"
        if session is None:
            if unattended:
                session, session_source = UNATTENDED_SESSION_CEILING_USD, "unattended default"
            else:
                session, session_source = 0.0, "interactive default"
        turn = _first(self.max_turn_cost_usd, cost_file.get("max_turn_usd"), 0.0)
        context = self.context if self.context is not None else ContextConfig.from_mapping(f)
        task, task_source = self._task(session_file)
        if task is not None and task.compaction_threshold is not None \
                and context.threshold is None:
            # the class's threshold is a default: an explicit or file threshold wins
            context = replace(context, threshold=task.compaction_threshold)
        tier_mode, tier_source, notice = self._small_tier(f, session_file, task, context)
        return ResolvedConfig(
            mode=mode,
            mode_source=mode_source,
            unattended=unattended,
            watchdog=watchdog,
            max_turn_cost_usd=_dollars(turn, "max_turn_cost_usd" if self.max_turn_cost_usd
                                       is not None else "[cost] max_turn_usd"),
            max_session_cost_usd=_dollars(session, "max_session_cost_usd"
                                          if session_source != "config file"
                                          else "[cost] max_session_usd"),
            session_ceiling_source=session_source,
            watchdog_escalate_after=_count(_first(self.watchdog_escalate_after,
                                                  wd_file.get("escalate_after"), ESCALATE_AFTER),
                                           "watchdog escalate_after"),
            cost_escalate_after=_count(_first(self.cost_escalate_after,
                                              cost_file.get("escalate_after"), ESCALATE_AFTER),
                                       "cost escalate_after"),
            feedback_queue=_count(_first(self.feedback_queue, wd_file.get("feedback_queue"),
                                         FEEDBACK_QUEUE), "feedback_queue"),
            context=context,
            task=task,
            task_source=task_source,
            small_tier_parent=tier_mode,
            small_tier_source=tier_source,
            small_tier_notice=notice,
            custom_signals=self._custom_signals(f),
            budget=self._budget(f, unattended),
        )

    def _budget(self, f: Mapping[str, Any], unattended: bool) -> Budget:
        if self.budget is not None and not isinstance(self.budget, Budget):
            raise ConfigError("GuardrailsConfig(budget=...) must be a Budget, "
                              f"not {type(self.budget).__name__}")
        section = f.get("budget", {})
        from_file = Budget.from_mapping(section, "config section [budget]") if section \
            else Budget()
        return (self.budget or Budget()).over(from_file).over(Budget.defaults(unattended))

    def _task(self, session: Mapping[str, Any]) -> tuple[TaskSettings | None, str]:
        name, source = self.task_class, "explicit"
        if name is None and session.get("task_class") is not None:
            name, source = session["task_class"], "config file"
        if name is not None and not isinstance(name, str):
            raise ConfigError(f"task_class must be a string, not {name!r}")
        model = _text(self.model, "model")
        config_model = _text(session.get("model"), "[session] model")
        provider = _first(_text(self.provider, "provider"),
                          _text(session.get("provider"), "[session] provider"), "anthropic")
        if name is None and model is None and config_model is None:
            return None, "unset"
        settings = resolve_task(name, model=model, config_model=config_model, provider=provider)
        return settings, (source if name is not None else "unset")

    def _small_tier(self, f: Mapping[str, Any], session: Mapping[str, Any],
                    task: TaskSettings | None, context: ContextConfig,
                    ) -> tuple[str, str, str | None]:
        safety = _section(f, "safety", _SAFETY_FILE_KEYS)
        mode, source = self.small_tier_parent, "explicit"
        if mode is None and safety.get("small_tier_parent") is not None:
            mode, source = safety["small_tier_parent"], "config file"
        if mode is None:
            mode, source = "warn", "default"
        if not isinstance(mode, str) or mode.strip().lower() not in SMALL_TIER_MODES:
            raise ConfigError(f"small_tier_parent must be one of {', '.join(SMALL_TIER_MODES)}, "
                              f"not {mode!r}")
        mode = mode.strip().lower()
        one_shot = _flag(_first(self.one_shot, session.get("one_shot"), False), "one_shot")
        trust = _flag(_first(self.trust_operator, session.get("trust_operator"), False),
                      "trust_operator")
        model = task.model if task is not None else None
        notice = check_small_tier_parent(model, mode=mode, one_shot=one_shot,
                                         trust_operator=trust, catalogue=context.catalogue)
        return mode, source, notice

    def _custom_signals(self, f: Mapping[str, Any]) -> tuple[Any, ...]:
        if self.custom_signals is not None:
            return tuple(self.custom_signals)
        section = f.get("signals")
        if not isinstance(section, Mapping) or "custom" not in section:
            return ()  # the common case imports nothing (a hook pays for each import)
        from ..signals.custom import factories_from_config

        return factories_from_config(f)


def resolve_session(config: object, session_id: object,
                    hooks: Mapping[str, object]) -> ResolvedConfig:
    """What ``Guardrails(config, session_id=, on_event=, summarize=)`` is given, checked in
    that order (a typed ``ConfigError``), and the configuration resolved."""
    if config is not None and not isinstance(config, (GuardrailsConfig, ResolvedConfig)):
        hint = (f" (for a mode alone: GuardrailsConfig(mode={config!r}))"
                if isinstance(config, (str, Mode)) else "")
        raise ConfigError("Guardrails(config) takes a GuardrailsConfig or None, not "
                          f"{type(config).__name__}{hint}")
    for what, hook in hooks.items():
        check_hook(hook, what)
    check_session_id(session_id, ConfigError)
    return (config if isinstance(config, ResolvedConfig)
            else (config or GuardrailsConfig()).resolve())


def watchdog_config(file: Mapping[str, Any]) -> WatchdogConfig:
    """The built-in signals' knobs (``[signals.<id>]``) and ``[results]`` of a parsed config
    file, as a ``WatchdogConfig``."""
    return WatchdogConfig.from_mapping({"signals": builtin_signals(file),
                                        "results": file.get("results", {}),
                                        "tools": file.get("tools", {})})


def builtin_signals(file: Mapping[str, Any]) -> Mapping[str, Any]:
    """A config file's ``[signals]`` without its ``custom`` entry (the custom signals' entry
    points, ``signals.custom.factories_from_config``): the built-in signals' knobs."""
    section = file.get("signals", {})
    if isinstance(section, Mapping) and "custom" in section:
        section = {k: v for k, v in section.items() if k != "custom"}
    _no_negative_counts(section)
    return section  # type: ignore[no-any-return]


def _no_negative_counts(section: Any) -> None:
    """A negative count in a config file is a mistake, refused as a value above the knob's
    range is (each knob's range is its own: ``Knob.range_text``). The engines' API keeps SPEC
    §1's clamp ("counts below 2 become 2", pinned for -3 by the conformance data); a file a
    person wrote says what it means: 0 and 1 still count as 2, as documented, -3 is refused."""
    from ..signals import SIGNALS

    if not isinstance(section, Mapping):
        return
    for spec in SIGNALS:
        knobs = section.get(spec.id)
        if not isinstance(knobs, Mapping):
            continue
        for knob in spec.knobs:
            value = knobs.get(knob.name)
            if knob.kind is int and isinstance(value, (int, float)) and \
                    not isinstance(value, bool) and value < 0:
                raise ConfigError(f"{spec.id}.{knob.name} must not be negative: it must be "
                                  f"{knob.range_text()}, not {value!r}")


_ANNOUNCED: set[str] = set()  # startup lines logged already, once per process
_ANNOUNCED_LOCK = threading.Lock()


def _text(value: Any, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, not {value!r}")
    return value


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, not {value!r}")
    return value


def _first(*values: Any) -> Any:
    for v in values:
        if v is not None:
            return v
    return None


def _section(f: Mapping[str, Any], name: str, keys: set[str]) -> Mapping[str, Any]:
    section = f.get(name, {})
    if not isinstance(section, Mapping):
        raise ConfigError(f"config section [{name}] must be a table")
    unknown = sorted(set(section) - keys)
    if unknown:
        raise ConfigError(f"unknown setting(s) in [{name}]: {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(keys))})")
    return section


def _dollars(value: Any, name: str) -> float:
    return parse_dollars(value, name)  # 0 disables the bound; negative is an error


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, not {value!r}")
    return value
