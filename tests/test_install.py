"""Installing without a compiler (issue 8 §4): the build falls back to a pure-Python wheel, and
a tripwire without its native core runs the reference engine and says so once."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

EXAMPLE = ROOT / "corpus" / "examples" / "read-file-loop.jsonl"

# a process whose native core cannot be imported, as after a pure-Python install
NO_NATIVE = "import sys; sys.modules['tripwire._native'] = None\n"


def python(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_NATIVE + code], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})


def test_without_the_native_core_the_reference_runs_and_says_so_once() -> None:
    proc = python(
        "import tripwire\n"
        "from tripwire import Guardrails, GuardrailsConfig, Watchdog\n"
        "g = Guardrails(GuardrailsConfig(mode='enforce', unattended=False))\n"
        "Watchdog(); Guardrails()\n"
        "g.start_turn()\n"
        "print(tripwire.IMPLEMENTATION, [g.on_call('r', '{}').action for _ in range(5)][-1])\n",
        env={"TRIPWIRE_IMPLEMENTATION": ""})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "python halt_session\n"
    notices = [line for line in proc.stderr.splitlines() if "native core unavailable" in line]
    assert len(notices) == 1
    assert notices[0].startswith("tripwire: native core unavailable (")
    assert notices[0].endswith("); using the pure-Python reference engine")


def test_insisting_on_the_native_core_without_it_is_a_clear_error() -> None:
    proc = python("import tripwire\n"
                  "try:\n    tripwire.Watchdog()\n"
                  "except tripwire.TripwireError as e:\n    print(type(e).__name__)\n",
                  env={"TRIPWIRE_IMPLEMENTATION": "native"})
    assert proc.returncode == 0 and proc.stdout == "NativeUnavailable\n"
    cli = python("from tripwire.cli.main import main\n"
                 f"sys.exit(main(['replay', {str(EXAMPLE)!r}]))\n",
                 env={"TRIPWIRE_IMPLEMENTATION": "native"})
    assert cli.returncode == 2
    (line,) = cli.stderr.splitlines()  # one line, no traceback
    assert line.startswith("tripwire: tripwire's native core (tripwire._native) is not built")


@pytest.mark.skipif(importlib.util.find_spec("scikit_build_core") is None
                    or shutil.which("cmake") is None,
                    reason="needs scikit-build-core (the test extra) and cmake on PATH")
def test_a_failed_native_build_gives_a_pure_python_wheel(tmp_path: Path) -> None:
    """The real backend, with the compiler hidden: CMake's compiler check fails and the build
    is retried without CMake (``[[tool.scikit-build.overrides]] if.failed``)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-build-isolation", "--no-deps",
         "--quiet", "-w", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "CXX": "/bin/false", "CMAKE_CXX_COMPILER": "/bin/false"})
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name == "tripwire-0.1.0-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    assert "tripwire-0.1.0.dist-info/licenses/LICENSE" in names
    assert "tripwire/engine/reference.py" in names and "tripwire/py.typed" in names
    sources = [n for n in names if n.endswith((".pyx", ".pxd", ".pxi", ".cpp", ".h", ".so"))]
    assert sources == []
