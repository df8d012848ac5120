"""``tripwire hook HARNESS --install [--write SETTINGS]`` and ``--uninstall SETTINGS``.

An installed hook is checked, not trusted: every option is validated before anything is
written (a bad one is one line on stderr and exit 2: never a hook that fails open forever);
``--store`` and ``--config`` are written as absolute paths (the harness runs the hook from
another directory); ``--write`` replaces tripwire's earlier entry for the harness, where it
was, instead of adding a second (each event would be observed twice); a settings file whose
directory does not exist is refused (a typo'd path is not a new configuration). For Codex,
``--write`` also trusts the handlers it wrote (``harnesses/hooks/_codex_trust.py``): Codex
skips an untrusted hook in silence.

``--authority SOCKET`` writes thin clients of an authority (``tripwire hook serve --allow-user``
run as another user, issue 36): the store, config and wait are the authority's, so the client
takes none of them (``--mode`` stays: what the client does when the authority cannot answer).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from typing import Any, TextIO

from .usage import EXIT_USAGE

__all__ = ["install", "uninstall", "hook_command", "executable", "native_client",
           "authority_problem"]


def _fail(args: argparse.Namespace, message: str, stderr: TextIO) -> int:
    stderr.write(f"tripwire hook {args.harness}: {message}\n")
    return EXIT_USAGE


def _problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the options (None: they make a hook that decides)."""
    from ..errors import ConfigError
    from .hook_config import hook_config

    if getattr(args, "authority", None):
        given = [f"--{o}" for o in ("store", "config", "wait") if getattr(args, o) is not None]
        if given:
            return (f"{' and '.join(given)}: the authority's own (tripwire hook serve "
                    "--allow-user), not its thin client's")
    if args.store is not None and os.path.isdir(args.store):
        return f"--store {args.store}: is a directory, not a store file"
    if args.config is not None and not os.path.isfile(args.config):
        return f"--config {args.config}: no such config file"
    try:
        # the mode and the config file, as the hook will read them
        hook_config(args.mode, args.config).resolve()
    except (ConfigError, ValueError, OSError) as exc:
        return " ".join(str(exc).split())
    return None


def authority_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with an authority's own store, config and mode (None: nothing)."""
    return _problem(args)


def executable() -> str:
    """The ``tripwire`` the harness runs: its absolute path when it is on this PATH (a
    harness starts hooks with another PATH: Codex through a login shell, which on many
    systems sets PATH anew), else ``tripwire``."""
    import shutil

    found = shutil.which("tripwire")
    return os.path.abspath(found) if found else "tripwire"


def native_client(tripwire: str) -> str | None:
    """The native client installed beside ``tripwire`` (beside the file a link such as pipx's
    points to, too), or None: a build without a C++ compiler installs none."""
    if not os.path.isabs(tripwire):
        return None
    for directory in (os.path.dirname(tripwire), os.path.dirname(os.path.realpath(tripwire))):
        client = os.path.join(directory, "tripwire-hook")
        if os.access(client, os.X_OK) and not os.path.isdir(client):
            return client
    return None


def hook_command(args: argparse.Namespace) -> str:
    """The command the harness runs, the options given and paths made absolute: the native
    client (``tripwire-hook HARNESS``: no Python start per event, its resident server started
    on demand) where it is installed, else ``tripwire hook HARNESS``."""
    tripwire = executable()
    client = native_client(tripwire)
    words = [client, args.harness] if client else [tripwire, "hook", args.harness]
    if args.store:
        words += ["--store", os.path.abspath(args.store)]
    if args.mode:
        words += ["--mode", args.mode.strip().lower()]
    if args.config:
        words += ["--config", os.path.abspath(args.config)]
    if args.wait is not None:
        words += ["--wait", f"{args.wait:g}"]
    if getattr(args, "no_interrupt", False):
        words += ["--no-interrupt"]
    if getattr(args, "authority", None):
        words += ["--authority", os.path.abspath(args.authority)]
    return " ".join(shlex.quote(w) for w in words)


def _target(args: argparse.Namespace, path: str) -> str | None:
    """Why ``path`` cannot be written (None: it can)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return (f"{path}: its directory {directory} does not exist (create it first if this "
                "is the harness's settings file)")
    if os.path.isdir(path):
        return f"{path}: is a directory, not a settings file"
    return None


def install(harness: Any, args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    problem = _problem(args)
    if problem is None and args.write:
        problem = _target(args, args.write)
    must_exist = getattr(harness, "MUST_EXIST", None)  # Kiro: an agent's own file
    if problem is None and args.write and must_exist and not os.path.isfile(args.write):
        problem = f"{args.write}: no such file; --write takes {must_exist}"
    if problem is not None:
        return _fail(args, f"--install: {problem}; nothing written", stderr)
    block = harness.install_block(hook_command(args))
    from ..durability.chain import DEFAULT_KEY_NOTICE, KEY_ENV

    if getattr(args, "authority", None):
        import stat

        try:
            is_socket = stat.S_ISSOCK(os.stat(args.authority).st_mode)
        except OSError:
            is_socket = False
        if not is_socket:
            stderr.write(f"tripwire: no authority listens on {args.authority} yet: under "
                         "enforce every tool call is denied until one does\n")
        if os.environ.get(KEY_ENV, "").strip():
            stderr.write(f"tripwire: {KEY_ENV} is set here, and a thin client needs none: keep "
                         "it out of the harness's environment (the agent's user can read it "
                         "there), in the authority's alone\n")
    elif not os.environ.get(KEY_ENV, "").strip():
        stderr.write(f"tripwire: {DEFAULT_KEY_NOTICE} (in the harness's environment)\n")
    if not args.write:
        stdout.write(json.dumps(block, indent=2) + "\n")
        if args.harness == "codex":
            stderr.write("tripwire: Codex runs a hook only once it is trusted: install with "
                         "--write ~/.codex/hooks.json to have the trust entries written too\n")
        return 0
    from ..harnesses.hooks import _settings

    try:
        settings = _settings.read_settings(args.write)
        before = _settings.tripwire_handlers(settings, args.harness, harness.FLAT)
        at = _settings.merge(settings, block, args.harness, harness.FLAT)
        trust = _codex_trust(args.write, block, at, before) if args.harness == "codex" \
            else None
        _settings.write_json(args.write, settings)
        if trust is not None:
            path = _write_trust(args.write, *trust)
    except (OSError, ValueError) as exc:
        return _fail(args, f"--install: {args.write}: {_one_line(exc)}", stderr)
    replaced = " (replacing tripwire's earlier entries)" if before else ""
    stdout.write(f"tripwire: hooks for {args.harness} written to {args.write} "
                 f"({len(block['hooks'])} events){replaced}\n")
    if trust is not None:
        stdout.write(f"tripwire: {len(trust[0])} Codex hooks trusted in {path}\n")
        from ..harnesses.hooks._codex_trust import codex_home, home_of

        home = home_of(args.write)
        if os.path.dirname(os.path.realpath(args.write)) != home:
            stderr.write("tripwire: a project's .codex/hooks.json is read only for a trusted "
                         "project, and Codex keys its trust by the directory it starts in (as "
                         "typed): run codex from this directory, or install in "
                         "~/.codex/hooks.json\n")
        elif home != codex_home():
            stderr.write(f"tripwire: {home} is a Codex home of its own: Codex runs these "
                         f"hooks with CODEX_HOME={home}\n")
    return 0


def uninstall(harness: Any, args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    path = args.uninstall
    from ..harnesses.hooks import _settings

    if not os.path.isfile(path):
        return _fail(args, f"--uninstall: {path}: no such settings file", stderr)
    try:
        settings = _settings.read_settings(path)
        before = _settings.tripwire_handlers(settings, args.harness, harness.FLAT)
        _settings.remove(settings, args.harness, harness.FLAT)
        if before:
            _settings.write_json(path, settings)
        if args.harness == "codex" and before:
            _write_trust(path, {}, _keys(path, before))
    except (OSError, ValueError) as exc:
        return _fail(args, f"--uninstall: {path}: {_one_line(exc)}", stderr)
    stdout.write(f"tripwire: {len(before)} tripwire hook entries for {args.harness} removed "
                 f"from {path}\n")
    return 0


def _keys(path: str, handlers: list[Any]) -> set[str]:
    from ..harnesses.hooks._codex_trust import LABELS, trust_key

    return {trust_key(path, e, g, h) for e, g, h, _, _ in handlers if e in LABELS}


def _codex_trust(path: str, block: dict[str, Any], at: dict[str, int], before: list[Any]
                 ) -> tuple[dict[str, str], set[str]]:
    """The trust entries of the handlers written (``at``: each event's group index), and the
    keys of tripwire's earlier handlers to forget."""
    from ..harnesses.hooks._codex_trust import trust_hash, trust_key

    trusted = {}
    for event, groups in block["hooks"].items():
        group = groups[0]
        trusted[trust_key(path, event, at[event], 0)] = trust_hash(event, group,
                                                                   group["hooks"][0])
    return trusted, _keys(path, before)


def _write_trust(hooks_file: str, trusted: dict[str, str], forget: set[str]) -> str:
    """Trust (and forget) entries in the config of ``hooks_file``'s Codex home; its path."""
    from ..harnesses.hooks._codex_trust import config_path, write_trust

    return write_trust(trusted, forget, config_path(hooks_file))


def _one_line(exc: BaseException | str) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
