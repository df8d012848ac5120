"""CI runs ``pip install '.[test]'``: the ``test`` extra must hold every extra the tests need,
with the same pins (issue 37), except the ones ``.ci/run`` installs in bounded steps of their
own, each for a reason written here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

#: extras not in ``test``, and why (.ci/run installs each in its own bounded step)
OWN_STEP = {
    "e2e": "the real harness binaries (~630 MB)",
    "crewai": "crewai pins openai<3 and pydantic<2.13; openai-agents in `test` needs openai>=3",
}
#: a requirement ``test`` satisfies through another one that requires it
THROUGH = {"opentelemetry-api": "opentelemetry-sdk"}


def name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower()


def test_every_extra_is_in_the_test_extra_with_its_pins() -> None:
    test = {name(r): r for r in EXTRAS["test"]}
    missing = []
    for extra, requirements in EXTRAS.items():
        if extra in ("test", *OWN_STEP):
            continue
        for requirement in requirements:
            key = THROUGH.get(name(requirement), name(requirement))
            if key not in test:
                missing.append(f"{extra}: {requirement}")
            elif "==" in requirement:  # a framework pinned to its tested release
                assert test[key] == requirement, (extra, requirement, test[key])
    assert missing == []


def test_the_extras_left_out_of_test_are_installed_by_ci() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    for extra in OWN_STEP:
        assert f"['optional-dependencies']['{extra}']" in ci, extra
