"""Detection equals the reader, for the line formats of issue 29 as for Claude Code's
(``tests/test_reading_bugs.py``): every line of every sample is accepted by its format's
``sniff`` and read without error, and values that are none of its lines are refused by both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import need_shared

from tripwire.interchange.adapters import format_module

#: line formats and their sample files (relative to ../shared/format-samples)
LINE_SAMPLES = {
    "codex-exec": ["codex-exec-json/samples/generated-codex-0.147.0-mock-llm"],
    "claude-code-headless": ["claude-code-headless/samples/gleam-sdk-fixtures/basic_query.ndjson"],
    "openhands": ["openhands/samples/v1-sdk/events.jsonl",
                  "openhands/samples/v0-openhands-repo/output.jsonl",
                  "openhands/samples/v0-openhands-repo/resolver-mock_output/output.jsonl"],
}
#: none of these is a line of any of them
NOT_LINES: list[Any] = [[1], "text", 3, {}, {"type": "call", "name": "x"},
                        {"type": "user", "sessionId": "s", "uuid": "u"},
                        {"timestamp": "t", "type": "session_meta", "payload": {}}]


def _lines(fmt: str) -> list[Any]:
    values = []
    for rel in LINE_SAMPLES[fmt]:
        path = need_shared("format-samples", *rel.split("/"))
        for file in sorted(path.glob("*.jsonl")) if path.is_dir() else [path]:
            values += [json.loads(line) for line in file.read_text().splitlines() if line]
    return values


@pytest.mark.parametrize("fmt", sorted(LINE_SAMPLES))
def test_every_sample_line_is_sniffed_and_read(fmt: str, tmp_path: Path) -> None:
    module = format_module(fmt)
    for n, value in enumerate(_lines(fmt)):
        assert module.sniff(value), (fmt, n)
        path = tmp_path / f"{n}.jsonl"
        path.write_text(json.dumps(value) + "\n")
        assert [i.error for i in module.read(path, "s") if i.error] == [], (fmt, n)


@pytest.mark.parametrize("fmt", sorted(LINE_SAMPLES) + ["gemini-cli", "goose"])
def test_what_is_not_a_line_is_refused_by_both(fmt: str, tmp_path: Path) -> None:
    module = format_module(fmt)
    for n, value in enumerate(NOT_LINES):
        assert not module.sniff(value), (fmt, value)
        path = tmp_path / f"{n}.jsonl"
        path.write_text(json.dumps(value) + "\n")
        (first, *_) = list(module.read(path, "s"))
        assert first.error is not None, (fmt, value)
