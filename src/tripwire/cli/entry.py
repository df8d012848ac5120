"""The ``tripwire`` command's entry point. ``tripwire hook ...`` runs on every event a harness
sends, so it is dispatched before the rest of the command line is imported (SPEC §11.4: the
median invocation, Python start-up included, must stay under 100 ms)."""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hook"]:
        from .hook import main as hook_main

        code = hook_main(argv[1:], close=False, timer=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # the answer is out: skip interpreter teardown (and the WAL checkpoint)
    from .main import main as cli_main

    code = cli_main(argv)
    if argv[:1] == ["replay"]:
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """End a finished ``replay`` without tearing the interpreter down (freeing every module and
    object it made: some ten milliseconds of CPU a run). The exit handlers run and the
    streams are flushed first, as at a normal exit; not while another thread runs (a normal
    exit waits for it) or when a stream cannot be flushed (a normal exit reports that)."""
    import atexit
    import threading

    if threading.active_count() > 1:
        return
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)
