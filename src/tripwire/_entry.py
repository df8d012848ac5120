"""The ``tripwire`` command's entry point. ``tripwire hook ...`` runs on every event a harness
sends, so it is dispatched before the rest of the command line is imported (SPEC §11.4: the
median invocation, Python start-up included, must stay under 100 ms)."""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hook"]:
        from .hooks import main as hook_main

        code = hook_main(argv[1:], close=False)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # the answer is out: skip interpreter teardown (and the WAL checkpoint)
    from .cli import main as cli_main

    return cli_main(argv)
