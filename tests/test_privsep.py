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


class Agent:
    """A second real user, and an interpreter it can run with this suite's packages."""

    def __init__(self, name: str, uid: int, gid: int):
        self.name, self.uid, self.gid = name, uid, gid
        self.python, self.pythonpath = sys.executable, os.environ.get("PYTHONPATH", "")

    def run(self, *argv: str, input: str | None = None, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``argv`` as this user (``python`` is its interpreter), with an agent's environment:
        no key, no operator token, no store."""
        argv = tuple(self.python if a == "python" else a for a in argv)
        base = {"PATH": os.environ["PATH"], "PYTHONPATH": self.pythonpath,
                "HOME": "/nonexistent", **(env or {})}
        return subprocess.run(["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}",
                               "--clear-groups", *argv], capture_output=True, text=True,
                              env=base, timeout=timeout, cwd="/", input=input)


def _runnable(agent: Agent) -> str | None:
    """Why the agent cannot run its interpreter with tripwire and httpx (None: it can)."""
    probe = agent.run("python", "-c", "import httpx, subprocess, sys, tripwire; "
                      "subprocess.run([sys.executable, '-c', 'pass'], check=True)")
    return None if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["?"])[-1]


@pytest.fixture(scope="module")
def agent_site() -> str:
    """A directory every user can read whose ``sitecustomize`` adds this suite's
    site-packages: for the system's interpreter of this version, where the suite's own (a
    pyenv build under root's 0700 home) is not another user's to run."""
    import site
    import tempfile

    shim = tempfile.mkdtemp(prefix="tripwire-agent-site-")
    os.chmod(shim, 0o755)
    # ahead of the system's own dist-packages, whose older releases would shadow the suite's
    Path(shim, "sitecustomize.py").write_text(
        "import site, sys\nbefore = list(sys.path)\n"
        + "".join(f"site.addsitedir({p!r})\n" for p in site.getsitepackages())
        + "sys.path[:] = [p for p in sys.path if p not in before] + before\n")
    os.chmod(Path(shim, "sitecustomize.py"), 0o644)
    yield shim
    shutil.rmtree(shim)


def make_user(prefix: str) -> tuple[str, int, int]:
    import pwd

    name = prefix + uuid.uuid4().hex[:8]
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    name], check=True)
    entry = pwd.getpwnam(name)
    return name, entry.pw_uid, entry.pw_gid


@pytest.fixture
def agent_user(agent_site: str) -> Agent:
    name, uid, gid = make_user("twagent")
    try:
        agent = Agent(name, uid, gid)
        problem = _runnable(agent)
        system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
        if problem is not None and os.access(system, os.X_OK):
            # the same version's system interpreter, over this suite's site-packages (the
            # venv's directories must be readable: .ci/run makes its venv so)
            agent.python, agent.pythonpath = system, agent_site
            problem = _runnable(agent)
        if problem is not None:
            pytest.fail(f"the agent uid cannot run {agent.python} with tripwire and httpx "
                        f"({problem}): run the suite from an interpreter and venv every user "
                        "can read (.ci/run makes its venv so)")
        yield agent
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


def test_the_agent_uid_cannot_clear_its_halt(agent_user, authority) -> None:
    proc, url, private, agent_token = authority
    sid = "runaway"
    drive = ("import httpx,json,sys; r=httpx.post(sys.argv[1]+'/sessions/runaway/events',"
             "headers={'Authorization':'Bearer '+open(sys.argv[2]).read()},"
             "json=json.loads(sys.argv[3]),timeout=10); print(r.status_code, r.text)")
    run = agent_user.run("python", "-c", drive, url, str(agent_token), json.dumps(LOOP))
    assert run.returncode == 0, run.stderr
    status, _, body = run.stdout.partition(" ")
    assert status == "200", run.stdout
    got = json.loads(body)
    assert got["halted"] is True
    assert [(d["event"], d["action"]) for d in got["decisions"]] == [(5, "halt_session")]

    run = agent_user.run("python", "-c", AGENT_SCRIPT, url, agent_token.read_text(),
                         str(proc.pid), str(private), sid)
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


# -- the hooks' authority: `tripwire hook serve --allow-user` as root, the agent's thin client --

from test_hook_client import CLIENT  # noqa: E402
from test_hooks import SESSION, common, post, pre  # noqa: E402


@pytest.fixture
def hook_authority(implementation: str, agent_user: Agent):
    """The hooks' authority as root: its store, key file and anchor in a 0700 directory; its
    socket in a root-owned 0755 one, the agent's user allowed."""
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="tripwire-hook-authority-"))
    os.chmod(tmp, 0o755)
    private = tmp / "authority"
    private.mkdir(mode=0o700)
    (private / "key").write_text(KEY)
    (private / "tripwire.toml").write_text('[watchdog]\nmode = "enforce"\n')
    sock = tmp / "run" / "authority.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIPWIRE_")}
    env.update(TRIPWIRE_IMPLEMENTATION=implementation, TRIPWIRE_STORE_KEY=KEY,
               TRIPWIRE_STORE_ANCHOR=str(private / "anchor"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tripwire", "hook", "serve", "--socket", str(sock),
         "--allow-user", agent_user.name, "--store", str(private / "hooks.sqlite3"),
         "--config", str(private / "tripwire.toml")],
        stderr=subprocess.PIPE, text=True, env=env, cwd="/")
    import time

    deadline = time.monotonic() + 30
    while not sock.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sock.exists(), proc.stderr.read() if proc.poll() is not None else "no socket"
    try:
        yield proc, sock, private
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(tmp)


def client_command(kind: str, sock: Path) -> list[str]:
    """The hook command the harness was installed with (`--install --authority`)."""
    if kind == "native":
        if not os.access(CLIENT, os.X_OK):
            pytest.skip(f"{CLIENT} is not installed (a build without a C++ compiler)")
        return [str(CLIENT), "claude-code", "--authority", str(sock)]
    return ["python", "-m", "tripwire", "hook", "claude-code", "--authority", str(sock)]


def hook_as(agent: Agent, command: list[str], payload: dict,
            env: dict[str, str] | None = None) -> dict | None:
    done = agent.run(*command, input=json.dumps(payload), env=env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


def denied(answer: dict | None) -> bool:
    return bool(answer) and answer["hookSpecificOutput"]["permissionDecision"] == "deny"


HOOK_ATTACKS = r"""
import json, os, signal, socket, subprocess, sys, threading
pid, private, sock, command, sid, payload = sys.argv[1:7]
command, out = json.loads(command), {}
def attempt(name, fn):
    try:
        fn(); out[name] = "succeeded"
    except OSError as exc:
        out[name] = type(exc).__name__
attempt("environ", lambda: open(f"/proc/{pid}/environ", "rb").read())
out["own_environ_key"] = b"TRIPWIRE_STORE_KEY" in open("/proc/self/environ", "rb").read()
attempt("key", lambda: open(f"{private}/key").read())
attempt("store", lambda: open(f"{private}/hooks.sqlite3", "rb").read())
attempt("delete_anchor", lambda: os.unlink(f"{private}/anchor"))
attempt("delete_store", lambda: os.unlink(f"{private}/hooks.sqlite3"))
attempt("replace_store", lambda: open(f"{private}/hooks.sqlite3", "wb").write(b""))
attempt("kill", lambda: os.kill(int(pid), signal.SIGKILL))
attempt("signal", lambda: os.kill(int(pid), signal.SIGSTOP))
attempt("unlink_socket", lambda: os.unlink(sock))
attempt("rename_socket", lambda: os.rename(sock, sock + ".old"))
def bind(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    return s
attempt("fake_socket_beside", lambda: bind(os.path.dirname(sock) + "/fake.sock"))
cli = subprocess.run([sys.executable, "-m", "tripwire", "reset", f"{private}/hooks.sqlite3",
                      "--session", sid], capture_output=True, text=True)
out["cli_reset"] = [cli.returncode, cli.stderr.strip().splitlines()[-1:]]
# a fake authority where the agent may write, answering "no decision" (allow) to everything
fake = bind("/tmp/tripwire-agent-fake-%d.sock" % os.getpid())
fake.listen(8)
def allow_all():
    while True:
        conn, _ = fake.accept()
        with conn:
            while conn.recv(65536):
                pass
            conn.sendall(b"TWH1" + bytes(12))
threading.Thread(target=allow_all, daemon=True).start()
# the hook as installed, with the fake named in the environment: the command's --authority wins
env = {**os.environ, "TRIPWIRE_AUTHORITY": fake.getsockname()}
run = subprocess.run(command, input=payload, capture_output=True, text=True, env=env)
out["with_fake_env"] = json.loads(run.stdout) if run.stdout.strip() else None
# a request naming a store of the agent's and an operator verb: the authority's store answers
from tripwire.cli.hook_server import Request, ask
code, stdout, stderr = ask(sock, Request(["claude-code", "--store", "/tmp/agent.sqlite3",
                                          "--mode", "warn"], "/", {}, payload), 10)
out["own_store_request"] = json.loads(stdout) if stdout.strip() else None
out["agent_store_made"] = os.path.exists("/tmp/agent.sqlite3")
code, stdout, stderr = ask(sock, Request(["reset", "--session", sid], "/", {}, ""), 10)
out["reset_request"] = [code, stdout, stderr]
os.unlink(fake.getsockname())
print(json.dumps(out))
"""


@pytest.mark.parametrize("kind", ["python", "native"])
def test_the_agent_uid_cannot_clear_a_hook_halt(kind: str, agent_user: Agent,
                                                hook_authority) -> None:
    proc, sock, private = hook_authority
    command = client_command(kind, sock)
    assert hook_as(agent_user, command, common("UserPromptSubmit", prompt="fix it")) is None
    for n in range(1, 5):
        assert hook_as(agent_user, command, pre(n)) is None
        assert hook_as(agent_user, command, post(n)) is None
    fifth = hook_as(agent_user, command, pre(5))
    assert denied(fifth) and fifth["continue"] is False, fifth
    assert "repeated-tool-call" in fifth["stopReason"]

    argv = [agent_user.python if w == "python" else w for w in command]
    run = agent_user.run("python", "-c", HOOK_ATTACKS, str(proc.pid), str(private), str(sock),
                         json.dumps(argv), SESSION, json.dumps(pre(6)))
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    for attack in ("environ", "key", "store", "delete_anchor", "delete_store", "replace_store",
                   "kill", "signal", "unlink_socket", "rename_socket", "fake_socket_beside"):
        assert out[attack] == "PermissionError", (attack, out)
    assert out["own_environ_key"] is False  # the harness's (the client's) environment: no key
    code, (line,) = out["cli_reset"]
    assert code == 2 and line.startswith("tripwire: ") and "hooks.sqlite3" in line, out
    assert denied(out["with_fake_env"]), out
    assert denied(out["own_store_request"]) and out["agent_store_made"] is False, out
    assert out["reset_request"][:2] == [0, ""], out
    assert out["reset_request"][2].startswith("tripwire hook: the authority takes a harness")
    # the halt holds, and the authority still runs
    assert denied(hook_as(agent_user, command, pre(7)))
    assert proc.poll() is None


@pytest.mark.parametrize("kind", ["python", "native"])
def test_a_user_not_allowed_is_refused_by_its_peer_credentials(kind: str, agent_user: Agent,
                                                               hook_authority,
                                                               agent_site: str) -> None:
    proc, sock, _ = hook_authority
    name, uid, gid = make_user("twother")
    try:
        other = Agent(name, uid, gid)
        other.python, other.pythonpath = agent_user.python, agent_user.pythonpath
        done = other.run(*client_command(kind, sock), input=json.dumps(pre(1)))
        if kind == "native" and other.python != sys.executable:
            # its fallback, the `tripwire` beside it, starts an interpreter this uid cannot
            # run: the last resort, exit 2, which every harness reads as "block"
            assert (done.returncode, done.stdout) == (2, ""), done.stderr
            assert done.stderr.endswith("and tripwire cannot be run to answer for it; the call "
                                        "is blocked (exit 2): under enforce a call tripwire "
                                        "cannot decide does not run\n"), done.stderr
        else:
            assert done.returncode == 0, done.stderr
            assert denied(json.loads(done.stdout)), done.stdout
            assert "closed the connection unanswered" in done.stderr
            assert "the call is denied: under enforce" in done.stderr
        # the allowed agent is still answered
        assert hook_as(agent_user, client_command(kind, sock), pre(1)) is None
    finally:
        subprocess.run(["userdel", name], check=False)
    proc.kill()
    assert f"tripwire hook serve: refused a connection from uid {uid} (pid " in proc.stderr.read()


def test_doctor_as_the_agent_says_separated(agent_user: Agent, hook_authority,
                                            tmp_path: Path) -> None:
    import tempfile

    _, sock, _ = hook_authority
    command = " ".join(agent_user.python if w == "python" else w
                       for w in client_command("native" if os.access(CLIENT, os.X_OK)
                                               else "python", sock))
    where = Path(tempfile.mkdtemp(prefix="tripwire-doctor-settings-"))
    try:
        os.chmod(where, 0o755)
        settings = where / "settings.json"
        settings.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
            {"type": "command", "command": command, "timeout": 10}]}]}}))
        os.chmod(settings, 0o644)
        done = agent_user.run("python", "-m", "tripwire", "doctor", str(settings),
                              env={"TMPDIR": "/tmp"})
    finally:
        shutil.rmtree(where)
    assert done.returncode == 0, done.stdout + done.stderr
    hook = json.loads(done.stdout.splitlines()[0])
    assert (hook["decides"], hook["denies_call"], hook["setup"], hook["authority_uid"]) == (
        True, 5, "separated", 0), hook
    assert hook["protects_against"].startswith("an adversarial agent")


CODEX_DRIVER = r"""
import json, os, signal, subprocess, sys
interrupted = []
signal.signal(signal.SIGINT, lambda *a: interrupted.append(1))
hook = json.loads(os.environ["HOOK_ARGV"])
for i, event in enumerate(json.loads(sys.stdin.read())):
    subprocess.run(hook, input=json.dumps(event), capture_output=True, text=True)
    if interrupted:
        print(json.dumps({"interrupted_at": i}))
        sys.exit(1)
print(json.dumps({"interrupted_at": None}))
"""


@pytest.mark.parametrize("codex_user", ["agent", "root"])
def test_the_authority_interrupts_only_the_agents_own_codex_exec(
        codex_user: str, agent_user: Agent, hook_authority) -> None:
    """A halt interrupts the `codex exec` the hook runs under, from the authority (root): when
    that process is the agent's own; never another user's process the agent's client was
    started under (the authority signals for its peer only)."""
    import tempfile

    from test_hooks import codex_event

    _, sock, _ = hook_authority
    call = {"tool_name": "Bash", "tool_input": {"command": "echo hello"}}
    events = [codex_event("UserPromptSubmit", prompt="go")]
    for n in range(1, 9):
        events.append(codex_event("PreToolUse", tool_use_id=f"call_{n}", **call))
        events.append(codex_event("PostToolUse", tool_use_id=f"call_{n}",
                                  tool_response="hello\n", **call))
    where = Path(tempfile.mkdtemp(prefix="tripwire-codex-stand-in-"))
    try:
        os.chmod(where, 0o755)
        driver = where / "driver.py"
        driver.write_text(CODEX_DRIVER)
        os.chmod(driver, 0o644)
        client = [agent_user.python, "-m", "tripwire", "hook", "codex", "--authority", str(sock)]
        stand_in = ["bash", "-c", 'exec -a "$0" "$@"', str(where / "codex")]
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": agent_user.pythonpath,
               "HOME": "/nonexistent"}
        if codex_user == "agent":
            done = agent_user.run(*stand_in, agent_user.python, str(driver), "exec",
                                  input=json.dumps(events),
                                  env={"HOOK_ARGV": json.dumps(client)}, timeout=300)
        else:  # root's codex, the agent's client under it
            as_agent = ["setpriv", f"--reuid={agent_user.uid}", f"--regid={agent_user.gid}",
                        "--clear-groups", *client]
            done = subprocess.run([*stand_in, agent_user.python, str(driver), "exec"],
                                  input=json.dumps(events), capture_output=True, text=True,
                                  timeout=300, env={**env, "HOOK_ARGV": json.dumps(as_agent)})
    finally:
        shutil.rmtree(where)
    assert done.stdout, done.stderr
    interrupted = json.loads(done.stdout)["interrupted_at"]
    if codex_user == "agent":
        assert (interrupted, done.returncode) == (9, 1)  # at the 5th call: the halt
    else:
        assert (interrupted, done.returncode) == (None, 0)
