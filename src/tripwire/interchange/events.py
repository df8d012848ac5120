"""The event model and its on-disk interchange format (SPEC §0).

One event per JSON Lines line, ``{"type": "call", ...}``. Parsing is strict and typed: a line
that is not a JSON object, has an unknown ``type`` or a field of the wrong type raises
``InvalidEvent`` naming the field; nothing is guessed. (``"kind"`` is accepted as a synonym of
``"type"``, the spelling of ``../shared/conformance``.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Union

from ..base.money import parse_dollars
from ..base.names import Guardrail
from ..base.validate import MAX_COUNT, MAX_TOKENS, check_count, check_no_op, shown_value
from ..errors import InvalidEvent, TruncatedLine

__all__ = [
    "Call",
    "Result",
    "Text",
    "Usage",
    "TurnStart",
    "TurnEnd",
    "Reset",
    "TaskStart",
    "TaskEnd",
    "StopAttempt",
    "Retry",
    "Compaction",
    "BudgetRaise",
    "CheckIn",
    "Event",
    "parse_event",
    "event_record",
    "read_events",
    "decoded_lines",
    "EVENT_TYPES",
    "EVENT_CLASSES",
]


@dataclass(frozen=True, slots=True)
class Call:
    """The model asked for a tool call. ``args``: JSON text as produced, or a decoded value."""

    name: str
    args: Any = None
    id: str | None = None
    ts: float | None = None  # seconds since the epoch (replay's clock)


@dataclass(frozen=True, slots=True)
class Result:
    """A tool answered. ``error``: False/None, or the error text (True: an error without text).
    ``unknown_tool``: the host answered that it has no tool of the call's name (Claude Code's
    "No such tool available"): carried for the unknown-tool signal (SPEC §12.4)."""

    name: str | None = None
    id: str | None = None
    error: Any = None
    no_op: bool = False
    payload: Any = None
    ts: float | None = None  # seconds since the epoch (replay's clock)
    unknown_tool: bool = False


@dataclass(frozen=True, slots=True)
class Text:
    """The agent's own words (not tool output, injected messages or private reasoning)."""

    text: str
    ts: float | None = None  # seconds since the epoch (replay's clock)


@dataclass(frozen=True, slots=True)
class Usage:
    """One model call's provider-reported usage.

    ``input_tokens`` counts the whole prompt, cached parts included; ``cache_read_tokens`` and
    ``cache_write_tokens`` are the parts of it read from / written to the provider's prompt
    cache (they price differently). ``provider`` helps the price catalogue (SPEC §11.3).
    """

    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    provider: str | None = None
    ts: float | None = None  # seconds since the epoch (replay's clock)


@dataclass(frozen=True, slots=True)
class TurnStart:
    ts: float | None = None


@dataclass(frozen=True, slots=True)
class TurnEnd:
    ts: float | None = None


@dataclass(frozen=True, slots=True)
class Reset:
    """An operator reset."""

    guardrail: str = "all"
    additional_budget_usd: float = 0.0
    ts: float | None = None  # seconds since the epoch (replay's clock)


@dataclass(frozen=True, slots=True)
class TaskStart:
    """A task begins (SPEC §7): its objective and caps (``budget``: counters as in
    ``tripwire.budgets.Budget``; unset ones take the run's configured budget)."""

    objective: str = ""
    budget: dict[str, Any] | None = None
    ts: float | None = None


@dataclass(frozen=True, slots=True)
class TaskEnd:
    """The host finished the task: its answer, the evidence that it holds, a note of work
    left unfinished. A host that ended the task itself before it was done says why:
    ``exhausted`` names the counter (``steps``, ``usd`` ...) whose cap of its own it reached
    (a harness's max turns or max budget: the outcome is ``exhausted``), ``interrupted`` the
    reason it stopped otherwise (the outcome is ``interrupted``); at most one of them."""

    answer: Any = None
    evidence: Any = None
    unfinished: str | None = None
    ts: float | None = None
    exhausted: str | None = None
    interrupted: str | None = None


@dataclass(frozen=True, slots=True)
class StopAttempt:
    """The agent tried to finish; a stop hook accepted or refused (``accepted``)."""

    accepted: bool = True
    answer: Any = None
    ts: float | None = None


@dataclass(frozen=True, slots=True)
class Retry:
    """A transport/provider retry of a failed model request (not a tool failure). The calls
    the failed attempt streamed never ran, and the retry streams them again: ``calls`` of
    them (the last calls observed) are taken back as ``retract_calls`` takes them; None: the
    calls since the last result, model response or turn start (the response in flight)."""

    reason: str = ""
    calls: int | None = None
    ts: float | None = None


@dataclass(frozen=True, slots=True)
class Compaction:
    """The harness compacted or condensed the conversation's history (SPEC §0, §12.4).
    ``mechanical``: by truncation or dropping (no summary written by a model);
    ``automatic``: the harness decided it (a context limit), not the user (``/compact``)."""

    mechanical: bool = False
    automatic: bool = False
    ts: float | None = None  # seconds since the epoch (replay's clock)


@dataclass(frozen=True, slots=True)
class BudgetRaise:
    """An operator raised the task's cap of ``counter`` by ``by`` (its units: dollars for
    ``usd``, seconds for ``deadline_s``), SPEC §13: an exhausted task continues when the raise
    is enough, its consumption kept; one that is not is refused, nothing changed."""

    counter: str = "steps"
    by: float = 0.0
    ts: float | None = None


@dataclass(frozen=True, slots=True)
class CheckIn:
    """The operator checked in (SPEC §13): a new check-in window opens for the task's windowed
    counters (``Budget(checkin=...)``), its totals untouched; a task paused at a window
    continues."""

    ts: float | None = None


Event = Union[Call, Result, Text, Usage, TurnStart, TurnEnd, Reset,  # noqa: UP007 (py3.10)
              TaskStart, TaskEnd, StopAttempt, Retry, Compaction, BudgetRaise, CheckIn]


def _field(obj: dict[str, Any], name: str, types: tuple[type, ...], *, required: bool = False,
           nullable: bool = True) -> Any:
    if name not in obj or (obj[name] is None and nullable and not required):
        if required:
            raise InvalidEvent(f"{obj.get('type', 'event')} event needs a {name!r} field")
        return None
    value = obj[name]
    if isinstance(value, bool) and bool not in types:
        raise InvalidEvent(f"field {name!r} must be {_names(types)}, not a boolean")
    if not isinstance(value, types):
        raise InvalidEvent(f"field {name!r} must be {_names(types)}, not {type(value).__name__}")
    return value


def _names(types: tuple[type, ...]) -> str:
    return " or ".join({str: "a string", int: "an integer", float: "a number", bool: "a boolean",
                        dict: "an object", list: "an array"}.get(t, t.__name__) for t in types)


def _count(obj: dict[str, Any], name: str) -> int | None:
    """A token count: ``validate.check_count`` up to ``MAX_TOKENS`` (every count of an event is
    a token count)."""
    value = _field(obj, name, (int,))
    return check_count(value, f"field {name!r}", MAX_TOKENS)


def _usd(obj: dict[str, Any], name: str) -> float | None:
    value = _field(obj, name, (int, float))
    return parse_dollars(value, f"field {name!r}", error=InvalidEvent, allow_none=True)


#: the types a decoded JSON value has (msgspec and json give exactly these)
_JSON_TYPES = frozenset({str, dict, list, int, float, bool, type(None)})


def _call(o: dict[str, Any]) -> Call:
    name, args, ident = o.get("name"), o.get("args"), o.get("id")
    if type(name) is str and type(args) in _JSON_TYPES and (ident is None or type(ident) is str):
        return Call(name, args, ident)  # the common case, checked at once
    name = _field(o, "name", (str,), required=True)
    if "args" in o and not isinstance(o["args"], (str, dict, list, int, float, bool, type(None))):
        raise InvalidEvent("field 'args' must be JSON text or a JSON value")
    return Call(name, o.get("args"), _field(o, "id", (str,)))


def _result(o: dict[str, Any]) -> Result:
    name, ident, error, no_op = o.get("name"), o.get("id"), o.get("error"), o.get("no_op")
    if (name is None or type(name) is str) and (ident is None or type(ident) is str) and \
            type(error) in _JSON_TYPES and (no_op is None or no_op is False or no_op is True) \
            and "unknown_tool" not in o:
        return Result(name, ident, error, no_op is True, o.get("payload"))  # the common case
    name = _field(o, "name", (str,))
    ident = _field(o, "id", (str,))
    error = o.get("error")
    if not isinstance(error, (str, bool, type(None), dict, list, int, float)):
        raise InvalidEvent("field 'error' must be false, true or the error text")
    return Result(name, ident, error, check_no_op(o.get("no_op", False)), o.get("payload"),
                  unknown_tool=_field(o, "unknown_tool", (bool,)) is True)


def _text(o: dict[str, Any]) -> Text:
    text = o.get("text")
    if type(text) is str:
        return Text(text)
    return Text(_field(o, "text", (str,), required=True))


def _usage(o: dict[str, Any]) -> Usage:
    return Usage(
        _field(o, "model", (str,)),
        _count(o, "input_tokens"),
        _count(o, "output_tokens"),
        _usd(o, "cost_usd"),
        _count(o, "cache_read_tokens"),
        _count(o, "cache_write_tokens"),
        _field(o, "provider", (str,)),
    )


def _reset(o: dict[str, Any]) -> Reset:
    value = _field(o, "guardrail", (str,)) or "all"
    scope = Guardrail.parse_reset(value.strip().lower(), error=InvalidEvent,
                                  prefix="field 'guardrail'")
    budget = _usd(o, "additional_budget_usd") or 0.0
    return Reset(scope.value, budget)


def _task_start(o: dict[str, Any]) -> TaskStart:
    from ..budgets.caps import Budget  # checked here: a bad counter is a bad line, not a bad run
    from ..errors import ConfigError

    budget = _field(o, "budget", (dict,))
    if budget is not None:
        try:
            Budget.from_mapping(budget, "field 'budget'")
        except ConfigError as exc:
            raise InvalidEvent(str(exc)) from None
    return TaskStart(_field(o, "objective", (str,)) or "", budget)


def _task_end(o: dict[str, Any]) -> TaskEnd:
    exhausted = _field(o, "exhausted", (str,))
    interrupted = _field(o, "interrupted", (str,))
    if exhausted is not None:
        from ..budgets.caps import COUNTERS

        if exhausted not in COUNTERS:
            raise InvalidEvent(f"field 'exhausted' must name a counter ({', '.join(COUNTERS)}), "
                               f"not {exhausted!r}")
        if interrupted is not None:
            raise InvalidEvent("a task_end is exhausted or interrupted, not both")
    return TaskEnd(o.get("answer"), o.get("evidence"), _field(o, "unfinished", (str,)),
                   exhausted=exhausted, interrupted=interrupted)


def _stop_attempt(o: dict[str, Any]) -> StopAttempt:
    return StopAttempt(_field(o, "accepted", (bool,), required=True), o.get("answer"))


def _retry(o: dict[str, Any]) -> Retry:
    calls = _field(o, "calls", (int,))
    if calls is not None and (isinstance(calls, bool) or not 0 <= calls <= MAX_COUNT):
        raise InvalidEvent(f"field 'calls' must be a count of calls from 0 to {MAX_COUNT:,}, "
                           f"not {shown_value(calls)}")
    return Retry(_field(o, "reason", (str,)) or "", calls)


def _budget_raise(o: dict[str, Any]) -> BudgetRaise:
    from ..budgets.caps import CONSUMED

    counter = _field(o, "counter", (str,), required=True)
    if counter not in CONSUMED:
        raise InvalidEvent(f"field 'counter' must name a counter ({', '.join(CONSUMED)}), "
                           f"not {counter!r}")
    by = _field(o, "by", (int, float), required=True)
    if by != by or not 0 <= by <= MAX_COUNT:
        raise InvalidEvent(f"field 'by' must be a number from 0 to {MAX_COUNT:,}, "
                           f"not {shown_value(by)}")
    return BudgetRaise(counter, float(by))


def _compaction(o: dict[str, Any]) -> Compaction:
    return Compaction(_field(o, "mechanical", (bool,)) is True,
                      _field(o, "automatic", (bool,)) is True)


_PARSERS: dict[str, Callable[[dict[str, Any]], Event]] = {
    "call": _call,
    "result": _result,
    "text": _text,
    "usage": _usage,
    "turn_start": lambda o: TurnStart(),
    "turn_end": lambda o: TurnEnd(),
    "reset": _reset,
    "task_start": _task_start,
    "task_end": _task_end,
    "stop_attempt": _stop_attempt,
    "retry": _retry,
    "compaction": _compaction,
    "budget_raise": _budget_raise,
    "check_in": lambda o: CheckIn(),
}
EVENT_TYPES = tuple(_PARSERS)
_TYPE_OF = {Call: "call", Result: "result", Text: "text", Usage: "usage",
            TurnStart: "turn_start", TurnEnd: "turn_end", Reset: "reset",
            TaskStart: "task_start", TaskEnd: "task_end", StopAttempt: "stop_attempt",
            Retry: "retry", Compaction: "compaction", BudgetRaise: "budget_raise",
            CheckIn: "check_in"}
#: Each event class by its interchange ``type`` (``"call"``: ``Call``).
EVENT_CLASSES: dict[str, type] = {name: cls for cls, name in _TYPE_OF.items()}


def event_record(event: Event) -> dict[str, Any]:
    """A typed event as its interchange object (``parse_event`` reads it back): fields that
    are None, and a result's ``no_op: false`` and ``unknown_tool: false``, are left out (a
    compaction's flags are always written)."""
    record: dict[str, Any] = {"type": _TYPE_OF[type(event)]}
    for name in event.__slots__:
        value = getattr(event, name)
        if value is not None and not (value is False and name in _DEFAULT_FALSE):
            record[name] = value
    return record


#: flags left out of an interchange record when false (their default)
_DEFAULT_FALSE = frozenset({"no_op", "unknown_tool"})


def parse_event(value: Any) -> Event:
    """One decoded JSON value -> a typed event, or ``InvalidEvent``."""
    if not isinstance(value, dict):
        raise InvalidEvent(f"an event must be a JSON object, not {type(value).__name__}")
    kind = value["type"] if "type" in value else value.get("kind")
    if not isinstance(kind, str):
        raise InvalidEvent("an event needs a string 'type' field")
    parser = _PARSERS.get(kind)
    if parser is None:
        raise InvalidEvent(f"unknown event type {kind!r} (known: {', '.join(EVENT_TYPES)})")
    event = parser(value)
    return _timed(event, value["ts"]) if "ts" in value else event


def _timed(event: Event, ts: Any) -> Event:
    """The event with its ``ts`` (any event may carry its time, SPEC §0: replay's clock)."""
    if ts is None:
        return event
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts != ts \
            or not -MAX_COUNT <= ts <= MAX_COUNT:
        raise InvalidEvent(f"field 'ts' must be a number of seconds, not {shown_value(ts)}")
    return replace(event, ts=float(ts))


@dataclass(frozen=True, slots=True)
class Line:
    """One non-blank line of an event file: its 0-based event index and 1-based line number."""

    index: int
    number: int
    event: Event | None
    error: InvalidEvent | None = None
    session: str | None = None  # the line's own ``session`` field (``convert`` writes one)


#: A UTF-8 byte order mark, which some editors write at the start of a file: skipped.
UTF8_BOM = b"\xef\xbb\xbf"


def read_events(path: str | Path) -> Iterator[Line]:
    """Lines of an interchange file, decoded; invalid ones carry their error instead.

    Lines end at ``\\n`` (an optional ``\\r`` before it is part of the ending); a UTF-8 byte
    order mark at the start of the file is skipped. Blank lines are skipped and are not
    events; every other line, valid or not, takes the next event index, so indices do not
    shift when invalid lines are skipped.

    Lines are decoded by msgspec (four times the standard library's speed; unlike orjson it
    keeps integers beyond 64 bits exact); a line it refuses (not JSON, or JSON it does not
    take: NaN, infinities, lone surrogate escapes, deep nesting) is decoded again by the
    standard library, so every line decodes to the same value, and fails with the same
    message, as with ``json.loads`` alone (``tests/test_differential.py`` checks it).
    """
    path = Path(path)
    for index, number, event, error, session in decoded_lines(path):
        yield Line(index, number, event, error, session)


def decoded_lines(path: Path) -> Iterator[tuple[int, int, Event | None, InvalidEvent | None,
                                                str | None]]:
    """``read_events`` as plain tuples ``(index, number, event, error, session)`` (the
    interchange reader makes its own item of each: one object per line instead of two).
    ``session``: the line's ``session`` field, a non-empty string (``convert`` writes each
    event's session there), or None when it has none or could not be decoded."""
    import msgspec  # here: a run that reads no interchange file does not import it

    index = 0
    fast = _decoder().decode
    fast_error = msgspec.DecodeError
    parsers = _PARSERS
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1:
                raw = raw.removeprefix(UTF8_BOM)
            try:
                value = fast(raw)  # JSON whitespace (the line's \r\n) is skipped as json does
            except (fast_error, RecursionError, UnicodeDecodeError):  # msgspec says nesting
                value = _NOT_DECODED  # is too deep so; before 0.23 it raised on bad UTF-8 so
            if value is _NOT_DECODED:
                ended = raw.endswith(b"\n")  # only the last line can lack its newline
                raw = raw.removesuffix(b"\n").removesuffix(b"\r")  # columns count the line
                if not raw.strip():
                    continue
                try:
                    value = _slow_decode(raw, ended)
                except InvalidEvent as exc:
                    yield index, number, None, type(exc)(exc.message, source=str(path),
                                                         line=number), None
                    index += 1
                    continue
            session = None
            try:
                if type(value) is dict:
                    kind = value.get("type")
                    session = value.get("session")
                    if session is not None and (type(session) is not str or not session):
                        session = None
                        raise InvalidEvent("field 'session' must be a non-empty string")
                else:
                    kind = None
                parser = parsers.get(kind) if type(kind) is str else None
                if parser is None:
                    event = parse_event(value)
                else:
                    event = parser(value)
                    if "ts" in value:
                        event = _timed(event, value["ts"])
            except InvalidEvent as exc:
                yield index, number, None, type(exc)(exc.message, source=str(path),
                                                     line=number), session
            else:
                yield index, number, event, None, session
            index += 1


_NOT_DECODED = object()
_DECODERS: list[Any] = []


def _decoder() -> Any:
    """The one msgspec JSON decoder (made on first use)."""
    if not _DECODERS:
        import msgspec

        _DECODERS.append(msgspec.json.Decoder())
    return _DECODERS[0]


def _slow_decode(raw: bytes, ended: bool) -> Any:
    """One line by the standard library, with the errors of ``read_events``."""
    import json

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidEvent(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if not ended:
            raise TruncatedLine() from None
        raise InvalidEvent(f"not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise InvalidEvent("not JSON (nested too deeply)") from None
    except ValueError:  # Python refuses to convert an integer of more than 4,300 digits
        raise InvalidEvent("not JSON tripwire reads (a number of more than 4,300 digits)") \
            from None
