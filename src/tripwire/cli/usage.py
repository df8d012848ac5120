"""The command line's one rule for a usage error: one line on stderr naming the command and
where its help is, exit status 2 (no usage dump to scroll past). Every parser of the
``tripwire`` command is one of these, the hook command's included (which imports nothing
else of the command line)."""

from __future__ import annotations

import argparse

__all__ = ["OneLineParser", "EXIT_USAGE"]

EXIT_USAGE = 2


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")
