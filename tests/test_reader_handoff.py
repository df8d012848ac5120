"""Detection decodes a single-document transcript once and hands the document to its reader
(issue 10: the whole ``replay --quiet`` command's throughput); what is read, and what replay
prints, is exactly what decoding the file again gives."""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path

import pytest
from conftest import need_shared
from hypothesis import given, settings
from hypothesis import strategies as st

import tripwire.interchange.adapters as adapters
from tripwire.cli.main import main
from tripwire.interchange.adapters import read, read_transcript, transcripts
from tripwire.interchange.adapters.mini_swe_agent import ACTION, actions_of

WHOLE = {"mini-swe-agent", "swe-agent", "tau-bench", "anthropic", "openai-responses",
         "openai-chat"}


def corpus() -> Path:
    return need_shared("corpus")


def test_every_single_document_transcript_of_the_corpus_is_handed_its_document() -> None:
    listed = transcripts([str(corpus())])
    whole = [t for t in listed if t.format in WHOLE]
    assert {t.format for t in whole} == {"mini-swe-agent", "swe-agent", "tau-bench"}
    assert all(t.decoded is not None and t.decoded.value is not None for t in whole)
    # JSON Lines transcripts are read line by line: nothing is held for them
    assert all(t.decoded is None for t in listed if t.format not in WHOLE)


def test_the_handed_document_reads_exactly_as_the_file_does() -> None:
    for transcript in transcripts([str(corpus())]):
        handed = list(read(transcript))
        assert transcript.decoded is None or transcript.decoded.value is None  # taken once
        again = list(read_transcript(transcript.path, transcript.format, transcript.name))
        assert handed == again, transcript.path
        assert list(read(transcript)) == again  # a second read decodes the file itself


def test_a_transcript_sent_to_another_process_carries_no_document() -> None:
    folder = corpus() / "mini-swe-agent-swebench"
    (first, *_) = transcripts([str(folder)])
    assert first.decoded is not None and first.decoded.value is not None
    copy = pickle.loads(pickle.dumps(first))  # as corpus workers receive it
    assert (copy.path, copy.format, copy.name) == (first.path, first.format, first.name)
    assert copy.decoded is not None and copy.decoded.value is None
    assert len(pickle.dumps(first)) < 1000  # a path and names, not a trajectory
    assert list(read(copy)) == list(read(first))


def test_the_listing_holds_at_most_the_hand_off_budget(monkeypatch) -> None:
    folder = corpus() / "mini-swe-agent-swebench"
    files = sorted(folder.glob("*.traj.json"))
    budget = files[0].stat().st_size + files[1].stat().st_size
    monkeypatch.setattr(adapters, "HAND_OFF_BYTES", budget)
    listed = transcripts([str(folder)])
    held = [t.path for t in listed if t.decoded is not None]
    assert held == files[:2]  # the first two fit; beyond the budget a reader decodes again
    assert [list(read(t)) for t in listed[:4]] == [
        list(read_transcript(t.path, t.format, t.name)) for t in listed[:4]]


def test_a_file_that_is_more_than_its_first_line_is_not_handed_on(tmp_path) -> None:
    source = sorted((corpus() / "mini-swe-agent-swebench").glob("*.traj.json"))[0]
    path = tmp_path / "t.traj.json"
    path.write_bytes(source.read_bytes().rstrip(b"\n") + b"\n\n\n")  # blank lines after it
    (transcript,) = transcripts([str(path)])
    assert transcript.format == "mini-swe-agent" and transcript.decoded is None
    assert list(read(transcript)) == list(read_transcript(source, "mini-swe-agent", str(path)))


def test_detection_line_by_line_equals_detection_of_a_file_read_whole(monkeypatch) -> None:
    whole = transcripts([str(corpus())])
    monkeypatch.setattr(adapters, "_READ_WHOLE", 0)  # every file as a large one: readline
    by_line = transcripts([str(corpus())])
    assert [(t.path, t.format, t.name) for t in by_line] == \
        [(t.path, t.format, t.name) for t in whole]
    assert [t.decoded is None for t in by_line] == [t.decoded is None for t in whole]
    for a, b in zip(by_line, whole, strict=True):
        if a.decoded is not None:
            assert b.decoded is not None and a.decoded.value == b.decoded.value


def test_replay_prints_the_same_with_and_without_the_hand_off(implementation, monkeypatch,
                                                              ) -> None:
    def replay() -> tuple[str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(["replay", "--per-file", str(corpus()), "--implementation", implementation],
                    out=out, err=err)
        assert code == 0
        return out.getvalue(), err.getvalue()

    handed = replay()
    monkeypatch.setattr(adapters, "HAND_OFF_BYTES", 0)
    assert replay() == handed
    summary = json.loads(handed[0].splitlines()[-1])
    assert (summary["kind"], summary["files"], summary["events"]) == ("summary", 292, 38728)


@given(st.lists(st.sampled_from(["\n", "x", "{}", "\r", " ", "[1]"]), max_size=12))
def test_detection_cuts_lines_as_readline_does(parts: list[str]) -> None:
    data = "".join(parts).encode()
    expected = list(iter(io.BufferedReader(io.BytesIO(data)).readline, b""))  # type: ignore[arg-type]
    assert list(adapters._lines(data)) == expected


@settings(max_examples=3000)
@given(st.lists(st.sampled_from(["`", "```", "```bash", "\n", " ", "\t", "a", "\u00a0",
                                 "\n```", "\r", "bash", "\u2028", "x\n"]), max_size=16))
def test_commands_are_found_exactly_as_the_regex_finds_them(parts: list[str]) -> None:
    content = "".join(parts)
    assert actions_of(content) == ACTION.findall(content)


@pytest.mark.parametrize("content, commands", [
    ("think\n```bash\nls -la\n```", ["ls -la"]),
    ("```bash\n\n```", [""]),              # the regex backs up to the run's first newline
    ("```bash   \n  \ncd /x\n```\nand ```bash\npwd\n```", ["cd /x", "pwd"]),  # greedy
    ("```bash ls```", []),                 # no newline after the fence
    ("```bash\nno closing fence", []),
])
def test_commands_of_hand_written_messages(content: str, commands: list[str]) -> None:
    assert actions_of(content) == ACTION.findall(content) == commands


def test_commands_of_every_corpus_message_match_the_regex() -> None:
    for transcript in transcripts([str(corpus() / "mini-swe-agent-swebench")]):
        document = transcript.decoded.take() if transcript.decoded is not None else None
        for message in (document or {}).get("messages", []):
            if isinstance(message.get("content"), str):
                assert actions_of(message["content"]) == ACTION.findall(message["content"])
