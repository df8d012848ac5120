"""The one validation of observed fields, shared by the Python API (``Guardrails``,
``Watchdog``), replay's event parser and batch ingest, so none of them accepts what another
rejects. Every check raises ``InvalidEvent`` naming the field.

| field | accepted | refused |
|---|---|---|
| call ``name`` | str (``None``: the unnamed tool) | anything else |
| call / result ``id`` | str or ``None`` | anything else (``5`` would never match ``"5"``) |
| result ``no_op`` | ``True`` / ``False`` (``None``: not given) | the rest (``"false"`` is truthy) |
| agent ``text`` | str | anything else, bytes included (decode it first) |
| usage ``model`` | str or ``None`` | anything else |
| usage ``input_tokens`` / ``output_tokens`` | int 0 .. ``MAX_TOKENS``, or ``None`` | the rest |
| usage ``cost_usd`` | ``money.parse_dollars``: 0 .. $1e9, finite | the rest |
| any other count or cap (budget caps) | int 0 .. ``MAX_COUNT`` | the rest |
| a session id | a non-empty str but ``*`` and ``task:...`` (the store's own) | the rest |
| ``on_event`` / ``summarize`` hooks | a callable or ``None`` | anything else (a ``ConfigError``) |

The hot paths test the common case inline (``type(x) is str``) and call these only when it
fails, so the rule still lives here once.

Why the maxima. A count is checked before anything is charged: one out-of-range number must be
an ``InvalidEvent`` at the door, not a charge that no durable row can hold (msgpack stores
integers below 2**64) and that fails every write after it. ``MAX_TOKENS`` (10**12 tokens in one
usage event) is 100,000 times the largest context window offered today (10M tokens), and keeps
every sum the engines keep in 64-bit integers exact for millions of such events (a task's token
counter overflows only after 9.2 million of them). ``MAX_COUNT`` (2**53) is the largest integer
every JSON reader keeps exact, far beyond any real cap.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError, InvalidEvent

__all__ = ["check_id", "check_no_op", "check_text", "check_usage", "check_hook", "check_count",
           "reader_count", "check_session_id", "shown_value", "MAX_TOKENS", "MAX_COUNT",
           "RESERVED_SESSION"]

#: Tokens in one usage event (input or output), at most (see the module docstring).
MAX_TOKENS = 10**12
#: Any other count or cap, at most: 2**53, the largest integer every JSON reader keeps exact.
MAX_COUNT = 2**53
#: Session ids the store keeps for itself: ``*`` (store-level reports) and ``task:`` chains.
RESERVED_SESSION = ("*", "task:")


def _kind(value: Any) -> str:
    return "a boolean" if isinstance(value, bool) else type(value).__name__


def check_id(value: Any, field: str = "id") -> str | None:
    """A call id: a str or None."""
    if value is None or type(value) is str:
        return value
    if isinstance(value, str):
        return str(value)
    raise InvalidEvent(f"field {field!r} must be a string, not {_kind(value)}")


def check_no_op(value: Any) -> bool:
    """The tool's own no-op claim: exactly True or False (None: not given)."""
    if value is True or value is False:
        return value
    if value is None:
        return False
    raise InvalidEvent(f"field 'no_op' must be a boolean, not {type(value).__name__}")


def check_text(value: Any) -> str:
    """Agent text: a str (bytes are refused: decode them, tripwire will not guess)."""
    if isinstance(value, str):
        return value
    raise InvalidEvent(f"agent text must be a str, not {type(value).__name__}")


def check_count(value: Any, field: str, maximum: int = MAX_COUNT,
                error: type[Exception] = InvalidEvent) -> int | None:
    """A count: an int from 0 to ``maximum`` (None: not given). The message never repeats a
    huge number whole (a 400-digit value is shown by its length)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise error(f"{field} must be an integer from 0 to {maximum:,}, not {shown_value(value)}")
    return int(value)


def reader_count(value: Any, field: str) -> int | None:
    """A token count in a harness's transcript: absent, not an integer or negative reads as
    "not recorded" (None: readers skip what they cannot read), but a count above ``MAX_TOKENS``
    makes the line invalid (an ``InvalidEvent`` the reader reports) instead of being charged."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return None
    return check_count(value, field, MAX_TOKENS)


def shown_value(value: Any) -> str:
    """A refused value as a message shows it: short, and never a huge integer written out."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        magnitude = abs(value)
        if magnitude.bit_length() <= 14_000:  # under 4,300 digits: str() may write it
            return f"an integer of {len(str(magnitude)):,} digits"
        # (str() of an int over 4,300 digits raises): its size from its bits
        return f"an integer of about {int(magnitude.bit_length() * 0.30103) + 1:,} digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_usage(model: Any, input_tokens: Any, output_tokens: Any) -> None:
    """A usage event's model and token counts (the cost is ``money.parse_dollars``'s)."""
    if model is not None and not isinstance(model, str):
        raise InvalidEvent(f"model must be a string, not {_kind(model)}")
    check_count(input_tokens, "input_tokens", MAX_TOKENS)
    check_count(output_tokens, "output_tokens", MAX_TOKENS)


def check_session_id(value: Any, error: type[Exception] = InvalidEvent) -> str:
    """A session id: a non-empty str that is not one of the store's own names (``*``, the
    store-level report; ``task:<id>``, a task's chain)."""
    if not isinstance(value, str) or not value:
        raise error(f"a session id is a non-empty string, not {shown_value(value)}")
    if value == RESERVED_SESSION[0] or value.startswith(RESERVED_SESSION[1]):
        raise error(f"session id {value!r} is reserved: '*' and ids starting 'task:' are the "
                    "store's own")
    return value


def check_hook(value: Any, what: str) -> None:
    """A host callback: callable or None (a ConfigError at construction, not a TypeError
    at the first event)."""
    if value is not None and not callable(value):
        raise ConfigError(f"{what} must be a callable or None, not {_kind(value)}")
