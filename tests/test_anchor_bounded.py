"""The anchor file is read bounded (issue 36): in a same-user setup the agent can put anything
in its place, so it is read as ``base.files.read_whole`` reads a file someone else may write —
a regular file (a link to one is followed) of at most ``MAX_ANCHOR`` bytes, never a FIFO or a
device. A link to ``/dev/zero``, a FIFO or a sparse 60 GiB file where the anchor was is a
problem the anchor reports (``verify`` says BROKEN, the session restores halted as tampered),
never a hang or a ``MemoryError`` (``verify`` runs with 2 GiB of address space).
"""

from __future__ import annotations

import functools
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tripwire import Guardrails, GuardrailsConfig
from tripwire.durability.anchor import MAX_ANCHOR
from tripwire.durability.sqlite import SQLiteStore

CONFIG = GuardrailsConfig(mode="enforce", unattended=False, max_session_cost_usd=100.0)
GIB = 1 << 30
NOT_REGULAR = "is not a regular file (a FIFO, a device, a socket or a directory)"


def _memory_capped() -> None:  # a read of /dev/zero or of the sparse file whole could not
    resource.setrlimit(resource.RLIMIT_AS, (2 * GIB, 2 * GIB))


def replace_with(anchor: Path, what: str) -> None:
    anchor.unlink()
    if what == "link to /dev/zero":
        anchor.symlink_to("/dev/zero")
    elif what == "fifo":
        os.mkfifo(anchor)
    else:
        with open(anchor, "wb") as f:
            f.truncate(60 * GIB)  # sparse: no disk used


@pytest.mark.parametrize(("what", "reason"), [
    ("link to /dev/zero", NOT_REGULAR),
    ("fifo", NOT_REGULAR),
    ("sparse 60 GiB file", f"is over {MAX_ANCHOR} bytes"),
])
def test_a_hostile_file_in_place_of_the_anchor_is_a_broken_verdict(
        tmp_path: Path, implementation: str, monkeypatch: pytest.MonkeyPatch, what: str,
        reason: str) -> None:
    db, anchor = tmp_path / "store.sqlite3", tmp_path / "operator" / "tripwire.anchor"
    anchor.parent.mkdir()
    monkeypatch.setenv("TRIPWIRE_STORE_KEY", "a secret kept from the agent")
    monkeypatch.setenv("TRIPWIRE_STORE_ANCHOR", str(anchor))
    with SQLiteStore(db, anchor=str(anchor)) as store:
        g = Guardrails(CONFIG, session_id="spender", implementation=implementation, store=store)
        g.start_turn()
        g.on_usage(cost_usd=1.0)
        g.end_turn()
    assert anchor.is_file()
    replace_with(anchor, what)

    problem = f"the anchor file {anchor} cannot be read ({reason})"
    done = subprocess.run([sys.executable, "-m", "tripwire", "verify", str(db)],
                          capture_output=True, text=True, timeout=60, env=os.environ,
                          preexec_fn=_memory_capped)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        "spender: intact (1 row)", f"*: BROKEN: {problem}",
        "verdict: BROKEN (1 of the reports above; 1 session, 1 row)"]

    with SQLiteStore(db, anchor=str(anchor)) as store:
        g = Guardrails(CONFIG, session_id="spender", implementation=implementation, store=store)
        assert g.halted and g.status().halted_by == ("watchdog",)
        assert problem in (g.status().watchdog_reason or "")
        assert "tampered" in (g.status().watchdog_reason or "")


def _frozen_stat(path: str, frozen: os.stat_result, real: Any, p: Any, *a: Any,
                 **k: Any) -> os.stat_result:
    return frozen if str(p) == path else real(p, *a, **k)  # type: ignore[no-any-return]


def test_anchor_writes_within_one_clock_tick_never_read_an_older_parse(
        tmp_path: Path, implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The anchor is parsed once per version of its file (inode, size, mtime): a rewrite whose
    inode number is reused, of the same size, within the filesystem clock's tick, has the
    version of an older one. The writer caches what it wrote, so its next write never starts
    from that older parse (which dropped the sessions in between: a rollback of the last one
    then restored unhalted, seen once in CI). The tick is simulated: every stat of the anchor
    answers the first version."""
    import tripwire.durability.anchor as anchor_module

    db, anchor = tmp_path / "store.sqlite3", tmp_path / "operator" / "tripwire.anchor"
    anchor.parent.mkdir()
    monkeypatch.setenv("TRIPWIRE_STORE_KEY", "a secret kept from the agent")
    with SQLiteStore(db, anchor=str(anchor)) as store:
        for n, sid in enumerate(("first", "second", "third")):
            g = Guardrails(CONFIG, session_id=sid, implementation=implementation, store=store)
            g.start_turn()
            g.on_usage(cost_usd=1.0 + n)
            g.end_turn()
            if n == 0:
                monkeypatch.setattr(anchor_module.os, "stat", functools.partial(
                    _frozen_stat, str(anchor), os.stat(anchor), os.stat))
    monkeypatch.undo()
    monkeypatch.setenv("TRIPWIRE_STORE_KEY", "a secret kept from the agent")
    with SQLiteStore(db) as reader:
        read = anchor_module.AnchorFile(str(anchor), reader._key).read()
    assert not isinstance(read, str) and read is not None
    assert sorted(read.sessions) == ["first", "second", "third"]
