"""Replicas: two ``tripwire gateway`` processes on one PostgreSQL store behind a (simulated)
load balancer. A halt made through one replica is enforced by the other — at once for a
session it has not served, at the session's next turn for one it has — and a reset made
through either lets the next prompt through on both. (Within a turn a session's detectors
live in the replica that serves it: docs/gateway.md says what needs session affinity.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
from gateway_support import FakeModel, Harness, looping
from store_backends import Backend

CALL = {"name": "Bash", "input": {"command": "echo again >> f"}}


class Replica:
    def __init__(self, upstream: str, store: str, tmp: Path, name: str):
        token = tmp / "operator"
        token.write_text("op-secret\n")
        self.log = (tmp / f"{name}.err").open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tripwire", "gateway", "--upstream", upstream, "--listen",
             "127.0.0.1:0", "--store", store, "--operator-token-file", str(token)],
            stdout=subprocess.PIPE, stderr=self.log, text=True,
            env={**os.environ, "TRIPWIRE_STORE_KEY": "replica-secret"})
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert "listening on http://" in line, Path(self.log.name).read_text()
        self.url = line.strip().rsplit(" ", 1)[-1]
        self.client = httpx.Client(base_url=self.url, timeout=30)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(20)
        self.log.close()


def test_a_halt_through_one_replica_is_enforced_by_the_other(tmp_path: Path) -> None:
    backend = Backend("postgres", tmp_path)
    try:
        with FakeModel(looping("anthropic", CALL)) as model:
            a = Replica(model.url, backend.location, tmp_path, "a")
            b = Replica(model.url, backend.location, tmp_path, "b")
            try:
                # s2 is served by b first (b holds it in memory), then loops on a
                on_b = Harness(b.client, "anthropic", stream=False, session="s2")
                assert on_b.turn("hello", limit=1)[0][0] == 200
                on_a = Harness(a.client, "anthropic", stream=True, session="s2")
                on_a.history = list(on_b.history)
                replies = on_a.turn("now loop")
                assert "repeated-tool-call" in on_a.text_of(replies[-1][1])
                sent = len(model.requests)
                # b: its next turn is refused from the shared store, without the model
                on_b.history = list(on_a.history)
                status, error = on_b.turn("and again")[0]
                assert status == 400 and "tripwire halted session s2" in json.dumps(error)
                # a session b never served: restored halted at its first request
                fresh = Harness(b.client, "anthropic", stream=False, session="s2")
                fresh.history = list(on_a.history)
                assert fresh.turn("hi")[0][0] == 400
                assert len(model.requests) == sent
                # reset through b's operator route: a's next turn goes through
                reset = b.client.post("/tripwire/sessions/s2/guardrails/reset",
                                      headers={"authorization": "Bearer op-secret"})
                assert reset.status_code == 200, reset.text
                assert on_a.turn("go on", limit=1)[0][0] == 200
                assert len(model.requests) == sent + 1
            finally:
                a.stop()
                b.stop()
    finally:
        backend.drop()
