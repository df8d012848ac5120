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
| usage ``input_tokens`` / ``output_tokens`` | int >= 0 or ``None`` | bool, float, negative |
| usage ``cost_usd`` | ``money.parse_dollars``: 0 .. $1e9, finite | the rest |
| ``on_event`` / ``summarize`` hooks | a callable or ``None`` | anything else (a ``ConfigError``) |

The hot paths test the common case inline (``type(x) is str``) and call these only when it
fails, so the rule still lives here once.
"""

from __future__ import annotations

from typing import Any

from .errors import ConfigError, InvalidEvent

__all__ = ["check_id", "check_no_op", "check_text", "check_usage", "check_hook"]


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


def check_usage(model: Any, input_tokens: Any, output_tokens: Any) -> None:
    """A usage event's model and token counts (the cost is ``money.parse_dollars``'s)."""
    if model is not None and not isinstance(model, str):
        raise InvalidEvent(f"model must be a string, not {_kind(model)}")
    for value, what in ((input_tokens, "input_tokens"), (output_tokens, "output_tokens")):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 0):
            raise InvalidEvent(f"{what} must be a non-negative integer, not {value!r}")


def check_hook(value: Any, what: str) -> None:
    """A host callback: callable or None (a ConfigError at construction, not a TypeError
    at the first event)."""
    if value is not None and not callable(value):
        raise ConfigError(f"{what} must be a callable or None, not {_kind(value)}")
