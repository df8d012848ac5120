"""A compacted history is a valid request for its format (issue 8 §3): property tests over
random valid histories in OpenAI chat, Anthropic Messages and OpenAI Responses shapes, each
output checked against that format's rules (written here, independently of the repair code)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tripwire.context.guard import Compaction
from tripwire.context.histories import MISSING_RESULT, detect_format
from tripwire.context.prompts import mechanical_truncation

WORDS = st.text(alphabet="abcdefghij klmnop", min_size=1, max_size=300).map(lambda s: s + ".")
BOUNDARY = "[boundary] what came before, in short"


# -- random valid histories -------------------------------------------------------------------


@st.composite
def chat_histories(draw: Any) -> list[dict]:
    out: list[dict] = []
    for role in draw(st.lists(st.sampled_from(["system", "developer"]), max_size=2)):
        out.append({"role": role, "content": draw(WORDS)})
    out.append({"role": "user", "content": draw(WORDS)})
    n = 0
    for step in draw(st.lists(st.sampled_from(["text", "user", "calls"]), min_size=1,
                              max_size=14)):
        if step == "text":
            out.append({"role": "assistant", "content": draw(WORDS)})
        elif step == "user":
            out.append({"role": "user", "content": draw(WORDS)})
        else:
            ids = [f"call_{n + k}" for k in range(draw(st.integers(1, 3)))]
            n += len(ids)
            out.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": i, "type": "function",
                 "function": {"name": "read_file", "arguments": f'{{"path": "{i}.py"}}'}}
                for i in ids]})
            for i in draw(st.permutations(ids)):
                out.append({"role": "tool", "tool_call_id": i, "content": draw(WORDS)})
    return out


@st.composite
def anthropic_histories(draw: Any) -> list[dict]:
    out: list[dict] = [{"role": "user", "content": draw(WORDS)}]
    n = 0
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):  # a tool round: assistant asks, the user message answers
            ids = [f"toolu_{n + k}" for k in range(draw(st.integers(1, 3)))]
            n += len(ids)
            blocks: list[dict] = [{"type": "text", "text": draw(WORDS)}] if draw(
                st.booleans()) else []
            blocks += [{"type": "tool_use", "id": i, "name": "grep", "input": {"q": i}}
                       for i in ids]
            out.append({"role": "assistant", "content": blocks})
            answer: list[dict] = [{"type": "tool_result", "tool_use_id": i,
                                   "content": draw(WORDS)} for i in draw(st.permutations(ids))]
            if draw(st.booleans()):
                answer.append({"type": "text", "text": draw(WORDS)})
            out.append({"role": "user", "content": answer})
        else:
            out.append({"role": "assistant", "content": draw(WORDS)})
            out.append({"role": "user", "content": draw(WORDS)})
    if draw(st.booleans()):
        out.append({"role": "assistant", "content": draw(WORDS)})
    return out


@st.composite
def responses_histories(draw: Any) -> list[dict]:
    out: list[dict] = []
    if draw(st.booleans()):
        out.append({"type": "message", "role": "system", "content": draw(WORDS)})
    out.append({"type": "message", "role": "user", "content": draw(WORDS)})
    n = 0
    for step in draw(st.lists(st.sampled_from(["text", "user", "calls"]), min_size=1,
                              max_size=12)):
        if step == "text":
            out.append({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": draw(WORDS)}]})
        elif step == "user":
            out.append({"role": "user", "content": draw(WORDS)})
        else:
            ids = [f"fc_{n + k}" for k in range(draw(st.integers(1, 3)))]
            n += len(ids)
            out += [{"type": "function_call", "call_id": i, "name": "shell",
                     "arguments": '{"cmd": "ls"}'} for i in ids]
            out += [{"type": "function_call_output", "call_id": i, "output": draw(WORDS)}
                    for i in draw(st.permutations(ids))]
    return out


# -- the formats' rules -----------------------------------------------------------------------


def check_chat(messages: list[dict]) -> None:
    answered: set[str] = set()
    open_calls: set[str] = set()  # the ids of the assistant message the tool messages follow
    for m in messages:
        assert m["role"] in ("system", "developer", "user", "assistant", "tool"), m
        if m["role"] == "tool":
            ident = m["tool_call_id"]
            assert ident in open_calls and ident not in answered, f"orphan result {ident}"
            answered.add(ident)
            continue
        assert open_calls <= answered, f"calls without results: {open_calls - answered}"
        open_calls = {c["id"] for c in m.get("tool_calls") or ()} if m["role"] == "assistant" \
            else set()
    assert open_calls <= answered, f"calls without results: {open_calls - answered}"


def check_anthropic(messages: list[dict]) -> None:
    assert messages[0]["role"] == "user"
    for before, after in itertools.pairwise(messages):
        assert before["role"] != after["role"], "roles must alternate"
    for i, m in enumerate(messages):
        assert m["role"] in ("user", "assistant") and m["content"], m
        blocks = m["content"] if isinstance(m["content"], list) else []
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        if m["role"] == "user":
            before = messages[i - 1]["content"] if i else []
            asked = [b["id"] for b in before if isinstance(before, list) and
                     b["type"] == "tool_use"]
            assert sorted(results) == sorted(asked), "results must answer the calls just before"
            assert [b["type"] for b in blocks[:len(results)]] == ["tool_result"] * len(results)
        else:
            assert not results
            if uses:
                assert i + 1 < len(messages), "a tool_use needs the next user message"


def check_responses(items: list[dict]) -> None:
    called: set[str] = set()
    answered: set[str] = set()
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call":
            called.add(item["call_id"])
        elif kind == "function_call_output":
            assert item["call_id"] in called and item["call_id"] not in answered
            answered.add(item["call_id"])
        else:
            assert item["role"] in ("system", "developer", "user", "assistant")
    assert called == answered, f"calls without output: {called - answered}"


CHECKS = {"openai-chat": check_chat, "anthropic": check_anthropic,
          "openai-responses": check_responses}


def text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
    return content or ""


def check_compacted(history: list[dict], fmt: str, tail_chars: int) -> None:
    CHECKS[fmt](history)  # the generator's histories are valid to begin with
    detected = detect_format(history)
    # plain user/assistant text fits both chat formats: read with Anthropic's stricter rules
    assert detected == fmt or (fmt == "openai-chat" and detected == "anthropic")
    mech = mechanical_truncation(history, tail_chars)
    results = [Compaction("summary", BOUNDARY).apply(history)]
    if mech is not None:
        results.append(Compaction("mechanical", mech[0], mech[1]).apply(history))
    systems = []
    for m in history:
        if m.get("role") not in ("system", "developer"):
            break
        systems.append(m)
    task = next(m for m in history if m.get("role") == "user")
    for new in results:
        CHECKS[fmt](new)
        CHECKS[detected](new)
        assert new[:len(systems)] == systems  # the system prompt, in place
        opening = new[len(systems)]
        assert text_of(task) in text_of(opening)  # then the task (merged, for Anthropic)
        assert any(BOUNDARY in text_of(m) or "[context truncated]" in text_of(m) for m in new)


@settings(max_examples=300, deadline=None)
@given(chat_histories(), st.integers(1, 3000))
def test_openai_chat_stays_valid(history: list[dict], tail_chars: int) -> None:
    check_compacted(history, "openai-chat", tail_chars)


@settings(max_examples=300, deadline=None)
@given(anthropic_histories(), st.integers(1, 3000))
def test_anthropic_stays_valid(history: list[dict], tail_chars: int) -> None:
    check_compacted(history, "anthropic", tail_chars)


@settings(max_examples=300, deadline=None)
@given(responses_histories(), st.integers(1, 3000))
def test_openai_responses_stays_valid(history: list[dict], tail_chars: int) -> None:
    check_compacted(history, "openai-responses", tail_chars)


# -- the exact repairs ------------------------------------------------------------------------


def test_an_orphaned_tool_message_is_dropped_and_the_task_kept() -> None:
    history = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the parser."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "x" * 500},
        {"role": "assistant", "content": "Done."},
    ]
    assert Compaction("mechanical", "digest", 2).apply(history) == [
        history[0], history[1], {"role": "user", "content": "digest"}, history[4]]


def test_an_anthropic_tail_starting_with_results_is_merged_into_the_task() -> None:
    history = [
        {"role": "user", "content": "Fix the parser."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "grep",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                      "content": "hit"}, {"type": "text", "text": "go on"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "u", "name": "grep",
                                           "input": {}}]},
    ]
    assert Compaction("mechanical", "digest", 2).apply(history) == [
        {"role": "user", "content": [{"type": "text", "text": "Fix the parser.\n\ndigest"},
                                     {"type": "text", "text": "go on"}]},
        history[3],
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u",
                                      "content": MISSING_RESULT, "is_error": True}]},
    ]


def test_a_responses_call_without_output_gets_one() -> None:
    history = [{"role": "user", "content": "list files"},
               {"type": "function_call", "call_id": "c", "name": "shell", "arguments": "{}"}]
    assert Compaction("summary", "s").apply([*history, {"role": "user", "content": "hm"}]) == [
        history[0], {"role": "user", "content": "s"}]
    assert Compaction("mechanical", "d", 1).apply(history) == [
        history[0], {"role": "user", "content": "d"}, history[1],
        {"type": "function_call_output", "call_id": "c", "output": MISSING_RESULT}]


def test_an_unknown_format_name_is_refused() -> None:
    with pytest.raises(ValueError, match="history format must be one of"):
        Compaction("summary", "s").apply([{"role": "user", "content": "x"}], fmt="gemini")
