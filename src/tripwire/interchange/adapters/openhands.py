"""OpenHands: V1 conversations (the Software Agent SDK: one JSON event per file in
``<conversation>/events/event-<index>-<id>.json`` beside ``base_state.json``, or the events
one per line), V0 session stores (``<session>/events/<n>.json``, one event per file), V0
trajectories (``trajectory.json``, a JSON array of events) and evaluation output
(``output.jsonl``: one task instance per line with its ``history``). Sources:
``OpenHands/software-agent-sdk`` ``openhands-sdk/openhands/sdk/event/``,
``conversation/persistence_const.py`` and ``openhands/tools/think/``; ``OpenHands/OpenHands``
``openhands/events/`` (``stream.py``, ``event_store.py``), ``openhands/storage/locations.py``
and ``openhands/agenthub/codeact_agent/``; the samples in
``../shared/format-samples/openhands``.

A V0 session store is one session, the folder: its ``events/<n>.json`` in the numeric order
of ``<n>`` (the event's ``id``; ``10.json`` after ``9.json``; a missing number is skipped, as
OpenHands' ``EventStore`` skips it). Its ``event_cache/<start>-<end>.json`` pages are never
read: the stream writes each event's own file first and a page only once 25 events filled it,
so a page is a copy of files that exist, and OpenHands itself counts a store's events from
``events/`` alone (a store without it has none). The session is the folder (its name is the
conversation id); ``agent_state.pkl`` and other files beside ``events/`` are not read.

A ``think`` (V0 ``action: "think"``, CodeActAgent's ``think`` tool; V1 an ``ActionEvent`` of
``tool_name`` ``think``) runs nothing: the tool "just logs the thought" and answers "Your
thought has been logged." Its thought is the agent's words (a ``Text``: the tool call's
``thought`` argument, else the action's), not a call, and its observation carries no event;
the model response it came in is read as any other (its text and usage once). Read as a
call, a think would be a tool that never fails and never answers anything new, between calls
with no words: it would feed ``tools-without-text`` and the call detectors a fake tool, and
hide the agent's words from the text detectors.

V1 (events by ``kind``): a user ``MessageEvent`` starts a turn, an agent one is the agent's
words; an ``ActionEvent`` is a call (``tool_name``, ``tool_call.arguments``, ``tool_call_id``;
its ``thought`` is the agent's words, without ``<think>`` blocks; ``reasoning_content`` is
private); an ``ObservationEvent`` its result (``observation.is_error`` or a non-zero
``exit_code``: a failure); ``AgentErrorEvent`` (the scaffold refused the call: "Tool X not
found" also sets ``unknown_tool``) and ``UserRejectObservation`` are failed results;
``Condensation`` is a compaction (automatic; mechanical when it forgot events without a
summary). Usage: ``ConversationStateUpdateEvent`` ``key: "stats"`` holds the running totals
per LLM (``usage_to_metrics``): each change is one usage, the difference (its cost when the
totals report one). The session is ``base_state.json``'s ``id`` (else the folder), or, for
events one per line, the file.

V0 (events with ``action`` or ``observation``): a user ``message`` starts a turn; an agent
``message`` and the assistant text of a model response are the agent's words; an action with
``tool_call_metadata`` is the call ``function_name`` (arguments from the model response), an
action of a tool kind (``run``, ``edit``, ``read`` ...) without it is the call of that kind;
``system``, ``recall``, ``change_agent_state`` and their observations carry no event (a
``think`` is words, above); an observation answers the action its ``cause`` names: ``error``
is a failure ("is not registered": also ``unknown_tool``), ``run`` with a non-zero
``exit_code`` too, and an ``edit`` or ``read`` whose content starts ``ERROR:`` and a new line
(the runtime's answer when the file editor refused the command: "No replacement was
performed", "Invalid `path` parameter"); ``condensation`` is a compaction. Usage: per event ``llm_metrics`` (running totals: each
change is one usage), else each model response of ``tool_call_metadata`` once, else the
record's ``metrics`` (``token_usages`` / ``costs``) at its end. An evaluation record is a
session ``<file>#<instance_id>`` (a resolver record ``<file>#issue-<number>``); its ``error``
is the task's outcome: "maximum iteration" is ``exhausted(steps)``, "budget" ``exhausted(usd)``,
another error ``interrupted``; without a record (a trajectory, a session store) the reason of
the last ``agent_state_changed`` to ``error`` is read the same way (the controller's stop).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any

import orjson

from ...errors import InvalidEvent
from ..events import Call, Compaction, Event, Result, TaskEnd, Text, Usage
from ._base import Item, Turns, block_text, items_at, json_lines, one_value_per_line, read_document
from ._base import token_count_or_zero as _count

NAME = "openhands"
V1_KINDS = frozenset({
    "SystemPromptEvent", "MessageEvent", "ActionEvent", "ObservationEvent",
    "UserRejectObservation", "AgentErrorEvent", "ConversationErrorEvent",
    "ConversationStateUpdateEvent", "Condensation", "CondensationRequest",
    "CondensationSummaryEvent", "PauseEvent", "InterruptEvent", "LLMCompletionLogEvent",
    "HookExecutionEvent", "TokenEvent", "StreamingDeltaEvent", "ObservationBaseEvent"})
#: V0 actions that run no tool
_NOT_TOOLS = frozenset({"message", "system", "recall", "think", "change_agent_state", "null",
                        "finish", "reject", "condensation", "condensation_request"})
#: V0 observations of the file editor, and how the runtime starts their content when the editor
#: refused the command (``action_execution_server._execute_file_editor``: ``ERROR:\n`` and the
#: editor's message, "No replacement was performed ...", "Invalid `path` parameter ...")
_EDITOR = frozenset({"edit", "read"})
_EDITOR_ERROR = "ERROR:\n"
#: V0 observations that answer no tool call
_NO_ANSWER = frozenset({"agent_state_changed", "null"})
_EVENT_FILE = re.compile(r"^event-(\d{5,})-([0-9a-fA-F-]{8,})\.json$")
_STORE_FILE = re.compile(r"^(\d+)\.json$")  # a V0 session store's events/<n>.json
#: the tool that runs nothing: its thought is the agent's words
THINK = "think"
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
_UNKNOWN_TOOL = re.compile(
    r"Tool ['\"]?[^\s'\"]+['\"]? (?:is not registered|not found|does not exist)")
BASE_STATE = "base_state.json"
EVENTS = "events"
#: a directory holding one of these may be a V1 conversation (``sniff_folder`` decides)
FOLDER_SIGNS = frozenset({BASE_STATE, EVENTS})


def is_v1(value: Any) -> bool:
    return (type(value) is dict and isinstance(value.get("kind"), str)
            and value["kind"] in V1_KINDS and "id" in value)


def _is_v0_event(value: Any) -> bool:
    """A V0 event: an ``action`` or an ``observation`` (the earliest ones have no ``source``,
    ``id`` or ``cause``: each observation follows its action)."""
    return type(value) is dict and ("action" in value or "observation" in value)


def is_v0_record(value: Any) -> bool:
    """An evaluation (or resolver) record: its ``history`` of V0 events."""
    return (type(value) is dict and isinstance(value.get("history"), list)
            and any(k in value for k in ("instance_id", "metrics", "issue", "instruction"))
            and all(_is_v0_event(e) for e in value["history"][:8]))


def is_line(value: Any) -> bool:
    return is_v1(value) or is_v0_record(value)


def sniff(value: Any) -> bool:
    """A V1 event, a V0 evaluation record, or a V0 trajectory (an array of events)."""
    if type(value) is list:
        return bool(value) and all(_is_v0_event(e) for e in value[:8])
    return is_line(value)


def sniff_folder(directory: Path, names: frozenset[str]) -> bool:
    """A V1 conversation folder (an ``events`` folder of ``event-<index>-<id>.json`` files,
    beside ``base_state.json`` or not) or a V0 session store (``events/<n>.json``)."""
    return EVENTS in names and _folder_kind(directory) is not None


def _folder_kind(directory: Path) -> str | None:
    """``"v1"``, ``"v0"`` or None: what the first event file of ``directory/events`` holds
    (V1: the lowest ``event-<index>`` file; V0: the lowest ``<n>.json``)."""
    events = directory / EVENTS
    try:
        names = [p.name for p in events.iterdir()]
    except OSError:
        return None
    v1 = sorted(n for n in names if _EVENT_FILE.match(n))
    v0 = sorted((int(m.group(1)), n) for n in names if (m := _STORE_FILE.match(n)))
    kind, first, test = (("v1", v1[0], is_v1) if v1 else
                         ("v0", v0[0][1], _is_v0_event) if v0 else (None, None, None))
    if first is None or test is None:
        return None
    try:
        return kind if test(orjson.loads((events / first).read_bytes())) else None
    except (OSError, orjson.JSONDecodeError):
        return None


def _text(content: Any) -> str:
    return _THINK.sub("", block_text(content)).strip()


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and value >= 0 else 0.0


def _decoded(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value


class _Totals:
    """Running usage totals (V1 stats, V0 llm_metrics), charged by difference."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[int, int, int, int, float]] = {}

    def change(self, key: str, usage: Any, cost: Any, model: Any) -> Usage | None:
        usage = usage if isinstance(usage, dict) else {}
        now = (_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")),
               _count(usage.get("cache_read_tokens")), _count(usage.get("cache_write_tokens")),
               _number(cost))
        before = self.last.get(key, (0, 0, 0, 0, 0.0))
        if now == before:
            return None
        self.last[key] = now
        prompt, completion, read, write, spent = (max(0, a - b) if not isinstance(a, float)
                                                  else max(0.0, a - b)
                                                  for a, b in zip(now, before, strict=True))
        name = model if isinstance(model, str) and model and model != "default" else None
        return Usage(model=name, input_tokens=int(prompt), output_tokens=int(completion),
                     cache_read_tokens=int(read), cache_write_tokens=int(write),
                     cost_usd=round(float(spent), 9) if spent else None)  # nano-dollars


# -- V1 ------------------------------------------------------------------------------------------

class _V1:
    def __init__(self) -> None:
        self.turns = Turns()
        self.totals = _Totals()

    def events(self, event: dict[str, Any]) -> Iterator[Event]:
        kind, source = event["kind"], event.get("source")
        if kind == "MessageEvent":
            message = event.get("llm_message")
            content = message.get("content") if isinstance(message, dict) else None
            if source == "user":
                yield from self.turns.start()
            elif source == "agent":
                text = _text(content)
                if text:
                    yield Text(text)
        elif kind == "ActionEvent":
            text = _text(event.get("thought"))
            if text:
                yield Text(text)
            name = event.get("tool_name")
            if not isinstance(name, str):
                raise InvalidEvent("an ActionEvent needs a string 'tool_name'")
            call = event.get("tool_call")
            args = call.get("arguments") if isinstance(call, dict) else None
            if name == THINK:  # runs nothing: the agent's words
                action = _dict(event.get("action"))
                given = _dict(_decoded(args))
                thought = _text(given.get("thought", action.get("thought")))
                if thought:
                    yield Text(thought)
                return
            yield Call(name, args if args is not None else event.get("action"),
                       _str(event.get("tool_call_id")))
        elif kind == "ObservationEvent" and event.get("tool_name") != THINK:
            observation = event.get("observation")
            observation = observation if isinstance(observation, dict) else {}
            text = block_text(observation.get("content"))
            code = observation.get("exit_code")
            failed = observation.get("is_error") is True or (
                isinstance(code, int) and not isinstance(code, bool) and code != 0)
            yield Result(name=_str(event.get("tool_name")), id=_str(event.get("tool_call_id")),
                         error=(text or True) if failed else None, payload=text)
        elif kind == "AgentErrorEvent":
            error = event.get("error")
            text = error if isinstance(error, str) else ""
            yield Result(name=_str(event.get("tool_name")), id=_str(event.get("tool_call_id")),
                         error=text or True, payload=text,
                         unknown_tool=_UNKNOWN_TOOL.search(text) is not None)
        elif kind == "UserRejectObservation":
            reason = event.get("rejection_reason")
            text = reason if isinstance(reason, str) else "rejected"
            yield Result(name=_str(event.get("tool_name")), id=_str(event.get("tool_call_id")),
                         error=text or True, payload=text)
        elif kind == "Condensation":
            yield Compaction(mechanical=not event.get("summary"), automatic=True)
        elif kind == "ConversationStateUpdateEvent" and event.get("key") == "stats":
            value = _decoded(event.get("value"))
            metrics = value.get("usage_to_metrics") if isinstance(value, dict) else None
            for key, entry in metrics.items() if isinstance(metrics, dict) else ():
                if isinstance(entry, dict):
                    usage = self.totals.change(key, entry.get("accumulated_token_usage"),
                                               entry.get("accumulated_cost"),
                                               entry.get("model_name"))
                    if usage is not None:
                        yield usage


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _v1_lines(path: Path, name: str, lines: Iterator[tuple[int, Any]],
              where: Path | None = None) -> Iterator[Item]:
    state = _V1()
    last = 0
    for number, value in lines:
        last = number
        source = where if where is not None else path
        if isinstance(value, InvalidEvent):
            yield Item(name, number, error=value)
            continue
        if not is_v1(value):
            yield Item(name, number, error=InvalidEvent(
                "not an OpenHands event (expected an object with a 'kind' such as ActionEvent "
                "or ObservationEvent, and an 'id')", source=str(source), line=number))
            continue
        yield from items_at(name, number, source, partial(state.events, value))
    for event in state.turns.end():
        yield Item(name, last, event)


def _folder(directory: Path, name: str) -> Iterator[Item]:
    """A V1 conversation folder: its event files in the order of their index."""
    try:
        state = orjson.loads((directory / BASE_STATE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        state = None
    ident = state.get("id") if isinstance(state, dict) else None
    session = ident if isinstance(ident, str) and ident else name
    events = directory / EVENTS
    found = []
    for path in events.iterdir():
        match = _EVENT_FILE.match(path.name)
        if match is not None:
            found.append((int(match.group(1)), path))
    found.sort()

    def lines() -> Iterator[tuple[int, Any]]:
        for index, path in found:
            try:
                yield index, orjson.loads(path.read_bytes())
            except orjson.JSONDecodeError as exc:
                yield index, InvalidEvent(f"not JSON ({exc})", source=str(path))

    yield from _v1_lines(directory, session, lines(), events)


def _store(directory: Path, name: str) -> Iterator[Item]:
    """A V0 session store: ``events/<n>.json`` in the numeric order of ``<n>``, one session
    (the folder); each event at its number, located at ``<folder>/events:<n>``. The
    ``event_cache/`` pages (copies of full pages of 25) are not read."""
    events = directory / EVENTS
    found = sorted((int(m.group(1)), path) for path in events.iterdir()
                   if (m := _STORE_FILE.match(path.name)))
    history: list[Any] = []
    for _number, path in found:
        try:
            history.append(orjson.loads(path.read_bytes()))
        except orjson.JSONDecodeError as exc:
            history.append(InvalidEvent(f"not JSON ({exc})", source=str(path)))
    yield from _history(events, name, history, None, numbers=[n for n, _ in found])


# -- V0 ------------------------------------------------------------------------------------------

class _V0:
    def __init__(self, history: list[Any], model: Any = None) -> None:
        self.turns = Turns()
        self.totals = _Totals()
        self.model = model
        self.by_id: dict[Any, tuple[str | None, str]] = {}  # event id -> (call id, tool)
        self.responses: set[str] = set()  # model responses whose text and usage were given
        self.metered = any(isinstance(e, dict) and e.get("llm_metrics") for e in history)
        self.charged = False
        self.calls = 0  # calls of events without an id (the earliest shape)
        # the reason of the last agent_state_changed to "error" (the controller's stop: "Agent
        # reached maximum iteration ..."), None once the agent runs again
        self.stopped: str | None = None

    def events(self, event: dict[str, Any]) -> Iterator[Event]:
        if "action" in event:
            yield from self.action(event)
        else:
            yield from self.observation(event)

    def action(self, event: dict[str, Any]) -> Iterator[Event]:
        action, source = event.get("action"), event.get("source")
        args = _dict(event.get("args"))
        metadata = event.get("tool_call_metadata")
        response = metadata.get("model_response") if isinstance(metadata, dict) else None
        yield from self.response(response, event)
        if action == THINK:  # runs nothing: the agent's words
            words = _thought(response, metadata, args, event)
            if words:
                yield Text(words)
            return
        if action == "message":
            text = args.get("content", event.get("content", event.get("message")))
            if source is None:  # the earliest shape: the task first, then the agent's
                source = "agent" if self.turns.open else "user"
            if source == "user":
                yield from self.turns.start()
            elif isinstance(text, str) and text.strip() and not isinstance(metadata, dict):
                yield Text(text.strip())
            return
        if action == "condensation":
            yield Compaction(mechanical=not args.get("summary"), automatic=True)
            return
        if action == "finish":  # the agent's last words
            final = args.get("final_thought") or args.get("thought") or event.get("thought")
            if isinstance(final, str) and final.strip():
                yield Text(final.strip())
        if isinstance(metadata, dict) and isinstance(metadata.get("function_name"), str):
            name = metadata["function_name"]
            ident = _str(metadata.get("tool_call_id"))
            yield Call(name, _arguments(response, ident, args), ident)
        elif isinstance(action, str) and action not in _NOT_TOOLS:
            self.calls += 1
            key = event.get("id", f"call-{self.calls}")
            name, ident = action, f"event-{key}"
            if not args:  # the earliest shape: the arguments and the agent's words beside it
                args = {k: v for k, v in event.items() if k not in ("action", "thought")}
                thought = event.get("thought")
                if isinstance(thought, str) and thought.strip():
                    yield Text(thought.strip())
            yield Call(name, args, ident)
        else:
            return
        self.by_id[event.get("id", f"call-{self.calls}")] = (ident, name)

    def response(self, response: Any, event: dict[str, Any]) -> Iterator[Event]:
        """A model response's text and (without ``llm_metrics``) usage, once per response;
        ``llm_metrics``' change at this event."""
        if self.metered and event.get("llm_metrics"):
            metrics = event["llm_metrics"]
            model = response.get("model") if isinstance(response, dict) else self.model
            usage = self.totals.change("default", metrics.get("accumulated_token_usage"),
                                       metrics.get("accumulated_cost"), model)
            if usage is not None:
                self.charged = True
                yield usage
        if not isinstance(response, dict) or not isinstance(response.get("id"), str) or \
                response["id"] in self.responses:
            return
        self.responses.add(response["id"])
        choices = response.get("choices")
        message = choices[0].get("message") if isinstance(choices, list) and choices and \
            isinstance(choices[0], dict) else None
        text = _text(message.get("content")) if isinstance(message, dict) else ""
        if text:
            yield Text(text)
        usage = response.get("usage")
        if not self.metered and isinstance(usage, dict):
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            model = response.get("model")
            self.charged = True
            yield Usage(model=model if isinstance(model, str) else None,
                        input_tokens=_count(usage.get("prompt_tokens")),
                        output_tokens=_count(usage.get("completion_tokens")),
                        cache_read_tokens=_count(cached))

    def observation(self, event: dict[str, Any]) -> Iterator[Event]:
        kind = event.get("observation")
        if kind == "agent_state_changed":
            extras = _dict(event.get("extras"))
            reason = extras.get("reason")
            self.stopped = reason if extras.get("agent_state") == "error" and \
                isinstance(reason, str) and reason else None
        if kind in _NO_ANSWER:
            return
        cause = event.get("cause")
        if cause is None and "id" not in event and self.by_id:  # the earliest shape
            cause = next(reversed(self.by_id))
        call = self.by_id.pop(cause, None)
        if call is None:
            return  # it answers no call read (a message's, or one before the recording)
        ident, name = call
        content = event.get("content")
        text = content if isinstance(content, str) else block_text(content)
        extras = _dict(event.get("extras"))
        meta = _dict(extras.get("metadata"))
        code = meta.get("exit_code", extras.get("exit_code", event.get("exit_code")))
        failed = kind == "error" or (isinstance(code, int) and not isinstance(code, bool)
                                     and code != 0) or event.get("success") is False or (
            kind in _EDITOR and text.startswith(_EDITOR_ERROR))
        yield Result(name=name, id=ident, error=(text or True) if failed else None,
                     payload=text, unknown_tool=kind == "error" and
                     _UNKNOWN_TOOL.search(text) is not None)

    def record_usage(self, metrics: Any) -> Iterator[Usage]:
        """An evaluation record's ``metrics`` when no event carried usage."""
        if self.charged or not isinstance(metrics, dict):
            return
        usages = metrics.get("token_usages")
        costs = metrics.get("costs")
        costs = costs if isinstance(costs, list) else []
        if isinstance(usages, list) and usages:
            spent = [_cost(c) for c in costs] if len(costs) == len(usages) else []
            for n, usage in enumerate(usages):
                if isinstance(usage, dict):
                    model = usage.get("model")
                    yield Usage(model=model if isinstance(model, str) else None,
                                input_tokens=_count(usage.get("prompt_tokens")),
                                output_tokens=_count(usage.get("completion_tokens")),
                                cache_read_tokens=_count(usage.get("cache_read_tokens")),
                                cache_write_tokens=_count(usage.get("cache_write_tokens")),
                                cost_usd=spent[n] if spent else None)
            return
        for cost in costs:  # one model call's cost each (older records: no tokens)
            value = _cost(cost)
            if value is not None:
                model = cost.get("model") if isinstance(cost, dict) else None
                yield Usage(model=model if isinstance(model, str) else None, cost_usd=value)


def _cost(value: Any) -> float | None:
    if isinstance(value, dict):
        value = value.get("cost")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and value >= 0 else None


def _message(response: Any) -> dict[str, Any] | None:
    """A model response's (first choice's) message."""
    choices = response.get("choices") if isinstance(response, dict) else None
    message = choices[0].get("message") if isinstance(choices, list) and choices and \
        isinstance(choices[0], dict) else None
    return message if isinstance(message, dict) else None


def _thought(response: Any, metadata: Any, args: dict[str, Any], event: dict[str, Any]) -> str:
    """A V0 ``think``'s thought: the ``thought`` argument of its tool call, else the action's
    (which CodeActAgent starts with the response's text, read already: not read twice)."""
    ident = _str(metadata.get("tool_call_id")) if isinstance(metadata, dict) else None
    given = _decoded(_arguments(response, ident, {}))
    thought = given.get("thought") if isinstance(given, dict) else None
    if isinstance(thought, str):
        return _text(thought)
    thought = args.get("thought", event.get("thought"))
    if not isinstance(thought, str):
        return ""
    message = _message(response)
    said = _text(message.get("content")) if message is not None else ""
    thought = _text(thought)
    return thought[len(said):].strip() if said and thought.startswith(said) else thought


def _arguments(response: Any, ident: str | None, args: dict[str, Any]) -> Any:
    """The arguments the model gave the call (its response's tool call of that id), else the
    action's ``args``."""
    message = _message(response)
    for call in (message.get("tool_calls") or ()) if isinstance(message, dict) else ():
        if isinstance(call, dict) and call.get("id") == ident:
            function = call.get("function")
            if isinstance(function, dict) and "arguments" in function:
                return function["arguments"]
    return args


def _responded(event: dict[str, Any]) -> bool:
    """An agent's action: one model response (the earliest records have no ``source``: there
    every action but the user's ``message`` is the agent's)."""
    source = event.get("source")
    return "action" in event and (source == "agent" or source is None
                                  and event.get("action") != "message")


def _history(path: Path, name: str, history: list[Any], record: dict[str, Any] | None,
             number: int | None = None, numbers: list[int] | None = None) -> Iterator[Item]:
    """A V0 event list; ``number``: the line of its record (its events are at that line);
    ``numbers``: each event's own number (a session store's file numbers)."""
    model = None
    if record is not None:
        metadata = record.get("metadata")
        config = metadata.get("llm_config") if isinstance(metadata, dict) else None
        model = config.get("model") if isinstance(config, dict) else None
    state = _V0(history, model)
    read: list[tuple[bool, int, list[Item]]] = []  # (a model response's action, at, items)
    for position, event in enumerate(history, start=1):
        at = numbers[position - 1] if numbers is not None else \
            number if number is not None else position
        if isinstance(event, InvalidEvent):
            read.append((False, at, [Item(name, at, error=event)]))
            continue
        if not _is_v0_event(event):
            read.append((False, at, [Item(name, at, error=InvalidEvent(
                "an OpenHands event needs 'source' and an 'action' or 'observation'",
                source=str(path), line=at))]))
            continue
        read.append((_responded(event), at, list(items_at(name, at, path,
                                                          partial(state.events, event)))))
    end = (numbers[-1] if numbers else 0) if numbers is not None else \
        number if number is not None else len(history)
    usages = list(state.record_usage(record.get("metrics"))) if record is not None else []
    # the record's per-call bill: one usage per model response, so when the counts agree each
    # goes before its response's action (as a usage event precedes its content); else at the
    # end, where a run of them would read as empty responses
    placed = bool(usages) and len(usages) == sum(1 for responded, _, _ in read if responded)
    given = 0
    for responded, at, items in read:
        if placed and responded:
            yield Item(name, at, usages[given])
            given += 1
        yield from items
    if record is not None and not placed:
        for usage in usages:
            yield Item(name, end, usage)
    # the task's outcome: an evaluation record's error, else (a trajectory, a session store)
    # the controller's last stop, as the session's last agent_state_changed says
    outcome = _outcome(record.get("error") if record is not None else None) or \
        _outcome(state.stopped)
    if outcome is not None:
        if not state.turns.open:
            for event in state.turns.start():
                yield Item(name, end, event)
        yield Item(name, end, outcome)
    for turn_end in state.turns.end():
        yield Item(name, end, turn_end)


def _outcome(error: Any) -> TaskEnd | None:
    """An evaluation record's ``error`` (or the controller's stop reason) as the task's
    outcome."""
    if not isinstance(error, str) or not error:
        return None
    lowered = error.lower()
    if "maximum iteration" in lowered:
        return TaskEnd(unfinished=error, exhausted="steps")
    if "budget" in lowered:
        return TaskEnd(unfinished=error, exhausted="usd")
    return TaskEnd(unfinished=error, interrupted=error)


def _record_name(name: str, record: dict[str, Any], number: int) -> str:
    ident = record.get("instance_id")
    if isinstance(ident, (str, int)) and not isinstance(ident, bool) and str(ident):
        return f"{name}#{ident}"
    issue = record.get("issue")
    if isinstance(issue, dict) and isinstance(issue.get("number"), int):
        return f"{name}#issue-{issue['number']}"
    return f"{name}#{number}"




def _lines(path: Path, name: str) -> Iterator[Item]:
    """A file of lines: V1 events (one session, the file: from its first event on, every
    line is one) or V0 evaluation records (a session each)."""
    lines = json_lines(path)
    for number, value in lines:
        if is_v1(value):
            yield from _v1_lines(path, name, chain([(number, value)], lines))
            return
        if isinstance(value, InvalidEvent):
            yield Item(name, number, error=value)
        elif is_v0_record(value):
            yield from _history(path, _record_name(name, value, number), value["history"],
                                value, number)
        else:
            yield Item(name, number, error=InvalidEvent(
                "not an OpenHands event or evaluation record (expected a 'kind', or a "
                "'history' of events)", source=str(path), line=number))


def read(path: Path, name: str, document: Any = None) -> Iterator[Item]:
    if path.is_dir():
        return _store(path, name) if _folder_kind(path) == "v0" else _folder(path, name)
    if document is None and one_value_per_line(path):
        return _lines(path, name)
    document = read_document(path, document)
    if isinstance(document, list) and sniff(document):
        return _history(path, name, document, None)
    if is_v0_record(document):
        return _history(path, _record_name(name, document, 1), document["history"], document)
    if is_v1(document):
        return _v1_lines(path, name, iter([(1, document)]))
    raise InvalidEvent("not an OpenHands conversation (expected V1 events, a V0 trajectory "
                       "array or an evaluation record with 'history')", source=str(path))
