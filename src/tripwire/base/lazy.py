"""Names imported on first use (PEP 562).

A package's public names are its submodules' (``exports``): ``from tripwire.durability import
SQLiteStore`` imports the SQLite module and no other, so a command that needs one piece (the
hook, run on every event of a harness) pays only for it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["exports"]


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

