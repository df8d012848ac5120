"""Hooks fail closed on hostile input (issue 36): the files a hook reads are the agent's to
write (its transcript, a config file in its project, the hooks' window table), so each read is
bounded in size and time (``base.files.read_bounded``); a session whose transcript cannot be
read is still watched from its hook payloads; under ``enforce`` an error the hook cannot decide
past is a denial with a reason for the model and a line for the operator (below ``enforce``:
no decision, and the line); an over-size payload still meets its session's recorded halt.

Every hook test runs real processes, on both engines, through both clients: the Python
command (``tripwire hook claude-code``) and the native client (``tripwire-hook``) handing the
event to a resident server (``tripwire hook serve``), whose answer it prints.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_hooks import SESSION, Hook, halt_reason, pre, repeat_guidance

from tripwire.base.files import NotRead, read_bounded
from tripwire.cli.hook_closed import DENIED
from tripwire.harnesses.hooks._transcript import CHUNK, transcript_usage

CLIENT = Path(sys.executable).parent / "tripwire-hook"
GIB = 1 << 30


class NativeHook(Hook):
    """``tripwire-hook claude-code`` with ``$TRIPWIRE_HOOK_SOCKET`` naming a resident server:
    its own engine setting is broken, so an answer that decides came from the server."""

    def raw(self, stdin: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(CLIENT), self.harness, *args], input=stdin,
                              capture_output=True, text=True, env=self.env, timeout=60)


def _memory_capped() -> None:  # a hook that read a 60 GB file whole could not
    resource.setrlimit(resource.RLIMIT_AS, (2 * GIB, 2 * GIB))


class CappedHook(Hook):
    """The Python command with 2 GiB of address space: a read of a hostile file whole fails."""

    def raw(self, stdin: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tripwire", "hook", self.harness, *args],
                              input=stdin, capture_output=True, text=True, env=self.env,
                              timeout=60, preexec_fn=_memory_capped)


@pytest.fixture(params=["command", "native"])
def make_hook(request: pytest.FixtureRequest, tmp_path: Path,
              implementation: str) -> Iterator[Callable[..., Hook]]:
    """``make_hook(**env)``: a claude-code hook of this client and engine, ``env`` set in the
    process that decides (the command, or the resident server)."""
    servers: list[subprocess.Popen] = []

    def make(**env: str) -> Hook:
        store = tmp_path / f"state{len(servers)}" / "hooks.sqlite3"
        if request.param == "command":
            hook: Hook = CappedHook("claude-code", store, implementation)
            hook.env.update(TRIPWIRE_HOOK_SERVER="off", **env)
            return hook
        if not os.access(CLIENT, os.X_OK):
            pytest.skip(f"{CLIENT} is not installed (a build without a C++ compiler)")
        sock = tmp_path / f"hook{len(servers)}.sock"
        server_env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation,
                      "TRIPWIRE_HOOK_SOCKET": str(sock), **env}
        proc = subprocess.Popen([sys.executable, "-m", "tripwire", "hook", "serve", "--socket",
                                 str(sock), "--idle-timeout", "120"], env=server_env, cwd="/",
                                preexec_fn=_memory_capped)
        servers.append(proc)
        deadline = time.monotonic() + 30
        while not sock.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sock.exists(), "the hook server did not start"
        hook = NativeHook("claude-code", store, implementation)
        hook.env.update(TRIPWIRE_HOOK_SOCKET=str(sock), TRIPWIRE_IMPLEMENTATION="no-such")
        return hook

    yield make
    for proc in servers:
        proc.kill()
        proc.wait()


def call(n: int, transcript: Path | str | None) -> dict:
    """The same Bash call each time, its transcript at ``transcript``."""
    return {**pre(n), "transcript_path": None if transcript is None else str(transcript)}


def deny_reason(out: dict | None) -> str:
    assert out is not None and out["hookSpecificOutput"]["permissionDecision"] == "deny", out
    return str(out["hookSpecificOutput"]["permissionDecisionReason"])


def undecided(problem: str) -> str:
    return (f"[watchdog] tripwire could not decide on this tool call ({problem}), so it is "
            "denied: under enforce a call that is not observed does not run. Do not retry it "
            "now; end your turn with a short summary of where you are.")


# -- the scenario: a transcript truncated to 60G ----------------------------------------


def test_a_60g_sparse_transcript_of_seven_identical_calls_the_fifth_is_denied(
        make_hook: Callable[..., Hook], tmp_path: Path) -> None:
    """``truncate -s 60G transcript.jsonl`` made every hook call a ``MemoryError`` and no
    decision: the offset never advanced and seven identical calls all ran. Read bounded (the
    holes skipped), the session is watched: calls 1-4 run, the fifth halts, 6 and 7 stay
    denied, and no read of the file failed."""
    transcript = tmp_path / f"{SESSION}.jsonl"
    subprocess.run(["truncate", "-s", "60G", str(transcript)], check=True)
    hook = make_hook()
    answers = []
    for n in range(1, 8):
        done = hook.raw(json.dumps(call(n, transcript)))
        assert done.returncode == 0, done.stderr
        assert "MemoryError" not in done.stderr and "cannot be read" not in done.stderr
        answers.append(json.loads(done.stdout) if done.stdout.strip() else None)
    assert answers[:4] == [None] * 4
    assert answers[4] is not None and answers[4]["continue"] is False
    assert answers[4]["stopReason"] == halt_reason(hook.store)
    assert repeat_guidance() in deny_reason(answers[4])
    for later in answers[5:]:
        assert later is not None and later["continue"] is False
        assert later["stopReason"] == halt_reason(hook.store)
    assert transcript.stat().st_blocks == 0  # nothing was written into it


# -- a transcript that cannot be read: the payloads are still watched ---------------------------


def _fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "fifo.jsonl")
    return tmp / "fifo.jsonl"


def _device_link(tmp: Path) -> Path:
    (tmp / "zero.jsonl").symlink_to("/dev/zero")
    return tmp / "zero.jsonl"


@pytest.mark.parametrize(("kind", "make", "reason"), [
    ("fifo", _fifo, "is not a regular file (a FIFO, a device, a socket or a directory)"),
    ("dev-zero", lambda tmp: Path("/dev/zero"),
     "is not a regular file (a FIFO, a device, a socket or a directory)"),
    ("link-to-device", _device_link, "is a symbolic link (not followed)"),
])
def test_an_unreadable_transcript_is_watched_from_the_payloads(
        make_hook: Callable[..., Hook], tmp_path: Path, kind: str,
        make: Callable[[Path], Path], reason: str) -> None:
    """A FIFO (whose read would block), ``/dev/zero`` (a read that never ends) and a link to
    a device are refused at once; the operator is told once per session; the repeat loop is
    still halted at its fifth identical call."""
    transcript = make(tmp_path)
    hook = make_hook()
    lines = []
    for n in range(1, 5):
        done = hook.raw(json.dumps(call(n, transcript)))
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
        lines += done.stderr.splitlines()
    assert lines == [f"tripwire: the transcript cannot be read ({transcript}: {reason}): the "
                     "session is watched from its hook payloads alone, and its spend is not "
                     "counted"]
    done = hook.raw(json.dumps(call(5, transcript)))
    out = json.loads(done.stdout)
    assert out["continue"] is False and out["stopReason"] == halt_reason(hook.store)
    assert repeat_guidance() in deny_reason(out)


def test_an_endless_transcript_is_read_a_chunk_per_event(make_hook: Callable[..., Hook],
                                                          tmp_path: Path) -> None:
    """A transcript a process keeps appending to (a line that never ends) costs each event
    one bounded read; the loop is still halted at its fifth call."""
    transcript = tmp_path / "endless.jsonl"
    transcript.write_bytes(b"")
    with open(transcript, "ab") as sink:
        writer = subprocess.Popen(["yes", "x" * 4096], stdout=sink)
    try:
        hook = make_hook()
        for n in range(1, 5):
            done = hook.raw(json.dumps(call(n, transcript)))
            assert (done.returncode, done.stdout) == (0, ""), done.stderr
        out = json.loads(hook.raw(json.dumps(call(5, transcript))).stdout)
    finally:
        writer.kill()
        writer.wait()
    assert out["continue"] is False and out["stopReason"] == halt_reason(hook.store)


# -- a hostile config file: under enforce a denial, below it no decision ------------------------


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse-60g"])
def test_a_hostile_config_file_denies_under_enforce_and_fails_open_below(
        make_hook: Callable[..., Hook], tmp_path: Path, kind: str) -> None:
    config = tmp_path / "tripwire.toml"
    if kind == "fifo":
        os.mkfifo(config)
        problem = f"{config}: cannot read config file (is not a regular file (a FIFO, a " \
                  "device, a socket or a directory))"
    elif kind == "dev-zero":
        config.symlink_to("/dev/zero")  # a config file kept as a link is followed
        problem = f"{config}: cannot read config file (is not a regular file (a FIFO, a " \
                  "device, a socket or a directory))"
    else:
        subprocess.run(["truncate", "-s", "60G", str(config)], check=True)
        problem = f"{config}: config file is over 1048576 bytes: not a config"
    hook = make_hook()
    done = hook.raw(json.dumps(call(1, None)), "--config", str(config))
    assert done.returncode == 0
    assert deny_reason(json.loads(done.stdout)) == undecided(problem)
    assert done.stderr.splitlines() == [f"tripwire hook claude-code: {problem}; {DENIED}"]
    done = hook.raw(json.dumps(call(2, None)), "--config", str(config), "--mode", "warn")
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.splitlines() == [f"tripwire hook claude-code: {problem}; no decision"]


# -- the hooks' window table -------------------------------------------------------------------


def test_a_huge_window_row_is_not_read_and_reads_as_a_fresh_window(
        make_hook: Callable[..., Hook]) -> None:
    """The window table is not sealed (the agent can write it in the same-user setup): a row
    past ``MAX_STATE`` is not loaded (a fresh window), and the loop after it still halts."""
    hook = make_hook()
    assert hook(call(1, None)) is None
    with sqlite3.connect(hook.store) as db:
        db.execute("UPDATE hook_sessions SET state = zeroblob(512 << 20)")
    for n in range(2, 6):
        assert hook(call(n, None)) is None
    out = hook(call(6, None))
    assert out is not None and out["stopReason"] == halt_reason(hook.store)


# -- an error the hook cannot decide past -------------------------------------------------------

_FAULT = """\
import os
fault = os.environ.get("TRIPWIRE_TEST_FAULT")
if fault:
    from tripwire.harnesses.hooks import _session

    def apply(self, event, usage=()):
        if event.kind == "call":
            raise {"memory": MemoryError(), "bug": RuntimeError("an unexpected bug")}[fault]
        return real(self, event, usage)

    real, _session.HookSession.apply = _session.HookSession.apply, apply
"""


@pytest.mark.parametrize(("fault", "problem"), [("memory", "MemoryError"),
                                                ("bug", "an unexpected bug")])
def test_an_error_deciding_denies_under_enforce_and_fails_open_below(
        make_hook: Callable[..., Hook], tmp_path: Path, fault: str, problem: str) -> None:
    """A ``MemoryError`` or any unexpected error while deciding a call (injected into the
    process that decides, through ``sitecustomize``): under enforce a denial with a reason
    for the model and a line for the operator, never a silent allow; below, no decision and
    the line."""
    (tmp_path / "inject").mkdir()
    (tmp_path / "inject" / "sitecustomize.py").write_text(_FAULT)
    path = os.pathsep.join([str(tmp_path / "inject"), os.environ.get("PYTHONPATH", "")])
    hook = make_hook(PYTHONPATH=path, TRIPWIRE_TEST_FAULT=fault)
    done = hook.raw(json.dumps(call(1, None)))
    assert done.returncode == 0
    assert json.loads(done.stdout) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": undecided(problem)}}
    assert done.stderr.splitlines() == [f"tripwire hook claude-code: {problem}; {DENIED}"]
    done = hook.raw(json.dumps(call(2, None)), "--mode", "warn")
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.splitlines() == [f"tripwire hook claude-code: {problem}; no decision"]


# -- an over-size payload ----------------------------------------------------------------------


def test_an_over_size_payload_meets_the_recorded_halt(make_hook: Callable[..., Hook]) -> None:
    """A payload over 16 MiB is never decoded whole: its leading members name the session,
    whose recorded halt denies it; a session without one is denied under enforce (a call
    tripwire cannot observe) and fails open below, with one line each."""
    hook = make_hook()
    for n in range(1, 6):
        hook(call(n, None))
    huge = call(6, None)
    huge["tool_input"] = {"command": "cat > big", "content": "x" * (17 << 20)}
    done = hook.raw(json.dumps(huge))
    assert done.returncode == 0
    assert json.loads(done.stdout) == {
        "continue": False,
        "stopReason": halt_reason(hook.store).split(" To resume:")[0].removeprefix(
            "tripwire: "),
        "systemMessage": halt_reason(hook.store).split(" To resume:")[0].removeprefix(
            "tripwire: "),
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": "[watchdog] This session was halted for a runaway "
                                        "pattern and refuses further tool calls."}}
    assert done.stderr.splitlines() == [
        "tripwire hook claude-code: stdin is over 16777216 characters; the store records a "
        "halt, so the call is denied"]
    other = {**huge, "session_id": "another-session"}
    problem = ("stdin is over 16777216 characters (or too large to decode): not a payload "
               "tripwire can observe")
    done = hook.raw(json.dumps(other))
    assert deny_reason(json.loads(done.stdout)) == undecided(problem)
    assert done.stderr.splitlines() == [f"tripwire hook claude-code: {problem}; {DENIED}"]
    done = hook.raw(json.dumps(other), "--mode", "warn")
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.splitlines() == [f"tripwire hook claude-code: {problem}; no decision"]


# -- bounded in time: a read that blocks is answered for ----------------------------------------


def test_a_read_that_blocks_is_denied_at_the_deadline(tmp_path: Path,
                                                      implementation: str) -> None:
    """A FIFO in place of the hooks' lock file blocks its open (a lock file is opened, never
    read: ``tests/test_anchor_bounded.py`` has the anchor file, which is read bounded): the
    command's deadline (its ``--wait`` + 3 s) answers for the stuck event: under enforce a
    denial, below it no decision. This is the Python command's timer."""
    os.mkfifo(tmp_path / "hooks.sqlite3.lock")
    hook = Hook("claude-code", tmp_path / "hooks.sqlite3", implementation)
    hook.env.update(TRIPWIRE_HOOK_SERVER="off")
    problem = "no decision within 3.5 s"
    done = hook.raw(json.dumps(call(1, None)), "--wait", "0.5")
    assert done.returncode == 0
    assert deny_reason(json.loads(done.stdout)) == undecided(problem)
    assert done.stderr.splitlines()[-1] == f"tripwire hook claude-code: {problem}; {DENIED}"
    done = hook.raw(json.dumps(call(2, None)), "--wait", "0.5", "--mode", "warn")
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.splitlines()[-1] == f"tripwire hook claude-code: {problem}; no decision"


# -- the bounded reader itself -----------------------------------------------------------------


def test_read_bounded_refuses_what_is_not_a_regular_file_of_its_owner(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to("/dev/zero")
    (tmp_path / "file").write_bytes(b"abc\n")
    for path, reason in [
        (tmp_path / "fifo", "is not a regular file (a FIFO, a device, a socket or a "
                            "directory)"),
        (Path("/dev/zero"), "is not a regular file (a FIFO, a device, a socket or a "
                            "directory)"),
        (tmp_path / "link", "is a symbolic link (not followed)"),
        (tmp_path, "is not a regular file (a FIFO, a device, a socket or a directory)"),
        (tmp_path / "file", f"belongs to uid {os.getuid()}, not to uid {os.getuid() + 1}"),
    ]:
        with pytest.raises(NotRead) as caught:
            read_bounded(str(path), 10, owner=os.getuid() + 1 if path.name == "file" else None)
        assert str(caught.value) == f"{path}: {reason}"
    with pytest.raises(NotRead, match="is not a regular file"):
        read_bounded(str(tmp_path / "link"), 10, follow=True)  # followed, still a device
    assert read_bounded(str(tmp_path / "file"), 2) == (b"ab", 0, 4)
    assert read_bounded(str(tmp_path / "file"), 10, 2) == (b"c\n", 2, 4)


def test_a_sparse_transcripts_holes_are_skipped_and_a_line_past_a_chunk_is_dropped(
        tmp_path: Path) -> None:
    """Usage before a 60 GB hole is read, the hole costs nothing, and a line longer than a
    chunk (no response's line is) is skipped whole across invocations, never read again."""
    line = {"type": "assistant", "message": {
        "id": "msg_1", "model": "claude-sonnet-4-5", "role": "assistant",
        "usage": {"input_tokens": 10, "output_tokens": 5}}}
    user = json.dumps({"type": "user", "message": {"role": "user", "content": "go"}})
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(f"{json.dumps(line)}\n{user}\n".encode())
    size = transcript.stat().st_size
    with open(transcript, "r+b") as f:
        f.truncate(60 * GIB)
    memo: dict = {}
    usage, offset = transcript_usage("claude-code", str(transcript), 0, memo)
    assert [u["input_tokens"] for u in usage] == [10] and offset == size
    # the rest of the hole's first block (zeros, no newline) is one chunk dropped, then the
    # hole to the end is skipped without a read
    assert transcript_usage("claude-code", str(transcript), offset, memo) == (
        [], offset + CHUNK)
    assert transcript_usage("claude-code", str(transcript), offset + CHUNK, memo) == (
        [], 60 * GIB)
    long = tmp_path / "long.jsonl"
    long.write_bytes(b"x" * (CHUNK + 100) + f"\n{json.dumps(line)}\n{user}\n".encode())
    memo = {}
    usage, offset = transcript_usage("claude-code", str(long), 0, memo)
    assert (usage, offset, memo.get("skip")) == ([], CHUNK, True)
    usage, offset = transcript_usage("claude-code", str(long), offset, memo)
    assert [u["input_tokens"] for u in usage] == [10] and offset == long.stat().st_size
    assert "skip" not in memo
