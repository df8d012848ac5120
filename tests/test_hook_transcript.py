"""Usage for the live hooks, from the tail of a Claude Code transcript: once per response
(``message.id``), from its last line, reading only what was written since the last hook."""

from __future__ import annotations

import json
from pathlib import Path

from tripwire.events import Usage
from tripwire.hooks._transcript import transcript_usage
from tripwire.prices import estimate


def line(kind: str, ident: str | None = None, output: int = 0, **extra) -> str:
    value: dict = {"type": kind, "sessionId": "s1", "uuid": f"u-{ident}-{output}", **extra}
    if kind == "assistant":
        value["message"] = {"id": ident, "model": "claude-sonnet-4-5", "role": "assistant",
                            "content": [{"type": "text", "text": "..."}],
                            "usage": {"input_tokens": 10, "cache_read_input_tokens": 1000,
                                      "cache_creation_input_tokens": 50,
                                      "output_tokens": output}}
    else:
        value["message"] = {"role": "user", "content": "go on"}
    return json.dumps(value) + "\n"


def usage(output: int) -> dict:
    """The on_usage arguments of one response, priced as the hook prices it (Claude Code
    records tokens only)."""
    priced = estimate(Usage(model="claude-sonnet-4-5", input_tokens=1060, output_tokens=output,
                            cache_read_tokens=1000, cache_write_tokens=50, provider="anthropic"))
    return {"model": "claude-sonnet-4-5", "input_tokens": 1060, "output_tokens": output,
            "cost_usd": priced.cost_usd, "estimated": priced.estimated,
            "unpriced": priced.unpriced}


def test_usage_is_taken_once_per_response_from_its_last_line(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_text(line("user") + line("assistant", "msg_1", 3) + line("assistant", "msg_1", 80))
    # msg_1 may still be streaming: nothing is final, and the offset stays at its first line
    first_line = len(line("user"))
    assert transcript_usage("claude-code", str(path), 0) == ([], first_line)
    with path.open("a") as f:
        f.write(line("assistant", "msg_1", 120) + line("user") + line("assistant", "msg_2", 7))
    usages, offset = transcript_usage("claude-code", str(path), first_line)
    assert usages == [usage(120)]  # msg_1 once, with its final output count
    # a half-written last line is left for the next invocation
    with path.open("a") as f:
        f.write(line("user")[:20])
    assert transcript_usage("claude-code", str(path), offset) == ([], offset)
    with path.open("a") as f:
        f.write(line("user")[20:])
    usages, offset = transcript_usage("claude-code", str(path), offset)
    assert usages == [usage(7)]
    assert offset == path.stat().st_size
    assert transcript_usage("claude-code", str(path), offset) == ([], offset)


def test_sidechain_lines_and_missing_transcripts_give_no_usage(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_text(line("assistant", "msg_9", 5, isSidechain=True) + line("user"))
    assert transcript_usage("claude-code", str(path), 0) == ([], path.stat().st_size)
    assert transcript_usage("claude-code", str(tmp_path / "absent.jsonl"), 0) == ([], 0)
    assert transcript_usage("claude-code", None, 0) == ([], 0)
    assert transcript_usage("codex", str(path), 0) == ([], 0)
