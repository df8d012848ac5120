"""The command line imports what its verb runs (issue 10: ``replay --quiet`` throughput as a
whole command, interpreter start and imports included).

Each check runs a fresh interpreter (``sys.modules`` of this test process holds everything the
suite imported) and reads back which modules it had imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import CORPUS, need_shared

#: optional extras' modules (and their heavy dependencies) that no ``replay`` start imports
HEAVY = ("numpy", "matplotlib", "starlette", "uvicorn", "psycopg", "opentelemetry", "dask",
         "distributed", "tqdm", "pydantic", "httpx", "genai_prices", "langchain_core", "agents")
#: tripwire's own modules of other verbs (the store, the server, the corpus tools, the hooks)
OTHER_VERBS = ("tripwire.durability.chain", "tripwire.durability.anchor",
               "tripwire.durability.backend", "tripwire.durability.sqlite",
               "tripwire.durability.postgres", "tripwire.durability.open", "tripwire.cli.serve",
               "tripwire.cli.store", "tripwire.fleet.fleet", "tripwire.corpus",
               "tripwire.harnesses.hooks", "tripwire.cli.hook", "sqlite3")


def imported(code: str, implementation: str = "native") -> list[str]:
    """The module names a fresh interpreter has imported after running ``code``."""
    program = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation}
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    modules: list[str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return modules


def loaded(modules: list[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m in roots or m.startswith(tuple(f"{r}." for r in roots)))


def test_importing_the_command_line_imports_no_optional_module() -> None:
    modules = imported("import tripwire.cli.main")
    assert loaded(modules, HEAVY) == []
    assert loaded(modules, OTHER_VERBS) == []
    # nor the engine, the readers' JSON libraries, or the version lookup (--version only)
    assert loaded(modules, ("tripwire.session.guardrails", "tripwire.engine.watchdog", "tripwire._native",
                            "orjson", "msgspec", "importlib.metadata")) == []


def test_the_entry_point_of_the_hook_does_not_import_the_command_line() -> None:
    modules = imported("import tripwire.cli.entry, tripwire.cli.hook")
    assert "tripwire.cli.main" not in modules
    assert loaded(modules, HEAVY) == []


def test_version_still_reads_the_installed_distribution() -> None:
    proc = subprocess.run([sys.executable, "-m", "tripwire", "--version"], capture_output=True,
                          text=True, timeout=60, check=False)
    from importlib.metadata import version

    assert (proc.returncode, proc.stdout) == (0, f"tripwire {version('tripwire')}\n")


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_replay_imports_the_readers_detection_tried_and_no_optional_module(
        engine: str, tmp_path) -> None:
    need_shared("corpus")
    corpus = tmp_path / "trajectories"  # mini-swe-agent ones only (the corpus folder also
    corpus.mkdir()                       # holds outcomes.json, of no format: every one is tried)
    for source in sorted((CORPUS / "mini-swe-agent-swebench").glob("*.traj.json"))[:3]:
        (corpus / source.name).write_bytes(source.read_bytes())
    modules = imported(
        "import io\nfrom tripwire.cli.main import main\n"
        f"assert main(['replay', '--quiet', {str(corpus)!r}], out=io.StringIO()) == 0",
        engine)
    assert loaded(modules, HEAVY) == []
    assert loaded(modules, OTHER_VERBS) == []
    # detection tries the formats in order up to mini-swe-agent; no later reader is loaded
    readers = [m.removeprefix("tripwire.interchange.adapters.") for m in modules
               if m.startswith("tripwire.interchange.adapters.") and m != "tripwire.interchange.adapters._base"]
    # codex reads Responses items, claude_code imports anthropic's names
    assert sorted(readers) == sorted({*tried_up_to("mini-swe-agent"), "anthropic",
                                      "openai_responses"})
    assert "msgspec" not in modules  # the interchange decoder: no interchange file was read


def test_an_interchange_replay_imports_msgspec_and_no_other_reader(tmp_path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"type": "call", "name": "ls", "args": "{}"}\n')
    modules = imported(
        "import io\nfrom tripwire.cli.main import main\n"
        f"assert main(['replay', '--quiet', {str(path)!r}], out=io.StringIO()) == 0")
    assert "msgspec" in modules
    readers = sorted(m.removeprefix("tripwire.interchange.adapters.") for m in modules
                     if m.startswith("tripwire.interchange.adapters.") and m != "tripwire.interchange.adapters._base")
    # the formats detection tries before interchange (their content looks like its events)
    assert readers == sorted(tried_up_to("interchange"))


def tried_up_to(fmt: str) -> list[str]:
    """The reader modules detection imports to reach ``fmt``: those of the formats before it
    in detection order, and its own."""
    from tripwire.interchange.adapters import _REGISTRY

    names = [module for _, module, _, _ in _REGISTRY]
    return names[:[name for name, _, _, _ in _REGISTRY].index(fmt) + 1]
