"""Names imported on first use (PEP 562), and the forwarding of a module that moved.

A package's public names are its submodules' (``exports``): ``from tripwire.durability import
SQLiteStore`` imports the SQLite module and no other, so a command that needs one piece (the
hook, run on every event of a harness) pays only for it. A module that moved keeps its old path
for one release (``moved``): the first name taken through the old path warns once, naming the
new one.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["exports", "moved"]


def exports(package: str, names: Mapping[str, str],
            ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` of a package whose name ``n`` is that of its
    submodule ``names[n]`` (a relative module name, e.g. ``".store"``)."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value  # the next lookup finds it without this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__, list(names)


def moved(old: str, new: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` of the module ``old``, which moved to ``new``: every name is
    ``new``'s; the first one taken warns (``DeprecationWarning``) that the old path goes away in
    the next release."""
    warned = False

    def __getattr__(name: str) -> Any:
        nonlocal warned
        target = importlib.import_module(new)
        if not warned and not name.startswith("__"):
            warned = True
            warnings.warn(f"{old} moved to {new}: import from {new} (the old path is removed "
                          "in the next release)", DeprecationWarning, stacklevel=2)
        return getattr(target, name)

    def __dir__() -> list[str]:
        return sorted(dir(importlib.import_module(new)))

    return __getattr__, __dir__
