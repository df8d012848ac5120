"""Hooks that cannot be installed wrong (SPEC §11.5): ``tripwire hook HARNESS --install`` and
``--uninstall`` run as the user runs them, as subprocesses: every option checked before
anything is written (exit 2, one line), absolute paths, one tripwire entry per harness and
event however often it is installed, a missing directory refused, Codex's trust written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_hooks import INSTALLED, Hook, common, post, pre

HARNESS_FILES = {"claude-code": ".claude/settings.json", "codex": ".codex/hooks.json"}


def tripwire(*args: str, cwd: Path | None = None, env: dict | None = None,
             stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tripwire", *args], capture_output=True,
                          text=True, cwd=cwd, input=stdin, timeout=60,
                          env={**os.environ, "TRIPWIRE_STORE_KEY": "k", **(env or {})})


def commands(settings: Path) -> list[str]:
    data = json.loads(settings.read_text())
    out = []
    for entries in data["hooks"].values():
        for entry in entries:
            out += [h["command"] for h in entry.get("hooks", [entry])]
    return out


@pytest.fixture
def home(tmp_path: Path) -> Path:
    for name in HARNESS_FILES.values():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    return tmp_path


@pytest.mark.parametrize("options, message", [
    (["--mode", "bogus"], "watchdog mode must be one of off, warn, feedback, enforce, "
                          "not 'bogus'"),
    (["--config", "missing.toml"], "--config missing.toml: no such config file"),
    (["--wait", "0"], "a wait is more than 0 and at most 60 seconds"),
    (["--wait", "soon"], "not a number of seconds"),
    (["--store", "."], "--store .: is a directory, not a store file"),
])
@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_a_bad_option_is_exit_2_and_nothing_written(home: Path, harness: str, options: list,
                                                    message: str) -> None:
    settings = home / HARNESS_FILES[harness]
    done = tripwire("hook", harness, "--install", *options, "--write", str(settings),
                    cwd=home, env={"CODEX_HOME": str(home / ".codex")})
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert message in done.stderr
    assert not settings.exists()
    assert not (home / ".codex" / "config.toml").exists()


def test_a_bad_config_file_is_refused_at_install(home: Path) -> None:
    (home / "bad.toml").write_text("[watchdog]\nmode = 'loud'\n")
    done = tripwire("hook", "claude-code", "--install", "--config", "bad.toml", cwd=home)
    assert done.returncode == 2
    assert "loud" in done.stderr and done.stdout == ""


def test_paths_are_written_absolute(home: Path) -> None:
    (home / "tw.toml").write_text("[watchdog]\nmode = 'enforce'\n")
    done = tripwire("hook", "claude-code", "--install", "--store", "state/s.db", "--config",
                    "tw.toml", "--mode", "Warn", cwd=home)
    assert done.returncode == 0, done.stderr
    handler = json.loads(done.stdout)["hooks"]["PreToolUse"][0]["hooks"][0]
    assert handler["command"] == (f"{INSTALLED} claude-code --store {home}/state/s.db "
                                  f"--mode warn --config {home}/tw.toml")


def test_write_is_an_option_of_install_only(home: Path) -> None:
    settings = home / ".claude" / "settings.json"
    done = tripwire("hook", "claude-code", "--write", str(settings), stdin=json.dumps(pre(1)))
    assert done.returncode == 2 and done.stdout == ""
    assert "--write SETTINGS is an option of --install" in done.stderr
    assert not settings.exists()


def test_a_missing_directory_is_refused(home: Path) -> None:
    settings = home / ".claud" / "settings.json"
    done = tripwire("hook", "claude-code", "--install", "--write", str(settings))
    assert done.returncode == 2
    assert "does not exist" in done.stderr
    assert not settings.parent.exists()


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_installing_again_replaces_the_entry_in_place(home: Path, harness: str) -> None:
    settings = home / HARNESS_FILES[harness]
    mine = {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-check"}]}
    settings.write_text(json.dumps({"model": "x", "hooks": {"PreToolUse": [mine]}}))
    env = {"CODEX_HOME": str(home / ".codex")}
    for options in ([], ["--mode", "warn"], ["--store", "s.db"], ["--store", "s.db"]):
        done = tripwire("hook", harness, "--install", *options, "--write", str(settings),
                        cwd=home, env=env)
        assert done.returncode == 0, done.stderr
    data = json.loads(settings.read_text())
    assert data["model"] == "x"
    assert data["hooks"]["PreToolUse"][0] == mine
    command = f"{INSTALLED} {harness} --store {home}/s.db"
    assert commands(settings) == ["my-check"] + [command] * len(data["hooks"])
    assert [len(v) for k, v in data["hooks"].items() if k != "PreToolUse"] == \
        [1] * (len(data["hooks"]) - 1)


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_uninstall_removes_only_tripwires_entries(home: Path, harness: str) -> None:
    settings = home / HARNESS_FILES[harness]
    mine = {"hooks": [{"type": "command", "command": "my-check"}]}
    settings.write_text(json.dumps({"hooks": {"Stop": [mine]}}))
    env = {"CODEX_HOME": str(home / ".codex")}
    assert tripwire("hook", harness, "--install", "--write", str(settings),
                    env=env).returncode == 0
    done = tripwire("hook", harness, "--uninstall", str(settings), env=env)
    assert done.returncode == 0, done.stderr
    assert "removed" in done.stdout
    assert json.loads(settings.read_text()) == {"hooks": {"Stop": [mine]}}
    if harness == "codex":
        assert "trusted_hash" not in (home / ".codex" / "config.toml").read_text()
    missing = tripwire("hook", harness, "--uninstall", str(home / "nope.json"), env=env)
    assert missing.returncode == 2


def test_codex_install_trusts_the_handlers_it_writes(home: Path) -> None:
    """The key and hash Codex 0.147.0 computes (verified against its ``hooks/list``), in the
    user's config.toml, which keeps what it held."""
    codex_home = home / ".codex"
    config = codex_home / "config.toml"
    config.write_text('# my settings\nmodel = "gpt-5-codex"\n\n[projects."/src"]\n'
                      'trust_level = "trusted"\n')
    settings = codex_home / "hooks.json"
    bare = {"CODEX_HOME": str(codex_home), "PATH": "/usr/bin:/bin"}  # no tripwire on it
    done = tripwire("hook", "codex", "--install", "--store", "/abs/s.db", "--write",
                    str(settings), env=bare)
    assert done.returncode == 0, done.stderr
    assert "7 Codex hooks trusted" in done.stdout
    text = config.read_text()
    assert text.startswith('# my settings\nmodel = "gpt-5-codex"\n')
    import tomllib

    state = tomllib.loads(text)["hooks"]["state"]
    path = os.path.realpath(settings)
    # the compaction events' handlers are trusted too (their hashes are computed as for the
    # others; the five below were checked against codex-cli 0.147.0 itself)
    compaction = {f"{path}:pre_compact:0:0", f"{path}:post_compact:0:0"}
    assert compaction <= set(state)
    assert all(state[k]["trusted_hash"].startswith("sha256:") for k in compaction)
    assert {k: v for k, v in state.items() if k not in compaction} == {
        f"{path}:pre_tool_use:0:0": {"trusted_hash": "sha256:ab154768abcc777226ab3dd737eb11bc"
                                                     "38a0b97ce7a9e06766ac9ba41336180e"},
        f"{path}:post_tool_use:0:0": {"trusted_hash": "sha256:82da793cebb2f86f1d27fe9696c921a"
                                                      "53a4314ceab35fb08149bfbabde6882fd"},
        f"{path}:user_prompt_submit:0:0": {"trusted_hash": "sha256:c5e83d6e93704a3978c675813233"
                                                           "b6a3c1600878393ee1bff04e5ae9a8bd4247"},
        f"{path}:session_start:0:0": {"trusted_hash": "sha256:f4f39e0ac09b0ffd3cf799c54a9a302c"
                                                      "90b144bf5f223c906e1ce35412befcc6"},
        f"{path}:stop:0:0": {"trusted_hash": "sha256:79b6ecb79c8d3adc245378df20f609f20d54cc8be"
                                             "cd937b88fb4cb143d56b188"},
    }
    assert tomllib.loads(text)["projects"] == {"/src": {"trust_level": "trusted"}}
    # installing again with other options: the same keys, new hashes, nothing stale
    done = tripwire("hook", "codex", "--install", "--mode", "warn", "--write", str(settings),
                    env=bare)
    assert done.returncode == 0, done.stderr
    again = tomllib.loads(config.read_text())["hooks"]["state"]
    assert set(again) == set(state)
    assert all(again[k] != state[k] for k in state)


def test_codex_install_into_another_codex_home_trusts_it_there(home: Path,
                                                                 tmp_path: Path) -> None:
    """``--write DIR/hooks.json`` for a Codex home of its own (not the one ``CODEX_HOME`` or
    ``~/.codex`` names): the trust goes into ``DIR/config.toml``, where Codex run with
    ``CODEX_HOME=DIR`` reads it; the user's config is not touched; stdout names the file."""
    mine = home / ".codex"
    other = tmp_path / "ci-codex"
    other.mkdir()
    for env in ({"CODEX_HOME": str(mine)}, {}):
        done = tripwire("hook", "codex", "--install", "--store", "/abs/s.db", "--write",
                        str(other / "hooks.json"), env={**env, "HOME": str(home)})
        assert done.returncode == 0, done.stderr
        assert f"7 Codex hooks trusted in {os.path.realpath(other)}/config.toml" in done.stdout
        assert f"Codex runs these hooks with CODEX_HOME={os.path.realpath(other)}" in \
            done.stderr
        assert not (mine / "config.toml").exists()
        import tomllib

        state = tomllib.loads((other / "config.toml").read_text())["hooks"]["state"]
        assert sorted(state) == sorted(f"{os.path.realpath(other)}/hooks.json:{e}:0:0" for e in (
            "pre_tool_use", "post_tool_use", "user_prompt_submit", "session_start", "stop",
            "pre_compact", "post_compact"))
    # following CODEX_HOME when it names that folder: no note, the same file
    done = tripwire("hook", "codex", "--install", "--write", str(other / "hooks.json"),
                    env={"CODEX_HOME": str(other), "HOME": str(home)})
    assert done.returncode == 0 and "CODEX_HOME=" not in done.stderr, done.stderr
    # a project's .codex/hooks.json is trusted in the user's own config
    project = tmp_path / "repo" / ".codex"
    project.mkdir(parents=True)
    done = tripwire("hook", "codex", "--install", "--write", str(project / "hooks.json"),
                    env={"CODEX_HOME": str(mine), "HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert f"trusted in {os.path.realpath(mine)}/config.toml" in done.stdout
    assert not (project / "config.toml").exists()


def test_a_bad_option_on_the_event_path_never_blocks(tmp_path: Path) -> None:
    """Every harness reads exit 2 as "block": an event with a bad option is exit 0, one
    line, no decision."""
    done = tripwire("hook", "claude-code", "--mode", stdin=json.dumps(pre(1)),
                    env={"TRIPWIRE_STORE": str(tmp_path / "s.db")})
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.strip().endswith("; no decision")
    assert len(done.stderr.splitlines()) == 1


def test_an_event_delivered_twice_is_observed_once(tmp_path: Path, implementation: str
                                                  ) -> None:
    """Two hook entries (or a harness running another's hooks) deliver each event twice:
    observations are idempotent per tool-call id, so the session halts at the 5th identical
    call, not the 3rd."""
    hook = Hook("claude-code", tmp_path / "s.sqlite3", implementation)
    assert hook(common("UserPromptSubmit", prompt="go")) is None
    for n in range(1, 5):
        for _ in range(2):
            assert hook(pre(n)) is None
            assert hook(post(n)) is None
    out = hook(pre(5))
    assert out is not None and out["hookSpecificOutput"]["permissionDecision"] == "deny"


@pytest.mark.skipif(not INSTALLED.endswith("tripwire-hook"),
                    reason="no native hook client is installed beside tripwire")
@pytest.mark.parametrize("beside", ["a script", "a link to the installed one"])
def test_the_native_client_is_written_only_where_it_is_beside_tripwire(
        tmp_path: Path, beside: str) -> None:
    """A ``tripwire`` first on the PATH with no ``tripwire-hook`` beside it gets the Python
    command written; a link to the installed ``tripwire`` (pipx's) finds the client beside
    the file it points to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "tripwire"
    if beside == "a script":
        program.write_text(f"#!/bin/sh\nexec {sys.executable} -m tripwire \"$@\"\n")
        program.chmod(0o755)
        expected = f"{program} hook claude-code"
    else:
        program.symlink_to(Path(INSTALLED).with_name("tripwire"))
        expected = f"{INSTALLED} claude-code"
    done = tripwire("hook", "claude-code", "--install",
                    env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    assert set(commands_of(json.loads(done.stdout))) == {expected}


def commands_of(block: dict) -> list[str]:
    return [h["command"] for entries in block["hooks"].values() for entry in entries
            for h in entry.get("hooks", [entry])]
