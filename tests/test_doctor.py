"""``tripwire doctor``: each installed hook command is run on a synthetic event, as its harness
runs it (through the shell, from another directory), and reported as deciding or not; Codex
hooks that Codex would skip (untrusted, or trusted under another hash) are problems."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FILES = {"claude-code": ".claude/settings.json", "codex": ".codex/hooks.json",
         "gemini-cli": ".gemini/settings.json", "cursor": ".cursor/hooks.json"}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    for name in FILES.values():
        (tmp_path / "home" / name).parent.mkdir(parents=True)
    return tmp_path / "home"


def env(home: Path) -> dict:
    bin_dir = os.path.dirname(sys.executable)  # where the `tripwire` script is installed
    return {**os.environ, "HOME": str(home), "CODEX_HOME": str(home / ".codex"),
            "TRIPWIRE_STORE_KEY": "k", "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def tripwire(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tripwire", *args], capture_output=True,
                          text=True, cwd=home, env=env(home), timeout=300)


def install_all(home: Path, *options: str) -> None:
    for harness, name in FILES.items():
        done = tripwire(home, "hook", harness, "--install", "--store", "state/s.db", *options,
                        "--write", str(home / name))
        assert done.returncode == 0, done.stderr


def lines(done: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(x) for x in done.stdout.splitlines()]


def test_every_installed_hook_decides(home: Path) -> None:
    install_all(home)
    done = tripwire(home, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    records = lines(done)
    hooks = [r for r in records if r["kind"] == "hook"]
    assert sorted(r["harness"] for r in hooks) == sorted(FILES)
    assert all(r["decides"] and r["problem"] is None for r in hooks)
    assert [r["denies_call"] for r in hooks] == [5] * 4  # the 5th identical call
    # hooks that open their store themselves: the setup that protects against mistakes
    assert {r["setup"] for r in hooks} == {"same-user"}
    assert all("authority" not in r for r in hooks)
    trust = [r for r in records if r["kind"] == "codex_trust"]
    assert len(trust) == 7 and {r["status"] for r in trust} == {"trusted"}
    assert records[-1] == {"kind": "doctor", "hooks": 4, "problems": 0}


def test_a_hook_that_cannot_decide_is_a_problem(home: Path) -> None:
    """Under enforce a hook that cannot decide denies every call (issue 36: it fails
    closed); below enforce it fails open: doctor says which, both as problems."""
    install_all(home)
    settings = home / FILES["claude-code"]
    text = settings.read_text()
    settings.write_text(text.replace("--store", "--config nowhere.toml --store"))
    done = tripwire(home, "doctor", str(settings))
    assert done.returncode == 1
    (hook,) = [r for r in lines(done) if r["kind"] == "hook"]
    assert hook["decides"] is False
    assert hook["problem"].startswith("it cannot decide, so under enforce it denies every "
                                      "call: tripwire hook claude-code: nowhere.toml: config "
                                      "file not found")
    settings.write_text(text.replace("--store", "--mode warn --config nowhere.toml --store"))
    (hook,) = [r for r in lines(tripwire(home, "doctor", str(settings))) if r["kind"] == "hook"]
    assert hook["problem"].startswith("it fails open, deciding nothing: tripwire hook "
                                      "claude-code: nowhere.toml: config file not found")


def test_codex_hooks_codex_would_skip_are_problems(home: Path) -> None:
    install_all(home)
    (home / ".codex" / "config.toml").unlink()
    done = tripwire(home, "doctor", str(home / FILES["codex"]))
    assert done.returncode == 1
    trust = [r for r in lines(done) if r["kind"] == "codex_trust"]
    assert {r["status"] for r in trust} == {"untrusted"}
    assert all("Codex skips this hook in silence" in r["problem"] for r in trust)
    install_all(home)  # installing again trusts them again
    hooks = home / FILES["codex"]
    hooks.write_text(hooks.read_text().replace('"timeout": 10', '"timeout": 20'))
    trust = [r for r in lines(tripwire(home, "doctor", str(hooks)))
             if r["kind"] == "codex_trust"]
    assert {r["status"] for r in trust} == {"modified"}


def test_a_command_the_shell_cannot_find_is_a_problem(home: Path) -> None:
    install_all(home)
    settings = home / FILES["cursor"]
    data = json.loads(settings.read_text())
    for entries in data["hooks"].values():
        for handler in entries:
            program, rest = handler["command"].split(" ", 1)  # tripwire or tripwire-hook
            handler["command"] = f"/nonexistent/{os.path.basename(program)} {rest}"
    settings.write_text(json.dumps(data))
    done = tripwire(home, "doctor", str(settings))
    assert done.returncode == 1
    (hook,) = [r for r in lines(done) if r["kind"] == "hook"]
    assert "not found" in hook["problem"]


def test_no_hook_installed_is_a_problem_and_a_missing_file_is_usage(home: Path) -> None:
    done = tripwire(home, "doctor")
    assert done.returncode == 1
    assert lines(done)[-1]["problem"].startswith("no tripwire hook is installed")
    done = tripwire(home, "doctor", str(home / "nope.json"))
    assert done.returncode == 2 and "no such settings file" in done.stderr


def test_a_hook_that_lets_loops_run_is_noted_not_a_problem(home: Path) -> None:
    install_all(home, "--mode", "warn")
    done = tripwire(home, "doctor", str(home / FILES["gemini-cli"]))
    assert done.returncode == 0, done.stdout
    (hook,) = [r for r in lines(done) if r["kind"] == "hook"]
    assert hook["decides"] is True and hook["denies_call"] is None
    assert "do not stop a loop" in hook["note"]


def test_the_probes_leave_the_store_as_they_found_it(home: Path) -> None:
    """Doctor's synthetic sessions go to a scratch store of their own, not the hook's: a store
    that did not exist still does not, and one that did holds exactly its rows after (issue 36:
    four halted ``tripwire-doctor-*`` sessions were left in the user's store, listed by status
    forever)."""
    install_all(home)
    store = home / "state" / "s.db"
    done = tripwire(home, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["denies_call"] for r in lines(done) if r["kind"] == "hook"] == [5] * 4
    assert not store.exists() and not (home / "state").exists()
    # a real session in the store, then the doctor again: the same rows, no probe among them
    payload = {"session_id": "real-1", "transcript_path": None, "cwd": str(home),
               "hook_event_name": "UserPromptSubmit", "prompt": "go"}
    for n in range(5):
        call = {**payload, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                "tool_input": {"command": "make"}, "tool_use_id": f"t{n}"}
        subprocess.run([sys.executable, "-m", "tripwire", "hook", "claude-code", "--store",
                        str(store)], input=json.dumps(call), capture_output=True, text=True,
                       env=env(home), check=True)
    before = tripwire(home, "status", str(store)).stdout
    assert '"session": "real-1", "halted": true' in before
    done = tripwire(home, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert tripwire(home, "status", str(store)).stdout == before
    assert "tripwire-doctor" not in before


def test_a_store_the_hook_cannot_record_in_is_a_problem(home: Path) -> None:
    """The probe checks the real store as the hook would use it: one sealed with another key
    (every call then denied for the store, not for a loop) is a problem, not "decides"."""
    install_all(home)
    store = home / "state" / "s.db"
    other = {**env(home), "TRIPWIRE_STORE_KEY": "another key"}
    subprocess.run([sys.executable, "-m", "tripwire", "hook", "claude-code", "--store",
                    str(store)], input=json.dumps({
                        "session_id": "real-1", "transcript_path": None, "cwd": str(home),
                        "hook_event_name": "PreToolUse", "tool_name": "Bash",
                        "tool_input": {"command": "make"}, "tool_use_id": "t0"}),
                   capture_output=True, text=True, env=other, check=True)
    done = tripwire(home, "doctor", str(home / FILES["claude-code"]))
    assert done.returncode == 1, done.stdout
    (hook,) = [r for r in lines(done) if r["kind"] == "hook"]
    assert hook["decides"] is False
    assert hook["problem"].startswith("its store cannot record the calls: tripwire hook "
                                      "claude-code: ")
    assert "this key is not the one the store was created with" in hook["problem"]
