"""Privilege separation, from the attacker's side: the authority (`tripwire serve` with its
store, secret key, anchor and operator token) runs as root; the agent is a second real uid
holding only the events-only agent token. The agent drives a runaway session to its halt, then
tries every way around it (read serve's environment, the key, the store; reset with the CLI;
reset over HTTP with no token or its own; delete the anchor or store; signal serve) — each
fails, and the halt holds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="tripwire serve needs the serve extra (starlette)")
pytest.importorskip("httpx", reason="the agent talks HTTP with httpx")

from tests.test_serve import LOOP, stop  # noqa: E402

if os.geteuid() != 0:
    pytest.skip("privilege separation needs root to make a second user", allow_module_level=True)
for tool in ("useradd", "userdel", "setpriv"):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is missing: cannot make the agent another uid",
                    allow_module_level=True)

OPERATOR = "operator token " + uuid.uuid4().hex
AGENT = "agent token " + uuid.uuid4().hex
KEY = "secret store key " + uuid.uuid4().hex


@pytest.fixture
def agent_user() -> tuple[int, int]:
    import pwd

    name = "twagent" + uuid.uuid4().hex[:8]
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    name], check=True)
    try:
        entry = pwd.getpwnam(name)
        # the agent runs this interpreter and this tree: both must be readable by another uid
        # (an interpreter under root's 0700 home, as pyenv's, is not: the test cannot be made)
        probe = as_agent(entry.pw_uid, entry.pw_gid, sys.executable, "-c",
                         "import httpx, subprocess, sys, tripwire; "
                         "subprocess.run([sys.executable, '-c', 'pass'], check=True)")
        if probe.returncode != 0:
            pytest.skip(f"the agent uid cannot run {sys.executable} with tripwire and httpx "
                        f"({(probe.stderr.strip().splitlines() or ['?'])[-1]}): run the suite "
                        "from an interpreter and venv every user can read")
        yield entry.pw_uid, entry.pw_gid
    finally:
        subprocess.run(["userdel", name], check=False)


@pytest.fixture
def authority(implementation: str):
    """serve as root over a private 0700 dir: store, key file, anchor, both tokens."""
    import tempfile

    # not pytest's tmp_path (its root is 0700): the agent must reach the private dir's door,
    # so that every refusal below is the private dir's own, not a parent's
    tmp_path = Path(tempfile.mkdtemp(prefix="tripwire-privsep-"))
    os.chmod(tmp_path, 0o755)
    private = tmp_path / "authority"
    private.mkdir(mode=0o700)
    (private / "key").write_text(KEY)
    (private / "token").write_text(OPERATOR)
    agent_token = tmp_path / "agent-token"  # the agent's own credential: it may read it
    agent_token.write_text(AGENT)
    os.chmod(agent_token, 0o644)
    (private / "tripwire.toml").write_text(
        '[watchdog]\nmode = "enforce"\n[cost]\nmax_session_usd = 10.0\n')
    env = {k: v for k, v in os.environ.items() if k != "TRIPWIRE_SERVE_TOKEN"}
    env.update(TRIPWIRE_IMPLEMENTATION=implementation, TRIPWIRE_STORE_KEY=KEY,
               TRIPWIRE_STORE_ANCHOR=str(private / "anchor"))
    store = private / "serve.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tripwire", "serve", "--port", "0", "--store", str(store),
         "--config", str(private / "tripwire.toml"), "--token-file", str(private / "token"),
         "--agent-token-file", str(agent_token)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    assert line.startswith("tripwire serve: listening on http://127.0.0.1:"), (
        line, proc.stderr.read() if proc.poll() is not None else "")
    try:
        yield proc, line.rsplit(" ", 1)[1].strip(), private, agent_token
    finally:
        stop(proc)
        shutil.rmtree(tmp_path)


AGENT_SCRIPT = r"""
import json, os, signal, subprocess, sys
import httpx
url, token, pid, private, sid = sys.argv[1:6]
out = {}
def attempt(name, fn):
    try:
        fn(); out[name] = "succeeded"
    except OSError as exc:
        out[name] = type(exc).__name__
attempt("environ", lambda: open(f"/proc/{pid}/environ", "rb").read())
attempt("key", lambda: open(f"{private}/key").read())
attempt("store", lambda: open(f"{private}/serve.db", "rb").read())
attempt("delete_anchor", lambda: os.unlink(f"{private}/anchor"))
attempt("delete_store", lambda: os.unlink(f"{private}/serve.db"))
attempt("replace_store", lambda: open(f"{private}/serve.db", "wb").write(b""))
attempt("kill", lambda: os.kill(int(pid), signal.SIGTERM))
cli = subprocess.run([sys.executable, "-m", "tripwire", "reset", f"{private}/serve.db",
                      "--session", sid], capture_output=True, text=True)
out["cli_reset"] = [cli.returncode, cli.stderr.strip().splitlines()[-1:]]
with httpx.Client(base_url=url, timeout=10) as http:
    reset = f"/sessions/{sid}/guardrails/reset"
    out["reset_no_token"] = http.post(reset).status_code
    agent = {"Authorization": f"Bearer {token}"}
    out["reset_agent_token"] = http.post(reset, headers=agent).status_code
    out["raise_agent_token"] = http.post(f"/tasks/{sid}/budget", headers=agent,
                                         json={"raise": {"steps": 1000}}).status_code
    r = http.post(f"/sessions/{sid}/events", headers=agent,
                  json={"type": "call", "name": "read_file", "args": {"path": "a.py"}})
    out["next"] = [d["action"] for d in r.json()["decisions"]]
    out["status"] = http.get(f"/sessions/{sid}/guardrails", headers=agent).json()["halted"]
print(json.dumps(out))
"""


def as_agent(uid: int, gid: int, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
           "HOME": "/nonexistent"}  # the agent's environment: no key, no operator token
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                           *argv], capture_output=True, text=True, env=env, timeout=120,
                          cwd="/")


def test_the_agent_uid_cannot_clear_its_halt(agent_user, authority) -> None:
    uid, gid = agent_user
    proc, url, private, agent_token = authority
    sid = "runaway"
    drive = ("import httpx,json,sys; r=httpx.post(sys.argv[1]+'/sessions/runaway/events',"
             "headers={'Authorization':'Bearer '+open(sys.argv[2]).read()},"
             "json=json.loads(sys.argv[3]),timeout=10); print(r.status_code, r.text)")
    run = as_agent(uid, gid, sys.executable, "-c", drive, url, str(agent_token),
                   json.dumps(LOOP))
    assert run.returncode == 0, run.stderr
    status, _, body = run.stdout.partition(" ")
    assert status == "200", run.stdout
    got = json.loads(body)
    assert got["halted"] is True
    assert [(d["event"], d["action"]) for d in got["decisions"]] == [(5, "halt_session")]

    run = as_agent(uid, gid, sys.executable, "-c", AGENT_SCRIPT, url,
                   agent_token.read_text(), str(proc.pid), str(private), sid)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    for attack in ("environ", "key", "store", "delete_anchor", "delete_store",
                   "replace_store", "kill"):
        assert out[attack] == "PermissionError", (attack, out)
    # the agent cannot even see the store behind the 0700 dir: a one-line refusal, exit 2
    code, (line,) = out["cli_reset"]
    assert code == 2 and line.startswith("tripwire: ") and "serve.db" in line, out
    assert (out["reset_no_token"], out["reset_agent_token"], out["raise_agent_token"]) == (
        401, 403, 403)
    assert out["next"] == ["halt_session"] and out["status"] is True, out
    assert proc.poll() is None  # serve still runs


def test_the_operator_token_still_resets(agent_user, authority) -> None:
    import httpx

    proc, url, _, agent_token = authority
    agent = {"Authorization": f"Bearer {AGENT}"}
    with httpx.Client(base_url=url, timeout=10) as http:
        assert http.post("/sessions/s/events", json=LOOP, headers=agent).json()["halted"]
        r = http.post("/sessions/s/guardrails/reset", headers=agent)
        assert r.status_code == 403
        assert r.json() == {"error": "the agent token may not use reset: "
                                     "it needs the operator's token"}
        r = http.post("/sessions/s/guardrails/reset",
                      headers={"Authorization": f"Bearer {OPERATOR}"})
        assert r.status_code == 200
        assert http.get("/sessions/s/guardrails", headers=agent).json()["halted"] is False
