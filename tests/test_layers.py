"""The house's floors hold: imports point down, no circles, no private state read across
modules, no god modules or classes (issue 28; tools/shape.py measures, these assert).

Every import counts (module level, in functions, under TYPE_CHECKING).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"
if not TOOLS.is_dir():
    pytest.skip("tools/shape.py is not beside the tests (an installed copy?)",
                allow_module_level=True)
sys.path.insert(0, str(TOOLS))

import shape  # noqa: E402

SHAPE = shape.shape()


def test_imports_point_down_the_floors() -> None:
    assert SHAPE["upward_imports"] == []


def test_no_import_circle() -> None:
    assert SHAPE["circles"] == []


def test_no_private_state_is_read_across_modules() -> None:
    assert SHAPE["private_reads"] == []


def test_the_top_level_is_the_floors_and_the_native_core_alone() -> None:
    """No module of the package's top level but ``errors`` (a floor), ``__main__`` and the
    native core; every other top-level name is a floor's package (no old paths forwarding)."""
    assert SHAPE["top_level_modules"] == ["tripwire.__main__", "tripwire._native",
                                          "tripwire.errors"]
    floors = {p.removeprefix("tripwire.").split(".")[0] for p in SHAPE["packages"]} - {"tripwire"}
    assert floors == set(shape.FLOORS) - {"errors"}


def test_no_module_or_class_is_a_house_of_its_own() -> None:
    (module, lines), *_ = SHAPE["largest_files"]
    assert lines <= shape.MAX_MODULE_LINES, module
    (cls, lines, _methods), *_ = SHAPE["largest_classes"]
    assert lines <= shape.MAX_CLASS_LINES, cls


def test_a_private_read_across_modules_is_caught(tmp_path: Path) -> None:
    """The check itself: a module reading another module's class's private field is found."""
    package = tmp_path / "tripwire"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("class A:\n    def __init__(self):\n        self._x = 1\n")
    (package / "b.py").write_text("def f(a):\n    return a._x\n")
    (package / "c.py").write_text("class C:\n    def g(self):\n        return self._y\n")
    modules = shape.module_files(tmp_path)
    assert shape.private_reads(modules) == [("tripwire.b", 2, "a._x")]


def test_an_upward_import_and_a_circle_are_caught(tmp_path: Path) -> None:
    package = tmp_path / "tripwire"
    (package / "base").mkdir(parents=True)
    (package / "cli").mkdir()
    for d in ("", "base/", "cli/"):
        (package / f"{d}__init__.py").write_text("")
    (package / "base" / "x.py").write_text("def f():\n    from ..cli import y\n")
    (package / "cli" / "y.py").write_text("from ..base import x\n")
    modules = shape.module_files(tmp_path)
    graph = shape.imports(modules)
    assert shape.upward(graph) == [("tripwire.base.x", "tripwire.cli.y")]
    assert shape.circles(graph, sorted(modules)) == [["tripwire.base.x", "tripwire.cli.y"]]
