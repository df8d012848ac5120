"""mini-swe-agent trajectories (``<instance>.traj.json``): ``{"info", "messages",
"trajectory_format": "mini-swe-agent-1"}``, read whole (mini-swe-agent writes the file whole).

mini-swe-agent has one tool and no tool-call structure: an assistant message holds its
reasoning and exactly one fenced ```` ```bash ```` block, which is the call ``bash`` with
``{"command": ...}``. The user message after it is the call's result: ``<returncode>N``
(non-zero: a failure) or a timeout notice (a failure), or, for the final
``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` command, the submitted diff. An assistant message
with no block or several is rejected by the harness (it runs nothing): its text is kept and the
harness's format-error reply is skipped. The first user message (the task) starts the one turn.
Usage: the file records only the run's total (``info.model_stats.instance_cost``), given as one
usage event at the end.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import InvalidEvent
from ..events import Call, Result, Text, TurnEnd, TurnStart, Usage
from ._base import Item, command_args, read_document, run_total

NAME = "mini-swe-agent"
TOOL = "bash"
#: an action: a ```` ```bash ```` fence, whitespace up to a newline, the command, ``\n```````
ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_FENCE = "```bash"
_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")


def sniff(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        return False
    fmt = value.get("trajectory_format")
    info = value.get("info")
    return (isinstance(fmt, str) and fmt.startswith("mini-swe-agent")) or (
        isinstance(info, dict) and "mini_version" in info)


def actions_of(content: str) -> list[str]:
    """The commands of an assistant message: ``ACTION.findall(content)``, found with
    ``str.find`` (the regex's lazy scan of each command took half the reader's time;
    ``tests/test_adapters.py`` checks both agree on generated and corpus messages)."""
    found = []
    at = content.find(_FENCE)
    while at >= 0:
        start = at + len(_FENCE)
        run = start  # the whitespace after the fence: \s* then the newline it ends with
        while run < len(content) and content[run].isspace():
            run += 1
        newline = content.rfind("\n", start, run)
        if newline >= 0:
            end = content.find("\n```", newline + 1)
            if end >= 0:
                found.append(content[newline + 1:end])
                at = content.find(_FENCE, end + 4)
                continue
            # no closing fence after the run: the regex backs up to the run's newline before
            # the last, which matches (with an empty-ish command) if the run ends in "\n```"
            before = content.rfind("\n", start, newline)
            if before >= 0 and newline + 1 == run and content.startswith("```", run):
                found.append(content[before + 1:newline])
                at = content.find(_FENCE, newline + 4)
                continue
        at = content.find(_FENCE, at + 1)
    return found


def result_of(content: str, ident: str) -> Result:
    """The harness's answer to the command: a failure on a non-zero return code or a timeout."""
    code = _RETURNCODE.match(content)
    if code is not None:
        error = content if int(code.group(1)) != 0 else None
    else:
        error = content if content.startswith("The last command") else None
    return Result(name=TOOL, id=ident, error=error, payload=content)


def read(path: Path, name: str, document: Any = None) -> Iterator[Item]:
    document = read_document(path, document)
    if not sniff(document):
        raise InvalidEvent("not a mini-swe-agent trajectory (expected an object with "
                           "'messages' and trajectory_format mini-swe-agent-1)",
                           source=str(path))
    messages = document["messages"]
    pending: str | None = None  # the id of the command awaiting its output
    started = False
    calls = 0
    for number, message in enumerate(messages, start=1):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            yield Item(name, number, error=InvalidEvent(
                "a message must be an object with string 'content'", source=str(path),
                line=number))
            continue
        role, content = message.get("role"), message["content"]
        if role == "assistant":
            actions = actions_of(content)
            thought = (content[:content.find("```")] if actions else content).strip()
            if thought:
                yield Item(name, number, Text(thought))
            if len(actions) == 1:
                calls += 1
                pending = f"call-{calls}"
                yield Item(name, number, Call(TOOL, command_args(actions[0]), pending))
            elif not thought:
                yield Item(name, number)
        elif role == "user" and pending is not None:
            yield Item(name, number, result_of(content, pending))
            pending = None
        elif role == "user" and not started:
            started = True
            yield Item(name, number, TurnStart())
        else:  # the system prompt, the harness's format-error replies
            yield Item(name, number)
    end = len(messages)
    usage = _usage(document)
    if usage is not None:
        yield Item(name, end, usage)
    if started:
        yield Item(name, end, TurnEnd())



def _usage(document: dict[str, Any]) -> Usage | None:
    info = document.get("info")
    config = info.get("config") if isinstance(info, dict) else None
    model = config.get("model") if isinstance(config, dict) else None
    model_name = model.get("model_name") if isinstance(model, dict) else None
    return run_total(document, model_name if isinstance(model_name, str) else None)
