"""US-dollar amounts: the one parser for config, the Python API, events and the command line.

Money is kept as an integer number of nano-dollars (five $0.01 calls are exactly $0.05), so
an amount must be finite and small enough that its nano-dollars, and the sum of many of them,
stay exact 64-bit integers: at most ``MAX_USD`` (one billion dollars). Anything else --
NaN, infinity, ``1e308``, a negative amount where none makes sense, a boolean, a string -- is
a typed error naming the field, never an ``OverflowError`` and never silently clamped.
"""

from __future__ import annotations

import math
from typing import Any, Literal, overload

from ..errors import ConfigError, InvalidEvent, TripwireError
from .validate import check_usage, shown_value

__all__ = ["NANO", "MAX_USD", "parse_dollars", "dollars_from_text", "to_nano", "usd",
           "usd_more_than", "bound_nano", "cost_nano", "usage_cost_nano"]

NANO = 1_000_000_000
#: The largest amount tripwire accepts anywhere: $1e9 is 1e18 nano-dollars, and int64 holds
#: 9.2e18, so even a session of a few such events cannot overflow the native batch path.
MAX_USD = 1_000_000_000


@overload
def parse_dollars(value: Any, what: str, *, error: type[TripwireError] = ...,
                  allow_none: Literal[False] = ...) -> float: ...


@overload
def parse_dollars(value: Any, what: str, *, error: type[TripwireError] = ...,
                  allow_none: bool) -> float | None: ...


def parse_dollars(value: Any, what: str, *, error: type[TripwireError] = ConfigError,
                  allow_none: bool = False) -> float | None:
    """A US-dollar amount in [0, MAX_USD], as a float; ``error`` (a TripwireError subclass)
    names ``what`` otherwise. ``None`` passes only with ``allow_none``; a string is refused
    (``dollars_from_text`` is the command line's)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error(f"{what} must be a number of US dollars, not {shown_value(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise error(f"{what} must be a finite number of US dollars, not {value!r}")
    if value < 0:
        raise error(f"{what} must not be negative (0 means none), not {shown_value(value)}")
    if value > MAX_USD:
        raise error(f"{what} must be at most ${MAX_USD:,} (a range that stays exact in "
                    f"nano-dollars), not {shown_value(value)}")
    return float(value)


def dollars_from_text(text: str, what: str) -> float:
    """A command-line amount (``0.5``, ``$0.50``), checked as ``parse_dollars`` checks."""
    try:
        value = float(text.strip().removeprefix("$"))
    except ValueError:
        raise ConfigError(f"{what} must be a number of US dollars, not {text!r}") from None
    return parse_dollars(value, what)


def to_nano(value: float) -> int:
    """Dollars (already checked by ``parse_dollars``) to integer nano-dollars."""
    return round(value * NANO)


def usd(nano: int) -> str:
    """Amounts in messages use 4 decimals (SPEC §4): ``$0.0512``."""
    return f"${nano / NANO:.4f}"


def usd_more_than(nano: int) -> str:
    """The smallest 4-decimal amount strictly above ``nano``: what "add at least" must say.
    (Rounding the exact need to 4 decimals can print $0.0000, which is never enough.)"""
    step = NANO // 10_000
    return usd((nano // step + 1) * step)


def bound_nano(value: float | None, name: str) -> int:
    """A configured bound: None or 0 disable it; anything ``parse_dollars`` refuses
    (negative, non-finite, out of range) is a ConfigError."""
    return to_nano(parse_dollars(value, name, allow_none=True) or 0.0)


def cost_nano(value: float | None) -> int:
    """A usage event's cost: absent is 0; anything ``parse_dollars`` refuses is InvalidEvent."""
    return to_nano(parse_dollars(value, "cost_usd", error=InvalidEvent, allow_none=True) or 0.0)


def usage_cost_nano(input_tokens: Any, output_tokens: Any, cost_usd: Any,
                    model: Any = None) -> int:
    """Check a usage event's fields (``validate.check_usage``) before any of it is applied;
    returns the cost in nano-dollars."""
    check_usage(model, input_tokens, output_tokens)
    return cost_nano(cost_usd)
