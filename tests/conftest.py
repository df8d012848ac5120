"""Shared test fixtures.

Every behavioural test takes the ``implementation`` fixture and so runs twice: against the
native core and against the pure-Python reference. ``TRIPWIRE_TEST_IMPLEMENTATIONS=python``
restricts the run (for working on the reference before the core is built); by default a native
core that fails to import is an error, never a silent skip.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tripwire.engine import select as _engine

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CONFORMANCE = SHARED / "conformance"
CORPUS = SHARED / "corpus"

_selected = os.environ.get("TRIPWIRE_TEST_IMPLEMENTATIONS", "native,python")
IMPLEMENTATIONS = [i.strip() for i in _selected.split(",") if i.strip()]


def stop_hook_servers(runtime: Path) -> None:
    """Ends the resident hook servers the native client started under ``runtime`` (its
    ``$XDG_RUNTIME_DIR``): each holds ``<socket>.lock`` with its process id inside."""
    import signal
    import time

    pids = []
    for lock in runtime.glob("tripwire/hook-*.sock.lock"):
        text = lock.read_text().strip()
        if text.isdigit() and int(text) > 0:
            pids.append(int(text))
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if Path(f"/proc/{p}").exists() and
                not Path(f"/proc/{p}/stat").read_text().split(") ")[-1].startswith("Z")]
        time.sleep(0.05)


@pytest.fixture(scope="session", autouse=True)
def _no_stray_hook_servers(tmp_path_factory: pytest.TempPathFactory):
    """The native hook client starts a resident server when none listens (and none is turned
    off): in the suite none is started unless a test asks for one (TRIPWIRE_HOOK_SERVER
    removed from its environment), and any that is lives in the suite's own runtime directory
    and is ended with it."""
    runtime = tmp_path_factory.mktemp("runtime")
    runtime.chmod(0o700)
    saved = {k: os.environ.get(k) for k in ("XDG_RUNTIME_DIR", "TRIPWIRE_HOOK_SERVER")}
    os.environ.update(XDG_RUNTIME_DIR=str(runtime), TRIPWIRE_HOOK_SERVER="off")
    yield runtime
    stop_hook_servers(runtime)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(params=IMPLEMENTATIONS)
def implementation(request: pytest.FixtureRequest) -> str:
    name = request.param
    _engine.load(name)  # raises ImportError with a clear message if the core is not built
    return name


def need_shared(*parts: str) -> Path:
    """A path under ../shared, skipping the calling test module with a clear message if absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(
            f"{path} is missing: this test needs the read-only ../shared folder beside the "
            "project (conformance data and recorded corpus)",
            allow_module_level=True,
        )
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def feed(watchdog: Any, event: dict[str, Any]) -> tuple:
    """Send one conformance-format event ({"kind": ...}) to a Watchdog."""
    kind = event["kind"]
    if kind == "call":
        return watchdog.observe_call(event["name"], event["args"])
    if kind == "result":
        return watchdog.observe_result(
            event.get("name", ""),
            error=event.get("error"),
            no_op=event.get("no_op", False),
            payload=event.get("payload"),
        )
    if kind == "text":
        return watchdog.observe_text(event["text"])
    if kind in ("turn_end", "turn_start"):  # both are turn boundaries (SPEC §10.5)
        return watchdog.end_turn()
    if kind == "reset":
        return watchdog.reset()
    raise AssertionError(f"unknown event kind {kind!r}")


def in_threads(work: Callable[[int], object], threads: int = 4) -> list[BaseException]:
    """Run work(0..threads-1) on as many threads at once; the exceptions they raised."""
    errors: list[BaseException] = []

    def run(t: int) -> None:
        try:
            work(t)
        except BaseException as exc:
            errors.append(exc)

    started = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join()
    return errors
