"""OpenCode sessions (SPEC §11.5). No real store is redistributable
(``../shared/format-samples/opencode/README.md``), so both forms are built here as OpenCode
writes them: the storage tree's layout and the database's tables from ``anomalyco/opencode``
``packages/opencode/src/storage/json-migration.ts`` (commit 062aa8c0: files
``session/<project>/<id>.json``, ``message/<session>/<id>.json``, ``part/<message>/<id>.json``;
tables ``session``, ``message``, ``part`` whose ``data`` is the file's JSON less its ids), and
the messages and parts of the SDK's types (``opencode-ai`` ``types/``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from transcript_counts import SKIPPED, counts, events_of

from tripwire.interchange.adapters import detect, transcripts
from tripwire.interchange.events import Compaction, Result, Text, Usage

MAIN, CHILD = "ses_01JZ0000000000000000000001", "ses_01JZ0000000000000000000002"
TOKENS = {"input": 100, "output": 20, "reasoning": 5, "cache": {"read": 900, "write": 50}}

#: session -> (its JSON, [(message id, message JSON, [(part id, part JSON)])])
SESSIONS: dict[str, tuple[dict, list[tuple[str, dict, list[tuple[str, dict]]]]]] = {
    MAIN: ({"title": "fix the tests", "version": "0.15.0",
            "time": {"created": 1_760_000_000_000, "updated": 1_760_000_100_000}}, [
        ("msg_01", {"role": "user", "time": {"created": 1}}, [
            ("prt_01", {"type": "text", "text": "run the tests"})]),
        ("msg_02", {"role": "assistant", "modelID": "claude-sonnet-4-5", "providerID":
                    "anthropic", "cost": 0, "tokens": TOKENS, "time": {"created": 2}}, [
            ("prt_02", {"type": "step-start"}),
            ("prt_03", {"type": "reasoning", "text": "private"}),
            ("prt_04", {"type": "text", "text": "Running them."}),
            ("prt_05", {"type": "tool", "tool": "bash", "callID": "toolu_1", "state": {
                "status": "completed", "input": {"command": "pytest"}, "output": "1 failed",
                "title": "pytest", "metadata": {}, "time": {"start": 3, "end": 4}}}),
            ("prt_06", {"type": "tool", "tool": "bsah", "callID": "toolu_2", "state": {
                "status": "error", "input": {}, "error": "Model tried to call unavailable tool "
                "'bsah'.", "time": {"start": 5, "end": 6}}}),
            ("prt_07", {"type": "tool", "tool": "task", "callID": "toolu_3", "state": {
                "status": "running", "input": {"prompt": "look"}, "time": {"start": 7}}}),
            ("prt_08", {"type": "step-finish", "cost": 0, "tokens": TOKENS})]),
        ("msg_03", {"role": "user", "time": {"created": 8}}, [
            ("prt_09", {"type": "compaction", "auto": True})]),
        ("msg_04", {"role": "assistant", "summary": True, "modelID": "claude-sonnet-4-5",
                    "providerID": "anthropic", "cost": 0.02, "tokens": TOKENS,
                    "time": {"created": 9}}, [
            ("prt_10", {"type": "text", "text": "Summary so far."})]),
        ("msg_05", {"role": "user", "time": {"created": 10}}, [
            ("prt_11", {"type": "text", "text": "<context>", "synthetic": True})]),
    ]),
    CHILD: ({"title": "look (@general subagent)", "version": "0.15.0", "parentID": MAIN,
             "time": {"created": 1_760_000_050_000, "updated": 1_760_000_060_000}}, [
        ("msg_11", {"role": "user", "time": {"created": 1}}, [
            ("prt_21", {"type": "text", "text": "look"})]),
        ("msg_12", {"role": "assistant", "modelID": "claude-sonnet-4-5", "providerID":
                    "anthropic", "cost": 0.5, "tokens": TOKENS, "time": {"created": 2}}, [
            ("prt_22", {"type": "text", "text": "Found it."}),
            ("prt_23", {"type": "step-finish", "cost": 0.5, "tokens": TOKENS})]),
    ]),
}


def storage_tree(root: Path) -> Path:
    """The JSON tree, with each file's own ids as OpenCode wrote them (the reader, as
    OpenCode's migration does, takes the ids from the paths)."""
    storage = root / "storage"
    for sid, (session, messages) in SESSIONS.items():
        (storage / "session" / "prj_1").mkdir(parents=True, exist_ok=True)
        (storage / "session" / "prj_1" / f"{sid}.json").write_text(json.dumps(
            {"id": sid, **session}))
        for mid, message, parts in messages:
            (storage / "message" / sid).mkdir(parents=True, exist_ok=True)
            (storage / "message" / sid / f"{mid}.json").write_text(json.dumps(
                {"id": mid, "sessionID": sid, **message}))
            for pid, part in parts:
                (storage / "part" / mid).mkdir(parents=True, exist_ok=True)
                (storage / "part" / mid / f"{pid}.json").write_text(json.dumps(
                    {"id": pid, "messageID": mid, "sessionID": sid, **part}))
    (storage / "project").mkdir()
    (storage / "project" / "prj_1.json").write_text('{"worktree": "/w"}')
    return storage


def database(path: Path) -> Path:
    """The tables json-migration.ts fills (their other columns left out)."""
    connection = sqlite3.connect(path)
    connection.executescript("""
        CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT);
        CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT,
            title TEXT, version TEXT, cost REAL, time_created INTEGER, time_updated INTEGER);
        CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER,
            time_updated INTEGER, data TEXT);
        CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT,
            time_created INTEGER, time_updated INTEGER, data TEXT);
    """)
    for sid, (session, messages) in SESSIONS.items():
        connection.execute("INSERT INTO session VALUES (?, 'prj_1', ?, ?, ?, 0, ?, ?)", (
            sid, session.get("parentID"), session["title"], session["version"],
            session["time"]["created"], session["time"]["updated"]))
        for mid, message, parts in messages:
            connection.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)", (
                mid, sid, message["time"]["created"], message["time"]["created"],
                json.dumps(message)))
            for pid, part in parts:
                connection.execute("INSERT INTO part VALUES (?, ?, ?, 0, 0, ?)",
                                   (pid, mid, sid, json.dumps(part)))
    connection.commit()
    connection.close()
    return path


WANT = {
    # the call still running has no result; the tool error names an unavailable tool
    MAIN: {"calls": 3, "results": 2, "failures": 1, "unknown_tools": 1, "texts": 1,
           "turns": 1, "compactions": 1, "usage": 2,
           # each usage: 100 + 900 + 50 in, 20 + 5 out; the summary's cost is reported, the
           # step's 0 is no cost
           "input_tokens": 2100, "output_tokens": 50, "cost_usd": 0.02},
    CHILD: {"texts": 1, "turns": 1, "usage": 1, "input_tokens": 1050, "output_tokens": 25,
            "cost_usd": 0.5},
    SKIPPED: {"lines": 1},  # the synthetic context message
}


def test_the_storage_tree(tmp_path: Path) -> None:
    storage = storage_tree(tmp_path / "opencode")
    assert detect(storage) == "opencode"
    assert counts(storage) == WANT
    # the data folder holding it is the same transcript, found once in a walk
    (found,) = transcripts([str(tmp_path)])
    assert (found.path, found.format, found.name) == (tmp_path / "opencode", "opencode",
                                                      "opencode")
    assert counts(tmp_path / "opencode") == WANT


def test_the_database(tmp_path: Path) -> None:
    path = database(tmp_path / "opencode.db")
    assert detect(path) == "opencode"
    assert counts(path) == WANT
    got = events_of(path)
    kinds = [type(e).__name__ for s, e in got if s == MAIN]
    assert kinds == ["TurnStart", "Text", "Call", "Result", "Call", "Result", "Call", "Usage",
                     "Compaction", "Usage", "TurnEnd"]
    events = [e for _, e in got]
    assert next(e for e in events if isinstance(e, Compaction)) == Compaction(False, True)
    assert [(r.id, bool(r.error), r.unknown_tool) for r in events
            if isinstance(r, Result)] == [("toolu_1", False, False), ("toolu_2", True, True)]
    usage = next(e for e in events if isinstance(e, Usage))
    assert (usage.model, usage.provider, usage.input_tokens, usage.cache_read_tokens,
            usage.cache_write_tokens, usage.output_tokens, usage.cost_usd) == (
        "claude-sonnet-4-5", "anthropic", 1050, 900, 50, 25, None)
    # the summary a compaction wrote is no answer of the agent's
    assert [e.text for e in events if isinstance(e, Text)] == ["Running them.", "Found it."]


def test_a_data_folder_with_both_reads_its_database(tmp_path: Path) -> None:
    """OpenCode imports the tree into the database on its first start and leaves the tree:
    reading both would read every session twice."""
    folder = tmp_path / "opencode"
    storage_tree(folder)
    database(folder / "opencode.db")
    (found,) = transcripts([str(tmp_path)])
    assert found.path == folder
    assert counts(folder) == WANT


def test_ids_come_from_the_paths(tmp_path: Path) -> None:
    storage = storage_tree(tmp_path / "opencode")
    moved = storage / "session" / "prj_1" / f"{CHILD}.json"
    moved.write_text(json.dumps({"id": "ses_stale", **SESSIONS[CHILD][0]}))
    assert set(counts(storage)) == {MAIN, CHILD, SKIPPED}


def test_not_opencode(tmp_path: Path) -> None:
    (tmp_path / "session").mkdir()
    (tmp_path / "message").mkdir()
    assert detect(tmp_path) is None
    other = tmp_path / "opencode.db"
    connection = sqlite3.connect(other)
    connection.execute("CREATE TABLE session (id TEXT)")
    connection.commit()
    connection.close()
    assert detect(other) is None


