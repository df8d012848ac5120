"""Outcome labels: which recorded sessions were healthy (successful) and which were not.

Accepted label files (JSON):

- ``{"resolved": {"<session>": true | false}}`` — a benchmark's outcome file (SWE-bench style):
  true is healthy, false is failed;
- ``{"sessions": {"<session>": {"label": "healthy" | ..., "must_trip": [ids], "must_not_trip":
  [ids]}}}`` — labelled scenarios (tripwire's own ``corpus/``), with the signals each must and
  must not trip;
- ``{"<session>": "<label>" | true | false}`` — a flat map;
- a tau-bench results file itself (``[{"task_id", "trial", "reward", ...}]``): reward 1 is
  healthy, anything else failed; its sessions are named as the tau-bench reader names them,
  ``<file>#task-<id>[-trial-<n>]``.

A label key names a session by its name (its path relative to the path argument) or by that
name's last component without the transcript suffix (``.jsonl``, ``.traj.json``, ``.traj``,
``.json``), so ``astropy__astropy-12907`` labels ``astropy__astropy-12907.traj.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidEvent
from ..signals import SIGNAL_IDS

__all__ = ["Label", "Labels", "read_labels", "HEALTHY"]

#: labels that mean the session went as it should (everything else is "not healthy")
HEALTHY = frozenset({"healthy", "success", "successful", "resolved", "ok"})
_SUFFIXES = (".traj.json", ".jsonl", ".traj", ".json")


@dataclass(frozen=True)
class Label:
    label: str
    must_trip: frozenset[str] = frozenset()
    must_not_trip: frozenset[str] = frozenset()

    @property
    def healthy(self) -> bool:
        return self.label in HEALTHY


@dataclass
class Labels:
    by_key: dict[str, Label] = field(default_factory=dict)

    def of(self, session: str) -> Label | None:
        label = self.by_key.get(session)
        if label is not None:
            return label
        base = session.rsplit("/", 1)[-1]
        for suffix in _SUFFIXES:
            if base.endswith(suffix):
                return self.by_key.get(base[: -len(suffix)])
        return self.by_key.get(base)


def _signals(value: Any, where: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidEvent(f"{where} must be a list of signal ids")
    unknown = sorted(set(value) - set(SIGNAL_IDS))
    if unknown:
        raise InvalidEvent(f"{where}: unknown signal(s) {', '.join(unknown)}")
    return frozenset(value)


def _label(value: Any, where: str) -> Label:
    if isinstance(value, bool):
        return Label("healthy" if value else "failed")
    if isinstance(value, str) and value.strip():
        return Label(value.strip().lower())
    if isinstance(value, dict) and isinstance(value.get("label"), str):
        return Label(value["label"].strip().lower(),
                     _signals(value.get("must_trip", []), f"{where}.must_trip"),
                     _signals(value.get("must_not_trip", []), f"{where}.must_not_trip"))
    raise InvalidEvent(f"{where}: a label is true/false, a string, or an object with 'label'")


def read_labels(path: str | Path) -> Labels:
    """Read a label file (shapes above); a bad file is an ``InvalidEvent`` naming it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such label file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidEvent(f"not a JSON label file ({exc})", source=str(path)) from None
    if isinstance(data, list) and data and all(
            isinstance(r, dict) and "task_id" in r and "reward" in r for r in data):
        return Labels({_tau_bench_session(path.name, r): Label(
            "healthy" if r["reward"] == 1 else "failed") for r in data})
    if not isinstance(data, dict):
        raise InvalidEvent("a label file is a JSON object (or a tau-bench results array)",
                           source=str(path))
    table = data.get("resolved", data.get("sessions", data))
    if not isinstance(table, dict):
        raise InvalidEvent("labels must map session names to labels", source=str(path))
    try:
        return Labels({str(k): _label(v, f"label of {k!r}") for k, v in table.items()})
    except InvalidEvent as exc:
        raise InvalidEvent(exc.message, source=str(path)) from None


def _tau_bench_session(file: str, result: dict[str, Any]) -> str:
    # the session name tripwire.interchange.adapters.tau_bench gives this result
    trial = f"-trial-{result['trial']}" if "trial" in result else ""
    return f"{file}#task-{result['task_id']}{trial}"
