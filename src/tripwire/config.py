"""Config files (TOML or JSON): one table whose sections configure each part of tripwire.

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

Unknown sections, signals or knobs are errors that name the file: a typo that silently
changed nothing would leave an operator believing in a threshold that is not in force.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["read_config_file", "SECTIONS"]

#: Top-level sections a config file may hold.
SECTIONS = ("signals", "watchdog", "cost", "session", "context", "models", "store")


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Parse a config file: ``.toml`` as TOML, ``.json`` as JSON, anything else as whichever
    parses. Raises ConfigError naming the file on a missing file, bad syntax or unknown section."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror})") from None
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
