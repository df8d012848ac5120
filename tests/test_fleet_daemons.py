"""Two fleet daemons (real processes) on one shared store: a session's turns move between them,
its spend adds up exactly, a halt in one is refused in the other at its next turn start, an
operator reset from the CLI applies in both — with either daemon SIGKILLed and restarted along
the way. On PostgreSQL (the deployment this is for) and on a SQLite file opened shared."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_backends import BACKENDS, Backend, backend_fixture

from tripwire.base.money import NANO
from tripwire.cli.main import EXIT_REFUSED
from tripwire.cli.main import main as cli_main
from tripwire.policy.ceiling import reset_refusal

HERE = Path(__file__).resolve().parent


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backend_fixture(request, tmp_path)


class Daemon:
    def __init__(self, location: str, implementation: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "fleet_daemon.py"), location, implementation],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.ask_raw() == {"ready": True}

    def ask_raw(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the daemon died (exit {self.proc.poll()})"
        reply: dict[str, Any] = json.loads(line)
        return reply

    def send(self, **cmd: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any]:
        reply = self.ask_raw()
        reply.pop("ms")
        return reply

    def ask(self, **cmd: Any) -> dict[str, Any]:
        self.send(**cmd)
        return self.reply()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)  # no flush, no atexit: only what is durable
        self.proc.wait(timeout=30)

    def quit(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write('{"op": "quit"}\n')
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def test_two_daemons_share_a_session(backend: Backend, implementation: str) -> None:
    loc = backend.location
    a, b = Daemon(loc, implementation), Daemon(loc, implementation)
    try:
        # the session's turns alternate between the daemons; binary-exact amounts
        assert a.ask(op="turn", session="s", usage=[1.25]) == {"refused": False,
                                                              "actions": ["continue"]}
        assert b.ask(op="turn", session="s", usage=[2.5, 0.5]) == {
            "refused": False, "actions": ["continue", "continue"]}
        assert a.ask(op="turn", session="s", usage=[0.125])["refused"] is False
        assert b.ask(op="turn", session="s", usage=[0.0625])["refused"] is False
        # a fresh read of each daemon's view: 1.25 + 2.5 + 0.5 + 0.125 + 0.0625
        assert a.ask(op="turn", session="s")["refused"] is False
        assert a.ask(op="status", session="s") == {"halted": False, "halted_by": [],
                                                   "spent_usd": 4.4375}
        # SIGKILL one daemon right after it charged: the charge was durable before it returned
        assert a.ask(op="turn", session="s", usage=[1.0])["refused"] is False
        a.kill()
        assert b.ask(op="turn", session="s", usage=[0.25])["refused"] is False
        assert b.ask(op="status", session="s")["spent_usd"] == 5.6875
        a = Daemon(loc, implementation)  # restarted: restores the session from the store
        assert a.ask(op="status", session="s")["spent_usd"] == 5.6875
        # a halt in one daemon: the other refuses the session at its next turn start
        assert a.ask(op="loop", session="s")["actions"][-1] == "halt_session"
        assert b.ask(op="turn", session="s", usage=[9.0]) == {"refused": True,
                                                              "halted_by": ["watchdog"]}
        b.kill()
        b = Daemon(loc, implementation)
        assert b.ask(op="status", session="s")["halted_by"] == ["watchdog"]
        # the operator resets it from the CLI: both daemons take it at their next turn
        out, err = io.StringIO(), io.StringIO()
        assert cli_main(["reset", loc, "--session", "s"], out=out, err=err) == 0, err.getvalue()
        assert json.loads(out.getvalue())["cleared"] == ["watchdog"]
        assert b.ask(op="turn", session="s", usage=[0.5])["refused"] is False
        assert a.ask(op="turn", session="s", usage=[0.25])["refused"] is False
        assert b.ask(op="turn", session="s")["refused"] is False
        assert b.ask(op="status", session="s") == {"halted": False, "halted_by": [],
                                                   "spent_usd": 6.4375}
    finally:
        for d in (a, b):
            if d.proc.poll() is None:
                d.quit()
    with backend.open() as store:
        assert all(r.intact for r in store.verify())


def test_a_cost_halt_in_one_daemon_is_refused_in_the_other(backend: Backend,
                                                           implementation: str) -> None:
    loc = backend.location
    a, b = Daemon(loc, implementation), Daemon(loc, implementation)
    try:
        assert b.ask(op="turn", session="c", usage=[60.0])["refused"] is False
        # a's first use restores 60 spent; 40 more reaches the $100 ceiling
        assert a.ask(op="turn", session="c", usage=[40.0]) == {"refused": False,
                                                              "actions": ["halt_session"]}
        assert b.ask(op="turn", session="c") == {"refused": True, "halted_by": ["cost_ceiling"]}
        assert b.ask(op="status", session="c")["spent_usd"] == 100.0
    finally:
        a.quit()
        b.quit()


def stored(location: str, session: str) -> dict[str, Any]:
    """What the store says of a session (``tripwire status``: the fold of its rows)."""
    out, err = io.StringIO(), io.StringIO()
    assert cli_main(["status", location, "--session", session], out=out, err=err) == 0, \
        err.getvalue()
    line: dict[str, Any] = json.loads(out.getvalue().splitlines()[0])
    return line


def test_concurrent_turns_of_one_session_add_up_exactly(backend: Backend,
                                                        implementation: str) -> None:
    loc = backend.location
    a, b = Daemon(loc, implementation), Daemon(loc, implementation)
    try:
        assert a.ask(op="start", session="s") == {"refused": False}
        assert b.ask(op="start", session="s") == {"refused": False}
        # both daemons charge the session inside their open turns, no turn boundary between:
        # each one's rows carry only its own charges
        assert a.ask(op="charge", session="s", usage=[1.25]) == {"actions": ["continue"]}
        assert b.ask(op="charge", session="s", usage=[2.5]) == {"actions": ["continue"]}
        assert a.ask(op="charge", session="s", usage=[0.5])["actions"] == ["continue"]
        assert b.ask(op="charge", session="s", usage=[0.125])["actions"] == ["continue"]
        # and at the same moment: both are sent before either answers (appends interleave)
        a.send(op="charge", session="s", usage=[0.01] * 40)
        b.send(op="charge", session="s", usage=[0.02] * 40)
        assert a.reply() == {"actions": ["continue"] * 40}
        assert b.reply() == {"actions": ["continue"] * 40}
        # each sees only its own charges until its next turn start
        assert a.ask(op="status", session="s")["spent_usd"] == 2.15  # 1.25 + 0.5 + 40 x 0.01
        assert b.ask(op="status", session="s")["spent_usd"] == 3.425  # 2.5 + 0.125 + 40 x 0.02
        assert stored(loc, "s")["spent_usd"] == 5.575  # the sum, not the larger total
        assert a.ask(op="end", session="s") == {"action": "continue"}
        assert b.ask(op="end", session="s") == {"action": "continue"}
        for d in (a, b):  # the next turn start reads the sum
            assert d.ask(op="start", session="s") == {"refused": False}
            assert d.ask(op="status", session="s")["spent_usd"] == 5.575
        # a charge after the sync adds to it once, in both views and in the store
        assert a.ask(op="charge", session="s", usage=[0.25])["actions"] == ["continue"]
        assert b.ask(op="charge", session="s", usage=[0.125])["actions"] == ["continue"]
        assert stored(loc, "s")["spent_usd"] == 5.95
        c = Daemon(loc, implementation)  # a third daemon restores the exact sum
        assert c.ask(op="status", session="s")["spent_usd"] == 5.95
        c.quit()
    finally:
        for d in (a, b):
            if d.proc.poll() is None:
                d.quit()
    with backend.open() as store:
        assert all(r.intact for r in store.verify())


def test_sigkill_of_one_daemon_mid_turn_loses_and_doubles_no_charge(backend: Backend,
                                                                     implementation: str) -> None:
    loc = backend.location
    a, b = Daemon(loc, implementation), Daemon(loc, implementation)
    try:
        assert a.ask(op="start", session="k") == {"refused": False}
        assert b.ask(op="start", session="k") == {"refused": False}
        assert a.ask(op="charge", session="k", usage=[1.5])["actions"] == ["continue"]
        assert b.ask(op="charge", session="k", usage=[0.75])["actions"] == ["continue"]
        assert a.ask(op="charge", session="k", usage=[0.25])["actions"] == ["continue"]
        a.kill()  # mid-turn: every charge it answered was durable before it answered
        assert b.ask(op="charge", session="k", usage=[2.0])["actions"] == ["continue"]
        assert stored(loc, "k")["spent_usd"] == 4.5
        a = Daemon(loc, implementation)  # restarted: a new writer, the old one's charges kept
        assert a.ask(op="status", session="k")["spent_usd"] == 4.5
        assert a.ask(op="start", session="k") == {"refused": False}
        assert a.ask(op="charge", session="k", usage=[1.0])["actions"] == ["continue"]
        assert b.ask(op="charge", session="k", usage=[0.5])["actions"] == ["continue"]  # b's turn
        b.kill()  # the other one, mid-turn too
        b = Daemon(loc, implementation)
        assert b.ask(op="status", session="k")["spent_usd"] == 6.0
        assert a.ask(op="end", session="k") == {"action": "continue"}
        assert a.ask(op="start", session="k") == {"refused": False}
        assert a.ask(op="status", session="k")["spent_usd"] == 6.0
        assert stored(loc, "k")["spent_usd"] == 6.0
    finally:
        for d in (a, b):
            if d.proc.poll() is None:
                d.quit()
    with backend.open() as store:
        assert all(r.intact for r in store.verify())


def test_a_cost_halt_on_concurrent_spend_is_refused_on_both(backend: Backend,
                                                           implementation: str) -> None:
    loc = backend.location
    a, b = Daemon(loc, implementation), Daemon(loc, implementation)
    try:
        assert a.ask(op="start", session="c") == {"refused": False}
        assert b.ask(op="start", session="c") == {"refused": False}
        # $60 each, inside open turns: neither view reaches the $100 ceiling, the sum does
        assert a.ask(op="charge", session="c", usage=[60.0]) == {"actions": ["continue"]}
        assert b.ask(op="charge", session="c", usage=[60.0]) == {"actions": ["continue"]}
        assert a.ask(op="end", session="c") == {"action": "continue"}
        assert b.ask(op="end", session="c") == {"action": "continue"}
        # the next turn start judges the summed $120: a trips and halts, b takes a's halt
        assert a.ask(op="start", session="c") == {"refused": True,
                                                  "halted_by": ["cost_ceiling"]}
        assert b.ask(op="start", session="c") == {"refused": True,
                                                  "halted_by": ["cost_ceiling"]}
        for d in (a, b):
            assert d.ask(op="status", session="c") == {"halted": True,
                                                       "halted_by": ["cost_ceiling"],
                                                       "spent_usd": 120.0}
        line = stored(loc, "c")
        assert (line["halted_by"], line["spent_usd"]) == (["cost_ceiling"], 120.0)
        # the refusal's budget figure is the sum's: a reset adding $20 still re-trips
        out, err = io.StringIO(), io.StringIO()
        assert cli_main(["reset", loc, "--session", "c", "--add-budget", "20"],
                        out=out, err=err) == EXIT_REFUSED
        assert err.getvalue() == f"tripwire: {reset_refusal(120 * NANO, 120 * NANO)}\n"
    finally:
        a.quit()
        b.quit()


def test_sigkill_in_the_middle_of_simultaneous_charges(backend: Backend,
                                                       implementation: str) -> None:
    """Both daemons charge one session at the same moment, one cent at a time; A is SIGKILLed
    in the middle of its run. Every charge A answered is in the store, its rows count one cent
    each with no gap and no repeat, and the store's sum (restored by a new daemon) is B's
    charges plus exactly the charges of A that are durable."""
    loc = backend.location
    a, b = Daemon(loc, implementation), Daemon(loc, implementation)
    try:
        assert a.ask(op="start", session="m") == {"refused": False}
        assert b.ask(op="start", session="m") == {"refused": False}
        a.send(op="charge", session="m", usage=[0.01] * 400, acks=True)
        b.send(op="charge", session="m", usage=[0.02] * 100)
        acked = 0
        while acked < 60:
            acked = a.ask_raw()["ack"]
        a.kill()
        assert b.reply() == {"actions": ["continue"] * 100}
        with backend.open() as store:
            rows = [r.data for r in store.history("m").rows if "spend_writer" in r.data]
        writers = list(dict.fromkeys(d["spend_writer"] for d in rows))
        assert len(writers) == 2
        own = {w: [d["spend_nano"] for d in rows if d["spend_writer"] == w] for w in writers}
        by_a = next(w for w in writers if own[w][0] == 10_000_000)
        by_b = next(w for w in writers if w != by_a)
        durable = len(own[by_a])
        assert acked <= durable <= 400
        assert own[by_a] == [10_000_000 * n for n in range(1, durable + 1)]
        assert own[by_b] == [20_000_000 * n for n in range(1, 101)]
        expected = (durable * 10_000_000 + 2_000_000_000) / 1e9
        assert stored(loc, "m")["spent_usd"] == expected
        a = Daemon(loc, implementation)
        assert a.ask(op="status", session="m")["spent_usd"] == expected
        assert b.ask(op="end", session="m") == {"action": "continue"}
        assert b.ask(op="start", session="m") == {"refused": False}
        assert b.ask(op="status", session="m")["spent_usd"] == expected
    finally:
        for d in (a, b):
            if d.proc.poll() is None:
                d.quit()
    with backend.open() as store:
        assert all(r.intact for r in store.verify())
