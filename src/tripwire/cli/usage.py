"""The command line's one rule for a usage error: one line on stderr naming the command and
where its help is, exit status 2 (no usage dump to scroll past). Every parser of the
``tripwire`` command is one of these, the hook command's included (which imports nothing
else of the command line), and the argument types the verbs' options share (each a one-line
message for a bad value)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..errors import ConfigError, InvalidReset

if TYPE_CHECKING:
    from ..base.names import Guardrail

__all__ = ["OneLineParser", "EXIT_USAGE", "count", "dollars", "mode", "port", "raise_spec",
           "reset_scope", "seconds", "signal_set", "wait", "add_notify_arguments"]

EXIT_USAGE = 2


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


# -- argument types (the modules they need are imported when a value is checked) ------------

def dollars(text: str) -> float:
    from ..base.money import dollars_from_text

    try:
        return dollars_from_text(text, "the amount")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("the amount ")) from None


def signal_set(text: str) -> frozenset[str]:
    """Signal ids; checked against the built-ins and the config's custom signals once the
    config file is read (``replay_config``)."""
    ids = frozenset(s.strip() for s in text.split(",") if s.strip())
    if not ids:
        raise argparse.ArgumentTypeError("--signals needs at least one signal id")
    return ids


def reset_scope(text: str) -> Guardrail:
    from ..base.names import Guardrail

    try:
        return Guardrail.parse_reset(text)
    except InvalidReset as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535 (0: any free port), not {value}")
    return value


def _number_of_seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None


def seconds(text: str) -> float:
    value = _number_of_seconds(text)
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, not {text}")
    return value


def wait(text: str) -> float:
    """A bounded wait for a lock (the hook's ``--wait``): well under the harnesses' own
    hook timeouts."""
    value = _number_of_seconds(text)
    if not 0 < value <= 60:
        raise argparse.ArgumentTypeError(f"a wait is more than 0 and at most 60 seconds, not "
                                         f"{text}")
    return value


def mode(text: str) -> str:
    from ..base.modes import parse_mode

    try:
        return str(parse_mode(text))
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def raise_spec(text: str) -> tuple[str, float, bool]:
    """``COUNTER=+N`` (raise by N) or ``COUNTER=N`` (raise to N): the counter, the amount and
    whether it is relative."""
    from ..budgets.caps import CONSUMED

    counter, sep, value = text.partition("=")
    counter = counter.strip()
    if not sep or counter not in CONSUMED:
        raise argparse.ArgumentTypeError(
            f"--raise takes COUNTER=+N (a counter of {', '.join(CONSUMED)}), not {text!r}")
    relative = value.strip().startswith("+")
    try:
        amount = float(value.strip().lstrip("+").lstrip("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--raise {counter}= needs a number, not "
                                         f"{value!r}") from None
    if amount != amount or amount < 0 or amount in (float("inf"),):
        raise argparse.ArgumentTypeError(f"--raise {counter}= needs a number of at least 0")
    return counter, amount, relative


def add_notify_arguments(parser: argparse.ArgumentParser) -> None:
    """``--notify URL`` (repeatable) and ``--notify-format``: the same on serve and gateway
    (``web.notify``; its FORMATS, written here so building the parser imports nothing)."""
    parser.add_argument("--notify", metavar="URL", action="append", default=[],
                        help="POST a JSON body to URL on every halt, task exhaustion and "
                             "check-in pause (repeatable; retried, never delays a decision)")
    parser.add_argument("--notify-format", choices=("json", "slack"), default=None,
                        help="the body posted to --notify: tripwire's JSON (default) or a "
                             "Slack incoming-webhook body; a config file's [notify] urls and "
                             "format are read too")
