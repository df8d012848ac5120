"""A harness's hook settings file, as ``tripwire hook --install``/``--uninstall`` edit it.

tripwire's entries are the handlers whose command runs ``tripwire hook <harness>`` (the
executable's base name ``tripwire``, or ``python -m tripwire``) or the native client,
``tripwire-hook <harness>``. Installing replaces them where
they were (one entry per harness and event, never a second one beside an earlier install);
uninstalling removes them; everything else in the file is kept as it was.

Two shapes: Claude Code, Codex and Gemini CLI group handlers (``hooks.<Event>[] = {matcher?,
hooks: [handler]}``); Cursor, GitHub Copilot CLI and Kiro list handlers directly
(``hooks.<event>[] = handler``), ``flat``. A handler's command is its ``command`` (Copilot's:
``bash``, ``command_of``).
"""

from __future__ import annotations

import json
import os
import shlex
from typing import Any

__all__ = ["is_tripwire", "hook_harness", "read_settings", "remove", "merge", "write_json",
           "tripwire_handlers", "command_of"]


def command_of(handler: dict[str, Any]) -> Any:
    """A handler's command: ``command``, or GitHub Copilot CLI's ``bash``."""
    command = handler.get("command")
    return command if command is not None else handler.get("bash")


def is_tripwire(command: Any, harness: str | None = None) -> bool:
    """Whether a handler's command runs tripwire's hook for ``harness`` (any harness: None)."""
    found = hook_harness(command)
    return found is not None and (harness is None or found == harness)


def hook_harness(command: Any) -> str | None:
    """The harness of a ``tripwire hook <harness>`` or ``tripwire-hook <harness>`` (the native
    client's) command (None: not tripwire's hook)."""
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for i in range(1, len(words)):
        program = os.path.basename(words[i - 1])
        if program in ("tripwire-hook", "tripwire-hook.exe") and words[i] != "hook":
            return words[i]
        if words[i] == "hook" and program in ("tripwire", "tripwire.exe") and i + 1 < len(words):
            return words[i + 1]
    return None


#: Bytes a harness's settings file may hold (far more than any settings file).
MAX_SETTINGS = 4 << 20


def read_settings(path: str) -> dict[str, Any]:
    """A settings file's object ({} for a missing or empty file); ValueError when it is not
    a JSON object whose ``hooks`` is an object of lists."""
    from ...base.files import NotRead, read_whole

    if not os.path.exists(path):
        return {}
    try:  # bounded: a project's settings file is the agent's to write
        text = read_whole(path, MAX_SETTINGS).decode("utf-8")
    except (NotRead, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot be read as a settings file ({getattr(exc, 'reason', exc)})"
                         ) from None
    try:
        settings = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(settings, dict) or not isinstance(settings.get("hooks", {}), dict):
        raise ValueError("not a settings object with a hooks table")
    for event, entries in settings.get("hooks", {}).items():
        if not isinstance(entries, list):
            raise ValueError(f"hooks.{event} is not a list")
    return settings


def tripwire_handlers(settings: dict[str, Any], harness: str | None, flat: bool
                      ) -> list[tuple[str, int, int, dict[str, Any], dict[str, Any]]]:
    """``(event, group index, handler index, group, handler)`` of each tripwire handler
    (``flat``: the handler is its own group, handler index 0)."""
    found = []
    for event, entries in settings.get("hooks", {}).items():
        if not isinstance(entries, list):
            continue
        for g, entry in enumerate(entries):
            if not isinstance(entry, dict):
                continue
            handlers = [entry] if flat else entry.get("hooks")
            if not isinstance(handlers, list):
                continue
            for h, handler in enumerate(handlers):
                if isinstance(handler, dict) and is_tripwire(command_of(handler), harness):
                    found.append((event, g, h, entry, handler))
    return found


def remove(settings: dict[str, Any], harness: str, flat: bool) -> dict[str, int]:
    """Remove tripwire's handlers for ``harness``; ``{event: index}`` of where each event's
    first one was (a group left with no handler goes; an event left with none too)."""
    hooks = settings.get("hooks", {})
    places: dict[str, int] = {}
    for event in list(hooks):
        entries = hooks[event]
        if not isinstance(entries, list):
            continue
        kept: list[Any] = []
        for entry in entries:
            if not isinstance(entry, dict):
                kept.append(entry)
                continue
            if flat:
                if is_tripwire(command_of(entry), harness):
                    places.setdefault(event, len(kept))
                    continue
            else:
                handlers = entry.get("hooks")
                if isinstance(handlers, list):
                    rest = [h for h in handlers if not (
                        isinstance(h, dict) and is_tripwire(command_of(h), harness))]
                    if len(rest) != len(handlers):
                        places.setdefault(event, len(kept))
                        if not rest:
                            continue
                        entry = {**entry, "hooks": rest}
            kept.append(entry)
        if kept or event not in places:
            hooks[event] = kept
        else:
            del hooks[event]
    return places


def merge(settings: dict[str, Any], block: dict[str, Any], harness: str, flat: bool
          ) -> dict[str, int]:
    """Put the block's entries in the settings in place of tripwire's earlier ones (where
    they were, else last); ``{event: index of the block's first entry}``."""
    places = remove(settings, harness, flat)
    hooks = settings.setdefault("hooks", {})
    at: dict[str, int] = {}
    for event, entries in block["hooks"].items():
        present = hooks.setdefault(event, [])
        index = min(places.get(event, len(present)), len(present))
        present[index:index] = entries
        at[event] = index
    for key, value in block.items():  # Cursor's and Copilot's "version"
        if key != "hooks":
            settings.setdefault(key, value)
    return at


def write_json(path: str, settings: dict[str, Any]) -> None:
    """Write a settings file whole (a temporary file renamed over it: never half written)."""
    tmp = path + ".tripwire-tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(settings, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)
