"""The hook command's own start (issue 36): where no native client is installed, every event
is a Python start of ``tripwire hook``, so a plain event (a PreToolUse with no transcript to
read) imports only what deciding it needs. Each module named here is one the event path once
loaded, or one it must never grow to: argparse (the options are read by hand; argparse is for
``--install`` and usage errors), the price catalogue and the interchange events (needed only to
price an unpriced usage), the readers, the CLI's other commands, the resident server, the
PostgreSQL store, the fleet, the supervisor, the corpus tools, the HTTP floors (web, gateway),
the context guard (a hook's session has it off: the harness compacts its own context; its
configuration is ``context.config``), the host-defined signals, TOML (no config file given),
pathlib and uuid, and the heavy third-party libraries. Under the native engine the reference
engine is not imported either (``engine.watchdog`` makes ``PythonWatchdog`` on first use).

The figures are in ``benchmarks/test_bench_hook.py`` (``test_python_command_start_*``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "argparse",
    "tripwire.interchange.prices",
    "tripwire.context.histories",  # the guard's compaction only: not a hook event's
    "fractions",
    "decimal",
    "tripwire.interchange.events",
    "tripwire.interchange.adapters",
    "tripwire.cli.main",
    "tripwire.cli.hook_install",
    "tripwire.cli.doctor",
    "tripwire.cli.hook_server",
    "tripwire.durability.postgres",
    "tripwire.fleet",
    "tripwire.supervisor",
    "tripwire.corpus",
    "tripwire.web",
    "tripwire.gateway",
    "tripwire.context.guard",
    "tripwire.engine.custom",
    "tripwire.signals.custom",
    "tomllib",
    "tomlkit",
    "orjson",
    "numpy",
    "psycopg",
    "genai_prices",
    "asyncio",
    "subprocess",
    "tempfile",
    "pathlib",
    "uuid",
    "urllib",
)
#: Not imported by an event on the native engine (the reference engine is the python one's).
NATIVE_ONLY = ("tripwire.engine.reference",)


def imported_by_an_event(tmp_path: Path, implementation: str, payload: dict) -> set[str]:
    """The modules ``python -X importtime -m tripwire hook claude-code`` loads for one event
    (a real process, as a harness starts it)."""
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation,
           "TRIPWIRE_STORE": str(tmp_path / "hooks.sqlite3"), "TRIPWIRE_HOOK_SERVER": "off"}
    env.pop("TRIPWIRE_HOOK_SOCKET", None)
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "tripwire", "hook",
                           "claude-code"], input=json.dumps(payload), capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    modules = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
               if line.startswith("import time:") and "self [us]" not in line}
    assert "tripwire.harnesses.hooks._session" in modules  # the event was decided
    return modules


def test_a_plain_hook_event_imports_no_heavy_module(tmp_path: Path, implementation: str
                                                    ) -> None:
    call = {"session_id": "s1", "transcript_path": None, "cwd": "/w",
            "hook_event_name": "PreToolUse", "tool_name": "Read",
            "tool_input": {"file_path": "/w/a.py"}, "tool_use_id": "t1"}
    for payload in (call, {**call, "hook_event_name": "PostToolUse",
                           "tool_response": {"content": "x"}}):
        modules = imported_by_an_event(tmp_path, implementation, payload)
        heavies = HEAVY + (NATIVE_ONLY if implementation == "native" else ())
        loaded = sorted(m for m in modules for heavy in heavies
                        if m == heavy or m.startswith(heavy + "."))
        assert loaded == [], f"a plain {payload['hook_event_name']} event imported {loaded}"


CORPUS_TRANSCRIPT = (Path(__file__).resolve().parents[2] / "shared" / "corpus" /
                     "claude-code-samples" / "samples" / "claude-code-projects" /
                     "0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl")


def test_a_call_inside_a_response_still_written_reads_no_usage(tmp_path: Path,
                                                               implementation: str) -> None:
    """A real Claude Code transcript: the first event charges the responses it finds (the
    transcript reader and the event model are imported for that); the next call's event
    re-reads only the response still open at the end (its usage may not be final yet), so it
    parses no usage and imports neither."""
    if not CORPUS_TRANSCRIPT.is_file():
        pytest.skip(f"{CORPUS_TRANSCRIPT} is absent (the shared corpus is not checked out)")
    transcript = tmp_path / "transcript.jsonl"
    shutil.copyfile(CORPUS_TRANSCRIPT, transcript)
    call = {"session_id": "s1", "transcript_path": str(transcript), "cwd": "/w",
            "hook_event_name": "PreToolUse", "tool_name": "Read",
            "tool_input": {"file_path": "/w/a.py"}, "tool_use_id": "t1"}
    first = imported_by_an_event(tmp_path, implementation, call)
    assert {"tripwire.interchange.adapters.anthropic", "tripwire.interchange.events"} <= first
    second = imported_by_an_event(tmp_path, implementation,
                                  {**call, "tool_input": {"file_path": "/w/b.py"},
                                   "tool_use_id": "t2"})
    assert sorted(m for m in second if m.startswith("tripwire.interchange")) == []
