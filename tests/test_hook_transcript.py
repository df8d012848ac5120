"""Usage for the live hooks, from the tail of a Claude Code transcript: once per response
(``message.id``), from its last line, reading only what was written since the last hook."""

from __future__ import annotations

import json
from pathlib import Path

from tripwire.harnesses.hooks._transcript import transcript_usage
from tripwire.interchange.events import Usage
from tripwire.interchange.prices import estimate


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
    # a Codex hook on a file with no rollout line: no usage, and nothing to read again
    assert transcript_usage("codex", str(path), 0, {}) == ([], path.stat().st_size)


def codex_line(kind: str, payload: dict) -> str:
    return json.dumps({"timestamp": "2026-05-01T10:00:00.000Z", "type": kind,
                       "payload": payload}) + "\n"


def token_count(inp: int, cached: int, out: int, last: bool = True) -> str:
    counts = {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out,
              "reasoning_output_tokens": 0, "total_tokens": inp + out}
    info: dict = {"total_token_usage": counts, "model_context_window": 272000}
    if last:
        info["last_token_usage"] = counts
    return codex_line("event_msg", {"type": "token_count", "info": info})


def codex_usage(model: str, inp: int, cached: int, out: int) -> dict:
    priced = estimate(Usage(model=model, input_tokens=inp, output_tokens=out,
                            cache_read_tokens=cached, provider="openai"))
    return {"model": model, "input_tokens": inp, "output_tokens": out,
            "cost_usd": priced.cost_usd, "estimated": priced.estimated,
            "unpriced": priced.unpriced}


def test_codex_usage_is_read_from_the_rollout_incrementally(tmp_path: Path) -> None:
    """Each token_count once (a repeat with the same totals, even in the next invocation, is
    not counted again), priced by the model of the latest turn_context, which is remembered
    between invocations."""
    path = tmp_path / "rollout.jsonl"
    memo: dict = {}
    path.write_text(codex_line("session_meta", {"id": "t1"})
                    + codex_line("turn_context", {"model": "gpt-5-codex"})
                    + token_count(3040, 2900, 70))
    usages, offset = transcript_usage("codex", str(path), 0, memo)
    assert usages == [codex_usage("gpt-5-codex", 3040, 2900, 70)]
    assert offset == path.stat().st_size
    assert memo["model"] == "gpt-5-codex"
    half = token_count(6500, 5800, 140, last=False)
    with path.open("a") as f:
        f.write(token_count(3040, 2900, 70) + half[:30])  # the repeat, and a line being written
    assert transcript_usage("codex", str(path), offset, memo) == ([], offset + len(
        token_count(3040, 2900, 70)))
    offset += len(token_count(3040, 2900, 70))
    with path.open("a") as f:
        f.write(half[30:])
    usages, offset = transcript_usage("codex", str(path), offset, memo)
    # only the totals: the difference from the last ones, by the remembered model
    assert usages == [codex_usage("gpt-5-codex", 3460, 2900, 70)]
    assert offset == path.stat().st_size
