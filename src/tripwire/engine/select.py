"""Picks the engine implementation: native (the C++ core, default) or python (the reference).

``TRIPWIRE_IMPLEMENTATION=native|python|auto`` sets the default for every object built without
an explicit ``implementation=``; ``auto`` (and unset) uses the native core when it is built and
falls back to the reference with one warning on the ``tripwire`` logger (a pure-Python install);
``native`` insists on the core. Both implementations export the same names with the same
behaviour, and the test suite runs against each.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

from ..errors import ConfigError, NativeUnavailable

IMPLEMENTATIONS = ("native", "python")
_MODULES = {"native": "tripwire._native", "python": "tripwire.engine.reference"}


T = TypeVar("T")


def _requested() -> str:
    raw = os.environ.get("TRIPWIRE_IMPLEMENTATION", "")
    value = raw.strip().lower() or "auto"
    if value not in (*IMPLEMENTATIONS, "auto"):
        raise ConfigError(f"TRIPWIRE_IMPLEMENTATION must be native, python or auto, not {raw!r}")
    return value


_LOADED: dict[str, ModuleType] = {}  # every session asks: the import machinery once per engine


def load(implementation: str) -> ModuleType:
    """The engine module of one implementation (``native`` or ``python``)."""
    module = _LOADED.get(implementation)
    if module is not None:
        return module
    if implementation not in _MODULES:
        raise ConfigError(f"implementation must be native or python, not {implementation!r}")
    try:
        module = _LOADED[implementation] = importlib.import_module(_MODULES[implementation])
        return module
    except ImportError as exc:
        raise NativeUnavailable(
            "tripwire's native core (tripwire._native) is not built or failed to load "
            f"({exc}). Reinstall with a C++17 compiler and CMake available, or set "
            "TRIPWIRE_IMPLEMENTATION=python (or leave it unset) to use the pure-Python reference."
        ) from exc


def _choose() -> str:
    requested = _requested()
    if requested != "auto":
        return requested
    try:
        load("native")
        return "native"
    except ImportError as exc:
        # a pure-Python install (no compiler at install time): say so once, on the logger an
        # operator reads, and run the reference engine (the same behaviour, slower)
        logging.getLogger("tripwire").warning(
            "native core unavailable (%s); using the pure-Python reference engine",
            exc.__cause__ or exc)
        return "python"


_default: str | None = None
_default_lock = threading.Lock()


def default() -> str:
    """The implementation of objects built without ``implementation=``: chosen on first use
    (so a bad ``TRIPWIRE_IMPLEMENTATION`` is a ConfigError there, not a traceback at import)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = _choose()
    return _default


def resolve(implementation: str | None) -> str:
    return default() if implementation is None else implementation


def concrete(implementation: str | None, python: Callable[[], type[T]],
             native: Callable[[], type[T]]) -> type[T]:
    """The concrete class of an implementation: the reference class ``python()`` names (made
    or imported then: a native process never loads the reference engine), or the native class
    ``native()`` names once the core is known to load (a clear ConfigError or ImportError when
    it is not "native" or not built). Watchdog and Guardrails pick their classes through
    this."""
    name = resolve(implementation)
    if name == "python":
        return python()
    load(name)
    return native()
