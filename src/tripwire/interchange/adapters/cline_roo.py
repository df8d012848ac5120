"""Cline and Roo Code: the extensions' task folders (``.../globalStorage/<extension>/tasks/
<task id>/``: ``api_conversation_history.json``, ``ui_messages.json``, ``task_metadata.json``;
a folder is one transcript) and Cline's SDK / CLI sessions (``~/.cline/data/sessions/<id>/
<id>.messages.json``). Sources: Cline ``apps/vscode/src/shared/ExtensionMessage.ts`` and
``src/core/task``, Roo Code ``packages/types/src/message.ts`` and ``src/core/prompts/
responses.ts`` (``formatResponse``), Cline ``sdk/packages/core``; the samples in
``../shared/format-samples/cline-roo``.

A task folder: ``api_conversation_history.json`` is what the model saw, an Anthropic Messages
list (each message with its ``ts``). The session is the task (the folder's name, its id).

- A user message starts a turn, unless it answers tools: ``tool_result`` blocks (native tool
  calling: ``is_error`` is a failure), or the older XML protocol's ``[<tool> for '...'] Result:``
  text (its answer is the text blocks after that header, less ``<environment_details>``; Roo's
  ``The tool execution failed with the following error`` and ``The user denied this
  operation`` are failures) — or is the extension's own nag (``[ERROR] You did not use a
  tool ...``: no event).
- An assistant message: ``tool_use`` blocks are calls; in the XML protocol, a tool's element in
  the text (``<read_file><path>a.py</path></read_file>``, for the tools Cline and Roo define)
  is the call, its child elements the arguments; the rest of the text is the agent's words,
  less ``<thinking>`` (private, as ``thinking`` blocks).
- A condensed history's summary (``isSummary``) is a compaction; Roo's sliding-window truncation
  marker (``truncationId``) a mechanical one.
- Usage: ``ui_messages.json``'s ``api_req_started`` messages, one per model request
  (``tokensIn`` / ``tokensOut`` / ``cacheReads`` / ``cacheWrites`` / ``cost``, as JSON in
  their ``text``; with ``apiProtocol: "openai"`` the input counts the cached tokens, else it is
  the uncached rest), each placed by its ``ts`` before the first model message after it.

A Cline SDK session (``{version, agent, sessionId, system_prompt, messages}``): messages with
``tool_use`` / ``tool_result`` blocks (``is_error``), ``text``, ``thinking`` (private), ``file``
(an attachment); each assistant message's ``metrics`` is its usage (``inputTokens`` counts the
cached tokens) with its ``cost``. The session is ``sessionId``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ...errors import InvalidEvent
from ..events import Call, Compaction, Event, Result, Text, Usage
from ._base import Item, Turns, anthropic_call, anthropic_result, positioned, read_document
from ._base import token_count_or_zero as _count

NAME = "cline-roo"
HISTORY = "api_conversation_history.json"
UI = "ui_messages.json"
#: a directory holding this may be a task folder (``sniff_folder`` decides from its content)
FOLDER_SIGNS = frozenset({HISTORY})
#: the tools of the XML protocol (Cline's and Roo Code's)
XML_TOOLS = frozenset({
    "read_file", "write_to_file", "apply_diff", "insert_content", "search_and_replace",
    "search_files", "list_files", "list_code_definition_names", "execute_command",
    "browser_action", "use_mcp_tool", "access_mcp_resource", "ask_followup_question",
    "attempt_completion", "switch_mode", "new_task", "fetch_instructions", "codebase_search",
    "update_todo_list", "replace_in_file", "plan_mode_respond", "act_mode_respond", "new_rule",
    "condense", "report_bug", "load_mcp_documentation", "web_fetch", "run_slash_command",
    "generate_image", "summarize_task", "focus_chain", "edit_file", "search_replace"})
_XML_CALL = re.compile(r"<(" + "|".join(sorted(XML_TOOLS)) + r")>(.*?)</\1>", re.DOTALL)
_PARAM = re.compile(r"<(\w+)>(.*?)(?:</\1>|$)", re.DOTALL)
#: a tool's element the extension cut short when it ran the tool (no closing tag)
_XML_OPEN = re.compile(r"<(" + "|".join(sorted(XML_TOOLS)) + r")>(.*)$", re.DOTALL)
#: the note the extension appends to a response it cut at its tool use
_INTERRUPTED = re.compile(r"\s*\[Response interrupted by [^\]]*\]\s*$")
_THINKING = re.compile(r"<thinking>.*?(?:</thinking>|$)", re.DOTALL)
_RESULT_HEADER = re.compile(r"^\[([\w-]+)(?: for [^\]]*)?\] Result:")
_FAILED = ("The tool execution failed with the following error",
           "The user denied this operation", "<error>")
_UNKNOWN_TOOL = re.compile(
    r"^(?:Error: )?Unknown tool|Tool \"[^\"]+\" (?:not found|does not exist)")
_NAG = "[ERROR] You did not use a tool"
_ENVIRONMENT = "<environment_details>"


def _is_history(value: Any) -> bool:
    """An API history: a list of ``{role, content, ts}`` messages."""
    return (type(value) is list and bool(value)
            and all(type(m) is dict and m.get("role") in ("user", "assistant")
                    and "content" in m and isinstance(m.get("ts"), int) for m in value[:8]))


def is_sdk_session(value: Any) -> bool:
    return (type(value) is dict and isinstance(value.get("sessionId"), str)
            and isinstance(value.get("messages"), list)
            and any(k in value for k in ("agent", "system_prompt", "updated_at")))


def sniff(value: Any) -> bool:
    """A Cline SDK session's messages, or a task's API history (its messages carry ``ts``)."""
    return is_sdk_session(value) or _is_history(value)


def sniff_folder(directory: Path, names: frozenset[str]) -> bool:
    if HISTORY not in names:
        return False
    try:
        return _is_history(orjson.loads((directory / HISTORY).read_bytes()))
    except (OSError, orjson.JSONDecodeError):
        return False


def _cost(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and value >= 0 else None


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"
            and isinstance(b.get("text"), str)] if isinstance(content, list) else []


def _failed(text: str) -> bool:
    return text.lstrip().startswith(_FAILED)


class _Task:
    """One task's reading state."""

    def __init__(self, usage: list[tuple[int, Usage]]) -> None:
        self.turns = Turns()
        self.names: dict[str, str] = {}  # native call id -> tool
        self.pending: list[tuple[str, str]] = []  # XML calls awaiting their result, in order
        self.calls = 0
        self.usage = usage  # (ts, usage) of the model requests, by time
        self.given = 0  # how many of them were given
        self.truncations: set[Any] = set()

    def usage_before(self, ts: Any) -> Iterator[Usage]:
        """The model requests made before ``ts`` not given yet."""
        if not isinstance(ts, int):
            return
        stop = bisect.bisect_left(self.usage, ts, key=lambda u: u[0])
        while self.given < stop:
            yield self.usage[self.given][1]
            self.given += 1

    def message(self, message: dict[str, Any]) -> Iterator[Event]:
        role, content = message.get("role"), message.get("content")
        if role == "assistant":
            yield from self.usage_before(message.get("ts"))
        if message.get("isSummary") is True:
            yield Compaction(mechanical=False, automatic=False)
            return
        marker = message.get("truncationId")
        if marker is not None:  # the marker the sliding window left: no one's message
            if marker not in self.truncations:
                self.truncations.add(marker)
                yield Compaction(mechanical=True, automatic=True)
            return
        if role == "user":
            yield from self.user(content)
        elif role == "assistant":
            yield from self.assistant(content)

    def user(self, content: Any) -> Iterator[Event]:
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        native = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        for block in native:
            result = anthropic_result(block, self.names)
            if isinstance(result.payload, str) and result.error and \
                    _UNKNOWN_TOOL.search(result.payload):
                result = Result(result.name, result.id, result.error, payload=result.payload,
                                unknown_tool=True)
            yield result
        texts = _texts(content)
        header = _RESULT_HEADER.match(texts[0]) if texts else None
        if header is not None:
            answer = "\n".join(t for t in texts[1:] if not t.startswith(_ENVIRONMENT))
            tool = header.group(1)
            ident = None
            for n, (pending, name) in enumerate(self.pending):
                if name == tool:
                    ident = pending
                    del self.pending[n]
                    break
            yield Result(name=tool, id=ident, error=answer or True if _failed(answer) else None,
                         payload=answer)
            return
        if native:
            return
        if texts and texts[0].startswith(_NAG):
            return  # the extension's reminder, not the user
        yield from self.turns.start()

    def assistant(self, content: Any) -> Iterator[Event]:
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for block in blocks:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use":
                yield anthropic_call(block, self.names)
            elif kind == "text" and isinstance(block.get("text"), str):
                yield from self.xml(block["text"])

    def xml(self, text: str) -> Iterator[Event]:
        text = _INTERRUPTED.sub("", _THINKING.sub("", text))
        words: list[str] = []
        calls: list[Call] = []
        at = 0
        found = [(m.start(), m.end(), m.group(1), m.group(2)) for m in _XML_CALL.finditer(text)]
        rest = _XML_OPEN.search(text, found[-1][1] if found else 0)
        if rest is not None:  # cut short when the extension ran it
            found.append((rest.start(), len(text), rest.group(1), rest.group(2)))
        for start, end, tool, body in found:
            words.append(text[at:start])
            at = end
            self.calls += 1
            ident = f"xml-{self.calls}"
            args = {name: value.strip() for name, value in _PARAM.findall(body)}
            self.pending.append((ident, tool))
            calls.append(Call(tool, args, ident))
        words.append(text[at:])
        said = "\n".join(w.strip() for w in words if w.strip())
        if said:
            yield Text(said)
        yield from calls


def _ui_usage(folder: Path) -> list[tuple[int, Usage]]:
    """The model requests of a task's ``ui_messages.json`` (none when it is missing)."""
    try:
        ui = orjson.loads((folder / UI).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return []
    found = []
    for message in ui if isinstance(ui, list) else ():
        if not isinstance(message, dict) or message.get("say") != "api_req_started" or \
                not isinstance(message.get("ts"), int):
            continue
        try:
            info = orjson.loads(message.get("text") or "{}")
        except orjson.JSONDecodeError:
            continue
        if not isinstance(info, dict):
            continue
        read, write = _count(info.get("cacheReads")), _count(info.get("cacheWrites"))
        prompt = _count(info.get("tokensIn"))
        if info.get("apiProtocol") != "openai":  # Anthropic's count: the uncached rest
            prompt += read + write
        found.append((message["ts"], Usage(
            input_tokens=prompt, output_tokens=_count(info.get("tokensOut")),
            cache_read_tokens=read, cache_write_tokens=write, cost_usd=_cost(info.get("cost")))))
    found.sort(key=lambda u: u[0])
    return found


def _task(folder: Path, history: list[Any], name: str, source: Path) -> Iterator[Item]:
    task = _Task(_ui_usage(folder))
    yield from positioned(name, source, history, task.message)
    end = len(history)
    while task.given < len(task.usage):  # requests after the last message (cancelled ...)
        yield Item(name, end, task.usage[task.given][1])
        task.given += 1
    for event in task.turns.end():
        yield Item(name, end, event)


def _sdk(document: dict[str, Any], path: Path, name: str) -> Iterator[Item]:
    turns, names = Turns(), dict[str, str]()
    session = document["sessionId"] or name

    def events(message: dict[str, Any]) -> Iterator[Event]:
        role, content = message.get("role"), message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if role == "user":
            results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
            for block in results:
                yield anthropic_result(block, names)
            if not results:
                yield from turns.start()
            return
        if role != "assistant":
            return
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                yield anthropic_call(block, names)
            elif block.get("type") == "text" and isinstance(block.get("text"), str) \
                    and block["text"].strip():
                yield Text(block["text"])
        metrics = message.get("metrics")
        if isinstance(metrics, dict):
            info = message.get("modelInfo")
            model = info.get("id") if isinstance(info, dict) else None
            yield Usage(model=model if isinstance(model, str) else None,
                        input_tokens=_count(metrics.get("inputTokens")),
                        output_tokens=_count(metrics.get("outputTokens")),
                        cache_read_tokens=_count(metrics.get("cacheReadTokens")),
                        cache_write_tokens=_count(metrics.get("cacheWriteTokens")),
                        cost_usd=_cost(metrics.get("cost")))

    messages = document["messages"]
    yield from positioned(session, path, messages, events)
    for event in turns.end():
        yield Item(session, len(messages), event)


def read(path: Path, name: str, document: Any = None) -> Iterator[Item]:
    """A task folder (or its ``api_conversation_history.json``), or an SDK session's
    messages file."""
    if path.is_dir():
        folder, source = path, path / HISTORY
        document = read_document(source)
        name = path.name or name
    else:
        folder, source = path.parent, path
        document = read_document(path, document)
        if is_sdk_session(document):
            return _sdk(document, path, name)
        name = path.parent.name or name
    if not _is_history(document):
        raise InvalidEvent("not a Cline / Roo Code task (expected api_conversation_history.json: "
                           "a JSON array of {role, content, ts} messages), nor a Cline SDK "
                           "session's messages", source=str(source))
    return _task(folder, document, name, source)
