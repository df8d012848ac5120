"""The command line's rough edges a newcomer hit (issue 23, "Bad input and smaller faults"):
every usage error is one line and exit 2, output paths are checked before the work, help
texts say what the verbs do now, dollars are dollars, and a store verb says one thing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tripwire import Guardrails, GuardrailsConfig
from tripwire.budgets.caps import Budget
from tripwire.durability.sqlite import SQLiteStore


def tripwire(*argv: str, env: dict[str, str] | None = None,
             stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tripwire", *argv], capture_output=True,
                          text=True, timeout=120, input=stdin,
                          env={**os.environ, **(env or {})})


def one_line(done: subprocess.CompletedProcess[str], text: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "usage:" not in done.stderr, done.stderr
    assert done.stderr.splitlines() == [text], done.stderr


def test_an_unknown_hook_harness_is_one_line() -> None:
    """On the hook's event path a usage error is one line and exit 0, no decision: every
    harness reads exit 2 as "block this call" (SPEC §11.5); installing, it is exit 2."""
    done = tripwire("hook", "bogus", stdin="{}")
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "tripwire hook: argument harness: invalid choice: 'bogus' (choose from 'claude-code', "
        "'codex', 'gemini-cli', 'cursor', 'copilot', 'kiro') (see tripwire hook --help); "
        "no decision"]
    one_line(tripwire("hook", "bogus", "--install"),
             "tripwire hook: argument harness: invalid choice: 'bogus' (choose from "
             "'claude-code', 'codex', 'gemini-cli', 'cursor', 'copilot', 'kiro') (see tripwire "
             "hook --help)")
    one_line(tripwire("hook", "serve"),
             "tripwire hook serve: the following arguments are required: --socket (see "
             "tripwire hook serve --help)")


def test_a_dashed_sweep_value_is_checked_by_the_option_not_read_as_one(tmp_path: Path) -> None:
    one_line(tripwire("corpus", "sweep", str(tmp_path), "--signal", "repeated-tool-call",
                      "--values", "-5:3"),
             "tripwire corpus sweep: argument --values: --values needs positive integers, not "
             "'-5:3' (see tripwire corpus sweep --help)")


def test_a_report_path_that_is_a_file_is_refused_before_anything_is_measured(
        tmp_path: Path) -> None:
    pytest.importorskip("numpy", reason="tripwire corpus needs the corpus extra")
    taken = tmp_path / "passwd"
    taken.write_text("root:x:0:0\n")
    # the corpus path does not exist either: the report is checked first, so that is not said
    one_line(tripwire("corpus", "stats", str(tmp_path / "no-such-corpus"), "--report",
                      str(taken)),
             f"tripwire: --report {taken}: not a directory (the report is a directory of an "
             "HTML page and its plots)")
    assert taken.read_text() == "root:x:0:0\n"


def test_help_texts_say_what_the_verbs_do() -> None:
    replay = tripwire("replay", "--help").stdout
    assert "any supported harness's transcripts" in " ".join(replay.split())
    assert "eight" not in replay
    reset = " ".join(tripwire("reset", "--help").stdout.split())
    assert "--session ID the session to reset" in reset
    assert "which halt to clear (default: all)" in reset
    serve = " ".join(tripwire("hook", "serve", "--help").stdout.split())
    assert "--socket PATH the Unix socket to listen on" in serve


def test_a_store_verb_says_one_thing_about_a_bad_store(tmp_path: Path) -> None:
    missing_dir = tmp_path / "no" / "such" / "dir" / "t.db"
    done = tripwire("replay", "--store", str(missing_dir), "-", stdin='{"type": "turn_start"}\n')
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"tripwire: {missing_dir}: cannot open the store: unable to open database file"]


NOTICE = ("tripwire: The durable store is sealed with tripwire's public default key, which only "
          "catches naive edits of the database file: set TRIPWIRE_STORE_KEY to a secret the "
          "agent cannot read.")


def test_the_default_key_notice_is_said_where_the_store_is_made(
        tmp_path: Path, implementation: str) -> None:
    """Once, by the process that makes a store with the public default key (the first write:
    ``replay --store``), naming tripwire; never by a read (``status``, ``verify``) nor by a
    write into a store made earlier (an operator's ``reset``): its key was chosen then."""
    db = tmp_path / "t.db"
    env = {k: v for k, v in os.environ.items() if k != "TRIPWIRE_STORE_KEY"}
    events = tmp_path / "loop.jsonl"
    events.write_text("".join(json.dumps({"type": "call", "name": "read_file",
                                          "args": {"path": "a"}}) + "\n" for _ in range(6)))

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tripwire", *args], capture_output=True,
                              text=True, env={**env, "TRIPWIRE_IMPLEMENTATION": implementation},
                              timeout=60)

    made = run("replay", "--mode", "enforce", "--quiet", "--store", str(db), str(events))
    assert made.returncode == 0, made.stderr
    assert made.stderr.splitlines().count(NOTICE) == 1
    for args in (("status", str(db)), ("verify", str(db)),
                 ("reset", str(db), "--session", str(events)),
                 ("replay", "--quiet", "--store", str(db), str(events))):
        done = run(*args)
        assert done.returncode == 0, (args, done.stderr)
        assert NOTICE not in done.stderr, args


def test_status_prints_a_tasks_dollars_as_dollars(tmp_path: Path, implementation: str) -> None:
    db = tmp_path / "t.db"
    config = GuardrailsConfig(mode="enforce", unattended=False, budget=Budget(usd=100.0))
    g = Guardrails(config, session_id="s", implementation=implementation,
                   store=SQLiteStore(db))
    g.start_turn()
    g.on_usage(cost_usd=12.5)
    g.end_turn()
    done = tripwire("status", str(db))
    assert done.returncode == 0, done.stderr
    session, task = (json.loads(line) for line in done.stdout.splitlines())
    assert session["spent_usd"] == 12.5
    assert task["kind"] == "task" and task["used"]["usd"] == 12.5


def test_reset_never_moves_a_directory_with_files_in_it(tmp_path: Path) -> None:
    """A directory in place of the store is unreadable; but one holding files is as likely an
    operator's mistyped path: the reset refuses to move it (an empty one is moved aside)."""
    mine = tmp_path / "projects"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    done = tripwire("reset", str(mine), "--session", "s")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"tripwire: {mine}: a directory with files in it, not a store: tripwire reset does not "
        "move it; move it aside yourself"]
    assert (mine / "notes.txt").read_text() == "keep me"
