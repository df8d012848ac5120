"""The README's examples run as written (mypy --strict checks the same file in CI)."""

from __future__ import annotations

import runpy

from conftest import ROOT


def test_readme_examples_run() -> None:
    runpy.run_path(str(ROOT / "tests" / "typing" / "readme_examples.py"), run_name="__main__")
