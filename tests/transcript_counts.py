"""What the transcript tests compare: per session, the numbers of each kind of event a reader
gave for a file (or folder, or database), and the token and cost totals of its usage."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tripwire.interchange.adapters import read, transcripts
from tripwire.interchange.events import Call, Compaction, Result, TaskEnd, Text, TurnStart, Usage

#: the key of the lines recognized without an event (``{"lines": n}``)
SKIPPED = "*skipped*"


def counts(path: Path | str, fmt: str = "auto") -> dict[str, dict[str, Any]]:
    """``{session: {"calls", "results", "failures", "unknown_tools", "texts", "turns",
    "usage", "input_tokens", "output_tokens", "cost_usd", "compactions", "outcome:..."}}``
    (counts of zero left out) for every transcript ``path`` stands for (a file, folder or
    database), and ``SKIPPED: {"lines": n}`` when lines were recognized without an event;
    invalid lines are not expected (they raise)."""
    found: dict[str, Counter[str]] = {}
    costs: dict[str, float] = {}
    for transcript in transcripts([str(path)], fmt):
        for item in read(transcript):
            if item.error is not None:
                raise item.error
            event = item.event
            if event is None:  # recognized, no event: counted for the file, as replay does
                found.setdefault(SKIPPED, Counter())["lines"] += 1
                continue
            c = found.setdefault(item.session, Counter())
            if isinstance(event, Call):
                c["calls"] += 1
            elif isinstance(event, Result):
                c["results"] += 1
                c["failures"] += bool(event.error)
                c["unknown_tools"] += event.unknown_tool
            elif isinstance(event, Text):
                c["texts"] += 1
            elif isinstance(event, TurnStart):
                c["turns"] += 1
            elif isinstance(event, Usage):
                c["usage"] += 1
                c["input_tokens"] += event.input_tokens or 0
                c["output_tokens"] += event.output_tokens or 0
                if event.cost_usd is not None:
                    costs[item.session] = costs.get(item.session, 0.0) + event.cost_usd
            elif isinstance(event, Compaction):
                c["compactions"] += 1
            elif isinstance(event, TaskEnd):
                c["outcome:" + ("exhausted:" + event.exhausted if event.exhausted
                                else "interrupted" if event.interrupted else "answered")] += 1
    out: dict[str, dict[str, Any]] = {}
    for session, c in found.items():
        row: dict[str, Any] = {k: v for k, v in sorted(c.items()) if v}
        if session in costs:
            row["cost_usd"] = round(costs[session], 9)
        out[session] = row
    return out


def events_of(path: Path | str, fmt: str = "auto") -> list[tuple[str, Any]]:
    """``(session, event)`` of every event, in order (invalid lines raise)."""
    out = []
    for transcript in transcripts([str(path)], fmt):
        for item in read(transcript):
            if item.error is not None:
                raise item.error
            if item.event is not None:
                out.append((item.session, item.event))
    return out
