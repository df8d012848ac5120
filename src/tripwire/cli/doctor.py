"""``tripwire doctor [SETTINGS ...]``: are the installed hooks ones that decide?

An installed hook is checked, not trusted (SPEC §11.5). For every settings file given (or, with
none, every one the harnesses read that exists: the user's and the current directory's), each
tripwire hook command found in it is run as its harness runs it: through the shell, from
another directory, with identical synthetic tool calls of a new session (``tripwire-doctor-…``) on
stdin, until it denies one (``denies_call``: the 5th with the
default thresholds under enforce; none in 12 is a note, not a problem: a mode below enforce
lets loops run by choice). The probe's session is kept in a scratch store of its own
(``$TRIPWIRE_DOCTOR``, which the hook reads: ``cli.hook.probe_store``), after the hook checked
that its real store would take the event, so the real store is left as it was found. It
decides when it exits 0 with the output its harness reads and no fail-open line; anything else
is a problem (a command not on the PATH, a config file that does not load, a store it cannot
open or record in, no answer within the harness's timeout). Codex
hooks are also checked for trust: Codex skips a hook whose ``trusted_hash`` in
``$CODEX_HOME/config.toml`` is missing or stale, in silence.

Each hook's line says its ``setup`` (issue 36): ``separated`` when it is the thin client of an
authority (``--authority SOCKET`` or ``$TRIPWIRE_AUTHORITY``) whose socket another user owns and
that answers; ``same-user`` otherwise, which protects against mistakes (a loop, an overspend),
not against an agent that looks for a way around its halt (docs/security.md).

One JSON line per hook command and per Codex handler; exit 0 when every hook decides and is
trusted, 1 on a problem (or when no tripwire hook is installed), 2 when a named file is
missing or unreadable.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
import uuid
from typing import Any, TextIO

__all__ = ["add_parser", "run", "default_files"]

EXIT_OK, EXIT_PROBLEM, EXIT_USAGE = 0, 1, 2


def add_parser(verbs: Any) -> None:
    doctor = verbs.add_parser(
        "doctor", help="run each installed tripwire hook on a synthetic event: does it decide?",
        description="Run each tripwire hook command installed in the harnesses' settings "
                    "files (the ones given, else the user's and this directory's) on a "
                    "synthetic tool call, as the harness would, and say whether it decides; "
                    "check that Codex trusts its tripwire hooks. Exit 1 on a problem.")
    doctor.add_argument("files", nargs="*", metavar="SETTINGS",
                        help="settings files to check (default: every harness settings file "
                             "that exists in ~ and in this directory)")


def default_files(cwd: str | None = None) -> list[str]:
    """The settings files the harnesses read, user and project, that exist."""
    from ..harnesses.hooks._codex_trust import codex_home

    home, cwd = os.path.expanduser("~"), cwd or os.getcwd()
    candidates = [os.path.join(home, ".claude", "settings.json"),
                  os.path.join(codex_home(), "hooks.json"),
                  os.path.join(home, ".gemini", "settings.json"),
                  os.path.join(home, ".cursor", "hooks.json")]
    for name in (".claude/settings.json", ".claude/settings.local.json", ".codex/hooks.json",
                 ".gemini/settings.json", ".cursor/hooks.json"):
        candidates.append(os.path.join(cwd, name))
    import glob  # GitHub Copilot CLI's hooks files, Kiro's agent configurations

    for pattern in (os.path.join(cwd, ".github", "hooks", "*.json"),
                    os.path.join(home, ".kiro", "agents", "*.json"),
                    os.path.join(cwd, ".kiro", "agents", "*.json")):
        candidates.extend(sorted(glob.glob(pattern)))
    seen, found = set(), []
    for path in candidates:
        real = os.path.realpath(path)
        if real not in seen and os.path.isfile(path):
            seen.add(real)
            found.append(path)
    return found


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..harnesses.hooks import _settings

    files = args.files or default_files()
    problems = hooks = 0
    for path in files:
        try:
            settings = _settings.read_settings(path) if os.path.isfile(path) else None
        except (OSError, ValueError) as exc:
            err.write(f"tripwire doctor: {path}: {' '.join(str(exc).split())}\n")
            return EXIT_USAGE
        if settings is None:
            err.write(f"tripwire doctor: {path}: no such settings file\n")
            return EXIT_USAGE
        handlers = [*_settings.tripwire_handlers(settings, None, False),
                    *_settings.tripwire_handlers(settings, None, True)]
        commands: dict[str, list[Any]] = {}
        for entry in handlers:
            commands.setdefault(_settings.command_of(entry[4]), []).append(entry)
        for command, entries in commands.items():
            hooks += 1
            line = _check(path, command, entries)
            problems += line["problem"] is not None
            _print(line, out)
        codex = [e for e in handlers
                 if _settings.hook_harness(_settings.command_of(e[4])) == "codex"]
        for line in _codex_trust(path, codex):
            problems += line["problem"] is not None
            _print(line, out)
    if not hooks:
        where = ", ".join(files) if files else "the harnesses' settings files (none exists)"
        _print({"kind": "doctor", "hooks": 0,
                "problem": f"no tripwire hook is installed in {where}"}, out)
        return EXIT_PROBLEM
    _print({"kind": "doctor", "hooks": hooks, "problems": problems}, out)
    return EXIT_PROBLEM if problems else EXIT_OK


def _print(record: dict[str, Any], out: TextIO) -> None:
    out.write(json.dumps(record, ensure_ascii=False) + "\n")


#: the hook's environment (``TRIPWIRE_DOCTOR``, the probe's scratch directory, is added per
#: hook): a doctor run inside ``codex exec`` must not interrupt it, and its probe leaves no
#: resident server behind and hands no event to one of the user's (the native client decides
#: the same without one)
_ENV = {**{k: v for k, v in os.environ.items() if k != "TRIPWIRE_HOOK_SOCKET"},
        "TRIPWIRE_HOOK_SERVER": "off"}
#: identical calls the doctor makes at most to see a hook deny a loop (the default threshold of
#: repeated-tool-call is 5)
PROBE = 12


def _adapter(harness: str) -> Any:
    """The harness's adapter (``harnesses/hooks/``): its probe payload (``probe``), what a
    denial of it looks like (``denied``), its handler's timeout (``timeout_seconds``)."""
    from .hook import _harness

    return _harness(harness)


def _check(path: str, command: str, entries: list[Any]) -> dict[str, Any]:
    """Run one hook command on identical tool calls of a new session, from another directory,
    through the shell (as the harnesses run hooks), until it denies one (or ``PROBE``)."""
    from ..harnesses.hooks._settings import hook_harness

    harness = hook_harness(command) or "?"
    line: dict[str, Any] = {"kind": "hook", "file": path, "harness": harness,
                            "events": sorted({e[0] for e in entries}), "command": command,
                            "decides": False, "problem": None}
    from .hook import HARNESSES

    if harness not in HARNESSES:
        line["problem"] = (f"tripwire hook has no harness {harness!r} (known: "
                           f"{', '.join(HARNESSES)})")
        return line
    adapter = _adapter(harness)
    timeout = min(adapter.timeout_seconds(entries[0][4]), 60.0)
    session = f"tripwire-doctor-{uuid.uuid4().hex[:12]}"
    line["session"] = session
    # Codex runs hooks through a login shell ($SHELL -lc), the others through a shell
    shell = [os.environ.get("SHELL") or "/bin/sh", "-lc"] \
        if getattr(adapter, "LOGIN_SHELL", False) else ["/bin/sh", "-c"]
    slowest = 0.0
    with tempfile.TemporaryDirectory(prefix="tripwire-doctor-") as cwd:
        scratch = os.path.join(cwd, ".probe")  # the probe's store (``cli.hook.probe_store``)
        os.mkdir(scratch)
        env = {**_ENV, "TRIPWIRE_DOCTOR": scratch}
        for n in range(1, PROBE + 1):
            payload = json.dumps(adapter.probe(session, cwd, n))
            started = time.monotonic()
            try:
                done = subprocess.run([*shell, command], input=payload, capture_output=True,
                                      text=True, cwd=cwd, timeout=timeout, env=env)
            except subprocess.TimeoutExpired:
                line["problem"] = (f"no answer within the hook's timeout ({timeout:g} s): the "
                                   "harness would go on without it")
                return line
            slowest = max(slowest, time.monotonic() - started)
            answer, line["problem"] = _answer(harness, adapter, done)
            if line["problem"] is not None:
                return line
            if adapter.denied(answer, done.returncode):
                line["denies_call"] = n
                break
    line["decides"] = True
    line["slowest_seconds"] = round(slowest, 3)
    line.update(setup(command))
    if "denies_call" not in line:
        line["denies_call"] = None
        line["note"] = (f"it let {PROBE} identical calls run: its mode or thresholds do not "
                        "stop a loop")
    return line


#: What each setup protects against, for the doctor's line.
PROTECTS = {
    "separated": "an adversarial agent: the store, its key and anchor belong to another user, "
                 "whom the agent's user cannot read or signal",
    "same-user": "mistakes (a loop, an overspend), not an adversary: the agent's user can read "
                 "the hook's key, store and anchor (docs/security.md: the separated setup)",
}


def setup(command: str) -> dict[str, Any]:
    """Which setup a hook command is: ``separated`` (the thin client of a reachable authority
    another user owns) or ``same-user``, with the authority's socket and owner when there is
    one."""
    import shlex
    import socket

    try:
        words = shlex.split(command)
    except ValueError:
        words = []
    authority = next((words[i + 1] for i, w in enumerate(words[:-1]) if w == "--authority"),
                     os.environ.get("TRIPWIRE_AUTHORITY", "").strip())
    found: dict[str, Any] = {"setup": "same-user"}
    if authority:
        found["authority"] = authority
        try:
            owner = os.stat(authority).st_uid
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(2.0)
                s.connect(authority)
        except OSError as exc:
            found["authority_problem"] = " ".join(str(exc).split())
        else:
            found["authority_uid"] = owner
            if owner != os.getuid():
                found["setup"] = "separated"
    found["protects_against"] = PROTECTS[found["setup"]]
    return found


def _answer(harness: str, adapter: Any, done: subprocess.CompletedProcess[str]
            ) -> tuple[Any, str | None]:
    """The hook's answer, or what is wrong with it (a harness that reads a denial as an exit
    status, ``DENY_EXIT``: that status with its reason on stderr is an answer)."""
    failed = [x for x in done.stderr.splitlines() if x.startswith(f"tripwire hook {harness}")
              or x.startswith("tripwire hook:")]
    if done.returncode == 127:
        return None, ("the command is not found from the harness's shell: put tripwire on "
                      "that PATH, or install with its absolute path")
    deny_exit = getattr(adapter, "DENY_EXIT", None)
    if done.returncode != 0 and done.returncode != deny_exit:
        return None, (f"exit status {done.returncode} (the harness reads 2 as a denial): "
                      f"{_tail(done.stderr)}")
    # a new session's call denied for the store (it cannot record it, or its halt is the
    # store's: a key that is not the store's makes every session read as tampered)
    from .hook_closed import DENIED

    undecided = [x for x in failed if x.endswith(DENIED)]
    if undecided:  # fail closed under enforce (issue 36): the hook itself is broken
        return None, f"it cannot decide, so under enforce it denies every call: {undecided[0]}"
    unrecorded = [x for x in failed if "the call is denied" in x]
    if unrecorded:
        return None, f"its store cannot record the calls: {unrecorded[0]}"
    if failed and not any("interrupted" in x for x in failed):
        return None, f"it fails open, deciding nothing: {failed[0]}"
    text = done.stdout.strip()
    try:
        answer = json.loads(text) if text else None
    except ValueError:
        return None, f"its output is not what {harness} reads: {text[:200]!r}"
    always_an_object = bool(getattr(adapter, "EMPTY", ""))  # Gemini CLI, Cursor: {} at least
    if (answer is not None and not isinstance(answer, dict)) or (
            always_an_object and answer is None):
        return None, f"its output is not what {harness} reads: {text[:200]!r}"
    return answer, None


def _tail(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1][:300] if lines else "(no message)"


def _codex_trust(path: str, handlers: list[Any]) -> list[dict[str, Any]]:
    """Each Codex handler's trust: Codex runs it only when the user's config trusts its
    current hash. Asked of Codex itself (``codex app-server``'s ``hooks/list``) when a
    ``codex`` is on the PATH, else computed as codex-cli 0.147.0 computes it."""
    from ..harnesses.hooks._codex_trust import (
        LABELS,
        config_path,
        read_trust,
        trust_hash,
        trust_key,
    )

    if not handlers:
        return []
    try:
        trusted = read_trust(config_path(path))
    except (OSError, ValueError) as exc:
        return [{"kind": "codex_trust", "file": path, "problem": f"{config_path(path)}: "
                 f"{' '.join(str(exc).split())}"}]
    listed = _codex_hooks_list()
    lines = []
    for event, g, h, group, handler in handlers:
        if event not in LABELS:
            continue
        key = trust_key(path, event, g, h)
        current = trust_hash(event, group, handler)
        stored = trusted.get(key)
        status = "trusted" if stored == current else "modified" if stored else "untrusted"
        checked = "tripwire (codex-cli 0.147.0's hash)"
        if listed is not None:
            checked = "codex hooks/list"
            entry = listed.get(key)
            if entry is None:
                status = "not listed by codex"
            else:
                status = str(entry.get("trustStatus"))
                if entry.get("enabled") is False:
                    status = "disabled"
        problem = None
        if status not in ("trusted", "managed"):
            problem = (f"Codex skips this hook in silence ({status}): run `tripwire hook codex "
                       f"--install --write {path}` with the options it has, or trust it in "
                       "Codex's /hooks")
        lines.append({"kind": "codex_trust", "file": path, "key": key, "status": status,
                      "checked_by": checked, "problem": problem})
    return lines


def _codex_hooks_list(timeout: float = 20.0) -> dict[str, dict[str, Any]] | None:
    """``{key: hook}`` as ``codex app-server`` lists them for this directory (None: no
    ``codex`` on the PATH, or it did not answer)."""
    import select
    import shutil

    codex = shutil.which("codex")
    if codex is None:
        return None
    requests = [{"id": 1, "method": "initialize", "params": {
                    "clientInfo": {"name": "tripwire-doctor", "version": "1"},
                    "capabilities": {"experimentalApi": True}}},
                {"method": "initialized"},
                {"id": 2, "method": "hooks/list", "params": {"cwds": [os.getcwd()]}}]
    try:
        server = subprocess.Popen([codex, "app-server"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return None
    try:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
        server.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([server.stdout], [], [], 0.5)
            if not ready:
                continue
            line = server.stdout.readline()
            if not line:
                return None
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("id") == 2:
                data = (message.get("result") or {}).get("data") or []
                hooks = data[0].get("hooks", []) if data and isinstance(data[0], dict) else []
                return {h["key"]: h for h in hooks if isinstance(h, dict) and "key" in h}
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    finally:
        server.kill()
        server.wait()
