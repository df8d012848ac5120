"""ATIF, the Agent Trajectory Interchange Format (Harbor, NVIDIA NeMo Agent Toolkit, vtcode ...):
one JSON document per trajectory, ``{"schema_version": "ATIF-v1.x", "session_id",
"trajectory_id"?, "agent", "steps", "final_metrics"?, "continued_trajectory_ref"?,
"subagent_trajectories"?}``, read whole. Sources: Harbor's RFC 0001 (v1.5, in
``../shared/format-samples/atif/docs``) and its pydantic models (``harbor==0.26.0``,
``harbor/models/trajectories/*.py``: v1.0 to v1.8).

- The session is the trajectory: its ``trajectory_id`` (v1.7+: the per-document id), else its
  ``session_id`` (run-scoped from v1.7: parent, sub-agents and continuations may share it),
  else the file's name.
- A ``user`` step starts a turn (``system`` steps are prompts and harness notices); an
  ``agent`` step is one model call: its ``message`` is the agent's words (``reasoning_content``
  is private), its ``tool_calls`` the calls (a call id seen before in the trajectory is the
  same call written again: Harbor's OpenHands conversion repeats a call beside its result),
  its ``metrics`` one usage (``prompt_tokens`` includes ``cached_tokens``; ``cost_usd``
  reported; ``llm_call_count: 0`` made no model call) and its ``observation.results`` the
  results: paired by ``source_call_id``; a result without one answers the step's last call
  still unanswered (terminus-2 writes one terminal screen per command batch), or, with no call
  left, is the harness's feedback (no event). ATIF has no error field: a result is a failure
  when its ``extra`` says so (``is_error``, Harbor's ``tool_result_is_error``, ``error``, a
  non-zero ``exit_code``).
- Steps copied from an earlier trajectory (``is_copied_context``) are skipped.
- Sub-agents are sessions of their own: trajectories embedded in ``subagent_trajectories``
  (v1.7, referenced by ``trajectory_id``) where a step refers to them, and, when the file is
  read as given (not found in a directory, where each file is read by itself), the files its
  ``subagent_trajectory_ref``s name (``trajectory_path``, relative to the file; a renamed
  ``<prefix>trajectory.json`` finds its ``trajectory.<rest>`` siblings as
  ``<prefix>trajectory.<rest>``) and its continuation (``continued_trajectory_ref``: the same
  session continued).
- A ``system`` step recording a summarization of the context (terminus-2: "Performed context
  summarization ...", automatic; Harbor's converters: "Context compacted: ...") is a compaction.
- Without any step ``metrics``, ``final_metrics.total_cost_usd`` is one cost-only usage at the
  end.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ...errors import InvalidEvent
from ..events import Call, Compaction, Event, Result, Text, Usage
from ._base import Item, Turns, block_text, claude_unknown_tool, read_document
from ._base import token_count as _count

NAME = "atif"
#: the reader takes ``follow``: whether to read the files a trajectory refers to
FOLLOWS_REFERENCES = True
_SUMMARIZED = ("Performed context summarization", "Context summarization")
_COMPACTED = ("Context compacted",)


def sniff(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("schema_version"), str)
            and value["schema_version"].startswith("ATIF-v")
            and isinstance(value.get("steps"), list))


def _text(content: Any) -> str:
    """A message or result content: a string, or (v1.6+) content parts."""
    return block_text(content) if content is not None else ""


def _failed(extra: Any) -> bool:
    if not isinstance(extra, dict):
        return False
    code = extra.get("exit_code", extra.get("exitCode"))
    return (extra.get("is_error") is True or extra.get("tool_result_is_error") is True
            or (isinstance(extra.get("error"), str) and bool(extra["error"]))
            or extra.get("error") is True
            or (isinstance(code, int) and not isinstance(code, bool) and code != 0))


class _Reader:
    def __init__(self, path: Path, follow: bool) -> None:
        self.path = path
        self.follow = follow
        self.names: set[str] = set()  # the sessions named so far
        self.seen_files: set[Path] = {path.resolve()}

    def session_name(self, trajectory: dict[str, Any], fallback: str) -> str:
        for key in ("trajectory_id", "session_id"):
            value = trajectory.get(key)
            if isinstance(value, str) and value and value not in self.names:
                self.names.add(value)
                return value
        name, n = fallback, 1
        while name in self.names:
            n += 1
            name = f"{fallback}-{n}"
        self.names.add(name)
        return name

    def trajectory(self, trajectory: dict[str, Any], name: str, where: Path,
                   turns: Turns | None = None, calls: set[str] | None = None) -> Iterator[Item]:
        """The items of one trajectory (and, where its steps refer to them, its sub-agents')
        in the session ``name``; ``turns`` and ``calls``: those of the trajectory it
        continues."""
        continued = turns is not None
        turns = turns if turns is not None else Turns()
        calls = calls if calls is not None else set()  # call ids read in this session
        embedded = {t.get("trajectory_id"): t for t in trajectory.get("subagent_trajectories")
                    or () if isinstance(t, dict)}
        agent = trajectory.get("agent")
        model = agent.get("model_name") if isinstance(agent, dict) else None
        metered = False
        steps = trajectory["steps"]
        for number, step in enumerate(steps, start=1):
            if not isinstance(step, dict):
                yield Item(name, number, error=InvalidEvent(
                    "a step must be an object", source=str(where), line=number))
                continue
            if step.get("is_copied_context") is True:
                yield Item(name, number)
                continue
            try:
                events = list(self.step(step, turns, calls, model))
            except InvalidEvent as exc:
                yield Item(name, number, error=InvalidEvent(exc.message, source=str(where),
                                                            line=number))
                continue
            metered = metered or any(isinstance(e, Usage) for e in events)
            if not events:
                yield Item(name, number)
            for event in events:
                yield Item(name, number, event)
            yield from self.subagents(step, embedded, name, where, number)
        if not metered:
            total = trajectory.get("final_metrics")
            cost = total.get("total_cost_usd") if isinstance(total, dict) else None
            if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost >= 0:
                yield Item(name, len(steps), Usage(
                    model=model if isinstance(model, str) else None, cost_usd=float(cost)))
        ref = trajectory.get("continued_trajectory_ref")
        if self.follow and isinstance(ref, str):
            found = self.referenced(where, ref)
            if found is not None:  # the same session goes on there
                yield from self.trajectory(found[1], name, found[0], turns, calls)
        if not continued:
            for event in turns.end():
                yield Item(name, len(steps), event)

    def step(self, step: dict[str, Any], turns: Turns, calls: set[str],
             model: Any) -> Iterator[Event]:
        source = step.get("source")
        message = _text(step.get("message"))
        if source == "user":
            yield from turns.start()
            return
        if source == "system":
            if message.startswith(_SUMMARIZED):
                yield Compaction(mechanical=False, automatic=True)
            elif message.startswith(_COMPACTED):
                yield Compaction(mechanical=False, automatic=False)
            return
        if source != "agent":
            raise InvalidEvent(f"a step's source must be system, user or agent, not {source!r}")
        if message:
            yield Text(message)
        pending: list[tuple[str, str]] = []  # this step's calls: (id, name)
        for call in step.get("tool_calls") or ():
            if not isinstance(call, dict) or not isinstance(call.get("function_name"), str):
                raise InvalidEvent("a tool call needs a string 'function_name'")
            ident = call.get("tool_call_id")
            ident = ident if isinstance(ident, str) and ident else None
            pending.append((ident or "", call["function_name"]))
            if ident is not None and ident in calls:
                continue  # the same call written again
            if ident is not None:
                calls.add(ident)
            yield Call(call["function_name"], call.get("arguments"), ident)
        metrics = step.get("metrics")
        if isinstance(metrics, dict) and step.get("llm_call_count") != 0:
            yield _usage(metrics, step.get("model_name") or model)
        observation = step.get("observation")
        results = observation.get("results") if isinstance(observation, dict) else None
        results = [r for r in results or () if isinstance(r, dict)]
        linked = {r.get("source_call_id") for r in results}
        unanswered = [(i, n) for i, n in pending if i not in linked]
        free = sum(1 for r in results if not _linked(r))
        # results without a call id answer the last calls still unanswered, in order; any
        # more of them than calls are the harness's feedback
        targets = unanswered[max(0, len(unanswered) - free):]
        feedback = free - len(targets)
        j = 0
        for result in results:
            tool: str | None
            if _linked(result):
                ident = result["source_call_id"]
                tool = next((n for i, n in pending if i == ident), None)
            else:
                j += 1
                if j <= feedback:
                    continue  # no tool's answer
                ident, tool = targets[j - feedback - 1]
                ident = ident or None
            text = _text(result.get("content"))
            failed = _failed(result.get("extra"))
            yield claude_unknown_tool(Result(name=tool, id=ident, error=(text or True)
                                             if failed else None, payload=text))

    def subagents(self, step: dict[str, Any], embedded: dict[Any, dict[str, Any]],
                  parent: str, where: Path, number: int) -> Iterator[Item]:
        observation = step.get("observation")
        results = observation.get("results") if isinstance(observation, dict) else None
        n = 0
        for result in results or ():
            refs = result.get("subagent_trajectory_ref") if isinstance(result, dict) else None
            for ref in refs or ():
                if not isinstance(ref, dict):
                    continue
                n += 1
                sub: tuple[Path, dict[str, Any]] | None = None
                if ref.get("trajectory_id") in embedded:
                    sub = (where, embedded.pop(ref["trajectory_id"]))
                elif self.follow and isinstance(ref.get("trajectory_path"), str):
                    sub = self.referenced(where, ref["trajectory_path"])
                if sub is None:
                    continue
                name = self.session_name(sub[1], f"{parent}:subagent-{number}-{n}")
                yield from self.trajectory(sub[1], name, sub[0])

    def referenced(self, where: Path, ref: str) -> tuple[Path, dict[str, Any]] | None:
        """The trajectory file ``ref`` names, relative to ``where``: read once, or None when
        it is not there (an S3 URL, a file not copied) or not a trajectory."""
        candidates = [where.parent / ref]
        stem = "trajectory.json"
        if where.name.endswith(stem) and where.name != stem and ref.startswith("trajectory."):
            candidates.append(where.parent / (where.name[:-len(stem)] + ref))
        for candidate in candidates:
            try:
                resolved = candidate.resolve()
                if resolved in self.seen_files or not candidate.is_file():
                    continue
                document = orjson.loads(candidate.read_bytes())
            except (OSError, ValueError):
                continue
            if sniff(document):
                self.seen_files.add(resolved)
                return candidate, document
        return None


def _linked(result: dict[str, Any]) -> bool:
    ident = result.get("source_call_id")
    return isinstance(ident, str) and bool(ident)


def _usage(metrics: dict[str, Any], model: Any) -> Usage:
    extra = metrics.get("extra")
    write = _count(extra.get("cache_creation_input_tokens")) if isinstance(extra, dict) else None
    cost = metrics.get("cost_usd")
    return Usage(model=model if isinstance(model, str) else None,
                 input_tokens=_count(metrics.get("prompt_tokens")),
                 output_tokens=_count(metrics.get("completion_tokens")),
                 cache_read_tokens=_count(metrics.get("cached_tokens")),
                 cache_write_tokens=write,
                 cost_usd=float(cost) if isinstance(cost, (int, float))
                 and not isinstance(cost, bool) and cost >= 0 else None)


def read(path: Path, name: str, document: Any = None, follow: bool = False) -> Iterator[Item]:
    """The items of one trajectory file; ``follow``: read the files it refers to too (a file
    given as it is, not one of a directory's)."""
    document = read_document(path, document)
    if not sniff(document):
        raise InvalidEvent("not an ATIF trajectory (expected an object with schema_version "
                           "ATIF-v1.x and 'steps')", source=str(path))
    reader = _Reader(path, follow)
    yield from reader.trajectory(document, reader.session_name(document, name), path)
