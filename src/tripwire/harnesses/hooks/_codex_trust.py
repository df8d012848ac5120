"""Codex's hook trust: a hook that is not trusted is skipped in silence (codex-cli 0.147.0).

Codex runs a user or project hook only when ``[hooks.state."<key>"] trusted_hash`` in the
user's ``$CODEX_HOME/config.toml`` (``~/.codex/config.toml``) equals the hook's current hash.
Codex reads a user's ``hooks.json`` only from its home, so the home of a hooks file is its own
folder (``home_of``) unless that is a project's ``.codex`` (then ``$CODEX_HOME``): installing
into ``DIR/hooks.json`` trusts it in ``DIR/config.toml``, for ``CODEX_HOME=DIR``.

- the key is ``<hooks file path>:<event label>:<group index>:<handler index>``, the path as
  Codex resolves it (``$CODEX_HOME`` canonical; a project's path as the cwd names it);
- the hash is ``sha256:`` and the hex SHA-256 of the compact JSON, keys sorted at every level,
  of ``{"event_name": label, "matcher": m (tool events only), "hooks": [handler]}``, the
  handler normalized: ``type``, ``command``, ``timeout`` (600 when absent, at least 1),
  ``async`` (false when absent) and ``statusMessage`` when set.

Changing the command, the timeout or the matcher changes the hash (Codex then says
``modified`` and skips the hook again); so does a group inserted before tripwire's (the key's
index shifts). ``tripwire hook codex --install --write`` writes the entries; ``tripwire doctor``
checks them.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any

__all__ = ["LABELS", "codex_home", "home_of", "config_path", "key_path", "trust_key",
           "trust_hash", "read_trust", "write_trust"]

LABELS = {"PreToolUse": "pre_tool_use", "PermissionRequest": "permission_request",
          "PostToolUse": "post_tool_use", "PreCompact": "pre_compact",
          "PostCompact": "post_compact", "SessionStart": "session_start",
          "UserPromptSubmit": "user_prompt_submit", "SubagentStart": "subagent_start",
          "SubagentStop": "subagent_stop", "Stop": "stop"}
#: the events whose matcher Codex keeps (for the others it is dropped from the hash)
_MATCHED = {"pre_tool_use", "permission_request", "post_tool_use", "pre_compact",
            "post_compact", "session_start", "subagent_start", "subagent_stop"}


def codex_home() -> str:
    """``$CODEX_HOME``, else ``~/.codex``, canonical (as Codex resolves it)."""
    home = os.environ.get("CODEX_HOME", "").strip() or os.path.join(
        os.path.expanduser("~"), ".codex")
    return os.path.realpath(home)


def home_of(hooks_file: str) -> str:
    """The Codex home that runs ``hooks_file`` (canonical): its own folder when that is a home
    (``$CODEX_HOME``, ``~/.codex``, or any folder not named ``.codex``: Codex reads a user's
    ``hooks.json`` from its home alone), else (a project's ``.codex/hooks.json``)
    ``$CODEX_HOME``, whose config trusts a project's hooks too."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(hooks_file)))
    default = os.path.realpath(os.path.join(os.path.expanduser("~"), ".codex"))
    if folder in (codex_home(), default) or os.path.basename(folder) != ".codex":
        return folder
    return codex_home()


def config_path(hooks_file: str | None = None) -> str:
    """The config file Codex reads the trust of ``hooks_file``'s hooks from: its home's
    (``home_of``; without a file, ``$CODEX_HOME``'s)."""
    return os.path.join(home_of(hooks_file) if hooks_file else codex_home(), "config.toml")


def key_path(hooks_file: str) -> str:
    """The hooks file's path as Codex names it in keys: canonical in its Codex home, else
    absolute as given (a project's hooks are keyed by the cwd Codex was started in)."""
    real = os.path.realpath(hooks_file)
    if os.path.dirname(real) == home_of(hooks_file):
        return real
    return os.path.abspath(hooks_file)


def trust_key(hooks_file: str, event: str, group: int, handler: int) -> str:
    return f"{key_path(hooks_file)}:{LABELS[event]}:{group}:{handler}"


def trust_hash(event: str, group: dict[str, Any], handler: dict[str, Any]) -> str:
    """The hash Codex 0.147.0 computes for one handler of one group."""
    label = LABELS[event]
    timeout = handler.get("timeout")
    normal: dict[str, Any] = {
        "type": handler.get("type", "command"), "command": handler.get("command"),
        "timeout": 600 if not isinstance(timeout, int) else max(1, timeout),
        "async": bool(handler.get("async", False))}
    if isinstance(handler.get("statusMessage"), str):
        normal["statusMessage"] = handler["statusMessage"]
    ident: dict[str, Any] = {"event_name": label, "hooks": [normal]}
    if label in _MATCHED and isinstance(group.get("matcher"), str):
        ident["matcher"] = group["matcher"]
    text = json.dumps(ident, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_trust(path: str | None = None) -> dict[str, str]:
    """``{key: trusted_hash}`` of the user's config file ({} when it has none)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    from ...base.files import read_whole

    path = path or config_path()
    if not os.path.exists(path):
        return {}
    data = tomllib.loads(read_whole(path, 4 << 20).decode("utf-8"))  # bounded: a FIFO, a device
    state = data.get("hooks", {}).get("state", {}) if isinstance(data.get("hooks"), dict) \
        else {}
    if not isinstance(state, dict):
        return {}
    return {k: v["trusted_hash"] for k, v in state.items()
            if isinstance(v, dict) and isinstance(v.get("trusted_hash"), str)}


def write_trust(trusted: dict[str, str], forget: set[str], path: str | None = None) -> str:
    """Trust each ``{key: hash}`` and forget the ``forget`` keys in the user's config file,
    keeping everything else in it as written (comments, order, formatting); its path."""
    import tomlkit

    path = path or config_path()
    text = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
    doc = tomlkit.parse(text)
    hooks = doc.get("hooks")
    if hooks is None:
        if not trusted:
            return path
        hooks = tomlkit.table(is_super_table=True)
        doc["hooks"] = hooks
    if not isinstance(hooks, dict):
        raise ValueError(f"{path}: hooks is not a table")
    state = hooks.get("state")
    if state is None:
        state = tomlkit.table(is_super_table=True)
        hooks["state"] = state
    if not isinstance(state, dict):
        raise ValueError(f"{path}: hooks.state is not a table")
    for key in forget - set(trusted):
        if key in state:
            del state[key]
    for key, value in trusted.items():
        entry = state.get(key)
        if isinstance(entry, dict):
            entry["trusted_hash"] = value
        else:
            table = tomlkit.table()
            table["trusted_hash"] = value
            state[key] = table
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tripwire-tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(tomlkit.dumps(doc))
    os.replace(tmp, path)
    return path
