"""Picks the engine implementation: native (the C++ core, default) or python (the reference).

``TRIPWIRE_IMPLEMENTATION=native|python|auto`` sets the default for every object built without
an explicit ``implementation=``; ``auto`` uses the native core when it is built and falls back to
the reference with a warning. Both implementations export the same names with the same
behaviour, and the test suite runs against each.
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType

from .errors import ConfigError

IMPLEMENTATIONS = ("native", "python")
_MODULES = {"native": "tripwire._native", "python": "tripwire._reference"}


def _requested() -> str:
    value = os.environ.get("TRIPWIRE_IMPLEMENTATION", "native").strip().lower() or "native"
    if value not in (*IMPLEMENTATIONS, "auto"):
        raise ConfigError(
            "TRIPWIRE_IMPLEMENTATION must be native, python or auto, not "
            f"{os.environ.get('TRIPWIRE_IMPLEMENTATION')!r}"
        )
    return value


def load(implementation: str) -> ModuleType:
    """The engine module of one implementation (``native`` or ``python``)."""
    if implementation not in _MODULES:
        raise ConfigError(f"implementation must be native or python, not {implementation!r}")
    try:
        return importlib.import_module(_MODULES[implementation])
    except ImportError as exc:
        raise ImportError(
            "tripwire's native core (tripwire._native) is not built or failed to load "
            f"({exc}). Reinstall with `pip install .`, or set TRIPWIRE_IMPLEMENTATION=python "
            "(or auto) to use the pure-Python reference."
        ) from exc


def _default() -> str:
    requested = _requested()
    if requested != "auto":
        return requested
    try:
        load("native")
        return "native"
    except ImportError as exc:
        warnings.warn(
            f"tripwire: native core unavailable ({exc}); using the pure-Python reference",
            RuntimeWarning,
            stacklevel=3,
        )
        return "python"


DEFAULT = _default()


def resolve(implementation: str | None) -> str:
    return DEFAULT if implementation is None else implementation
