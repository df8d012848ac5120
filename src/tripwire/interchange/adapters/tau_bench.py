"""tau-bench results files: a JSON array of ``{"task_id", "trial"?, "reward", "info",
"traj"}``, read whole. Each result is one session, named ``<file>#task-<id>[-trial-<n>]``;
its ``traj`` is an OpenAI chat message list. tau-bench's environment answers a tool that raised
with ``Error: ...``, so such a result is a failure; the simulated user's ``###STOP###`` ends the
conversation (it starts no turn).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import InvalidEvent
from ._base import Item, read_document
from .openai_chat import conversation

NAME = "tau-bench"


def sniff(value: Any) -> bool:
    return (isinstance(value, list) and bool(value) and isinstance(value[0], dict)
            and "task_id" in value[0] and isinstance(value[0].get("traj"), list))


STOP = "###STOP###"


def failed(text: str) -> bool:
    return text.startswith("Error:")


def stop(text: str) -> bool:
    return STOP in text


def read(path: Path, name: str, document: Any = None) -> Iterator[Item]:
    results = read_document(path, document)
    if not sniff(results):
        raise InvalidEvent("not a tau-bench results file (expected a JSON array of "
                           "{task_id, traj} objects)", source=str(path))
    if not all(isinstance(r, dict) and isinstance(r.get("traj"), list) for r in results):
        # checked before any is read: a file refused half way would have been replayed half
        raise InvalidEvent("a tau-bench result needs a 'traj' message list", source=str(path))
    for result in results:
        session = f"{name}#task-{result.get('task_id')}"
        if "trial" in result:
            session += f"-trial-{result['trial']}"
        yield from conversation(result["traj"], session, path, failed, stop)
