"""An out-of-range count is refused at every door before anything is charged, and a row that
cannot be stored never holds up the rows behind it (issue 23, attack 3).

Before: ``input_tokens=10**30`` was charged in memory, then every later write of the session
raised (msgpack stores integers below 2**64), so a $5 usage past a $1 ceiling raised instead of
halting, and a restart forgot the halt and the spend. Each test below takes one door: the API,
the batch path (below the native fast path's own bound too), a transcript reader, a replayed
event file, and the outbox itself. (HTTP: ``tests/test_serve.py``.)
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from tripwire import Guardrails, GuardrailsConfig, InvalidEvent
from tripwire.base.validate import MAX_TOKENS
from tripwire.durability.rows import SpendRow
from tripwire.durability.sqlite import SQLiteStore
from tripwire.fleet.fleet import Fleet

CONFIG = GuardrailsConfig(mode="enforce", unattended=False, max_session_cost_usd=1.0)


def restarted(path: Path, implementation: str, session: str = "s") -> Guardrails:
    return Guardrails(CONFIG, session_id=session, implementation=implementation,
                      store=SQLiteStore(path))


@pytest.mark.parametrize("tokens", [10**30, 2**64, MAX_TOKENS + 1, -1, True, 1.5])
def test_an_out_of_range_count_is_refused_before_anything_is_charged(
        tmp_path: Path, implementation: str, tokens: object) -> None:
    path = tmp_path / "g.db"
    g = restarted(path, implementation)
    g.start_turn()
    with pytest.raises(InvalidEvent, match="input_tokens must be an integer from 0 to "
                                           "1,000,000,000,000"):
        g.on_usage(model="m", input_tokens=tokens, output_tokens=1, cost_usd=0.10)
    assert g.status().spent_usd == 0.0
    # the session is not poisoned: a $5 usage past the $1 ceiling halts, durably
    assert g.on_usage(model="m", input_tokens=MAX_TOKENS, output_tokens=1, cost_usd=5.0
                      ).halt_session
    again = restarted(path, implementation)
    assert (again.halted, again.status().spent_usd) == (True, 5.0)


def test_the_maximum_itself_is_taken(implementation: str) -> None:
    g = Guardrails(CONFIG, implementation=implementation)
    g.start_turn()
    decision = g.on_usage(input_tokens=MAX_TOKENS, output_tokens=MAX_TOKENS, cost_usd=0.5)
    assert decision.guardrail == "context"  # taken: a full context window, not an error
    assert g.status().spent_usd == 0.5


@pytest.mark.parametrize("tokens", [MAX_TOKENS + 1, 2**62 - 1, 2**62, 10**30])
def test_the_batch_path_refuses_what_the_api_refuses(tmp_path: Path, implementation: str,
                                                     tokens: int) -> None:
    """A count between the maximum and 2**62 used to pass the native batch's fast path."""
    store = SQLiteStore(tmp_path / "g.db")
    fleet = Fleet(CONFIG, implementation=implementation, store=store)
    rows = [("s", "turn_start"), ("s", "usage", "m", 10, 1, 0.5), ("s", "usage", "m", tokens)]
    with pytest.raises(InvalidEvent, match="event 2: input_tokens must be an integer from 0"):
        fleet.observe_many(rows)
    assert "s" not in fleet or fleet.session("s").status().spent_usd == 0.0  # nothing charged
    assert not store.history("s").rows


CLAUDE_LINE = {
    "type": "assistant", "sessionId": "c1", "uuid": "a1", "isSidechain": False,
    "timestamp": "2026-05-01T10:00:00.000Z",
    "message": {"model": "claude-sonnet-4-5", "id": "msg_A", "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash",
                             "input": {"command": "ls"}}],
                "usage": {"input_tokens": 10**13, "output_tokens": 5}},
}


def tripwire(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tripwire", *argv], capture_output=True,
                          text=True, timeout=120)


def test_a_transcript_reader_reports_an_out_of_range_count_as_an_invalid_line(
        tmp_path: Path, implementation: str) -> None:
    path = tmp_path / "session.jsonl"
    user = {"type": "user", "sessionId": "c1", "uuid": "u1", "isSidechain": False,
            "timestamp": "2026-05-01T10:00:00.000Z",
            "message": {"role": "user", "content": "list the files"}}
    path.write_text("\n".join(json.dumps(line) for line in (user, CLAUDE_LINE)) + "\n")
    implementation_flag = ("--implementation", implementation)
    done = tripwire("replay", *implementation_flag, str(path))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"tripwire: {path}:2: usage token count must be an integer from 0 to "
        "1,000,000,000,000, not 10000000000000"]
    done = tripwire("replay", "--skip-invalid", *implementation_flag, str(path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["invalid_lines"] == 1
    assert "Traceback" not in done.stderr


def test_replay_refuses_an_integer_python_will_not_read_in_one_line(tmp_path: Path) -> None:
    """An integer of more than 4,300 digits: ``json.loads`` raises a plain ValueError, which
    replay used to let through as a traceback (exit 1), also with ``--skip-invalid``."""
    path = tmp_path / "events.jsonl"
    path.write_text('{"type": "turn_start"}\n'
                    '{"type": "usage", "input_tokens": ' + "9" * 5000 + "}\n"
                    '{"type": "call", "name": "ls", "args": {}}\n')
    done = tripwire("replay", str(path))
    assert (done.returncode, done.stderr.splitlines()) == (2, [
        f"tripwire: {path}:2: not JSON tripwire reads (a number of more than 4,300 digits)"])
    done = tripwire("replay", "--skip-invalid", str(path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["invalid_lines"] == 1


def test_an_out_of_range_budget_cap_is_a_config_error() -> None:
    from tripwire import ConfigError
    from tripwire.budgets.caps import Budget

    for value in (10**400, 2**53 + 1, -1, float("inf")):
        with pytest.raises(ConfigError, match="budget tokens must be a number from 0"):
            Budget(tokens=value)  # type: ignore[arg-type]


def test_a_row_that_cannot_be_stored_never_blocks_the_rows_behind_it(
        tmp_path: Path, implementation: str, caplog: pytest.LogCaptureFixture) -> None:
    """A row the store refuses for its content (here an integer msgpack cannot hold, what a
    10**30 token count used to put in a spend row) is reported and dropped; the halt queued
    behind it is written, and a restart restores it."""
    path = tmp_path / "g.db"
    g = restarted(path, implementation)
    g.start_turn()
    g._durable.put(SpendRow(models={"m": [1, 10**30, 1, 0]}))
    assert g.on_usage(cost_usd=5.0).halt_session
    assert g.flush()
    assert any("a spend row cannot be stored" in r.getMessage() and "was dropped" in
               r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
    again = restarted(path, implementation)
    assert (again.halted, again.status().spent_usd) == (True, 5.0)
