"""Goose sessions (SPEC §11.5). No real session file is redistributable
(``../shared/format-samples/goose/README.md``), so the databases are built here from goose's own
DDL: ``aaif-goose/goose`` ``crates/goose/src/session/session_manager.rs`` at 017176d0
(``create_schema``, schema 17, and ``apply_migration`` 1-17) and ``block/goose`` at 01643006
(``create``, schema 5). The oldest schema is 5's without the columns migrations 2-5 added. The
legacy files follow ``block/goose`` ``session/legacy.rs`` (0fc5e540) and the message JSON of
``conversation/message.rs``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from transcript_counts import SKIPPED, counts, events_of

from tripwire.interchange.adapters import detect, transcripts
from tripwire.interchange.events import Compaction, Result, Text, Usage

#: schema 17's tables (create_schema at 017176d0), less the inventory tables
SCHEMA_17 = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY,
    applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '', user_set_name BOOLEAN DEFAULT FALSE,
    session_type TEXT NOT NULL DEFAULT 'user', working_dir TEXT NOT NULL,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    extension_data TEXT DEFAULT '{}', total_tokens INTEGER, input_tokens INTEGER,
    output_tokens INTEGER, cache_read_tokens INTEGER, cache_write_tokens INTEGER,
    accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER,
    accumulated_output_tokens INTEGER, accumulated_cache_read_tokens INTEGER,
    accumulated_cache_write_tokens INTEGER, accumulated_cost REAL, schedule_id TEXT,
    recipe_json TEXT, user_recipe_values_json TEXT, provider_name TEXT, model_config_json TEXT,
    goose_mode TEXT NOT NULL DEFAULT 'auto', archived_at TIMESTAMP, project_id TEXT,
    parent_session_id TEXT, parent_delegation TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
    session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL,
    content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL,
    timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, tokens INTEGER, metadata_json TEXT);
CREATE TABLE usage_ledger (id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    created_timestamp INTEGER NOT NULL, model TEXT, input_tokens INTEGER, output_tokens INTEGER,
    total_tokens INTEGER, cache_read_tokens INTEGER, cache_write_tokens INTEGER, cost REAL,
    cost_source TEXT, is_compaction INTEGER DEFAULT 0);
INSERT INTO schema_version (version) VALUES (17);
"""
#: schema 5's tables (create at 01643006)
SCHEMA_5 = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY,
    applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '', user_set_name BOOLEAN DEFAULT FALSE,
    session_type TEXT NOT NULL DEFAULT 'user', working_dir TEXT NOT NULL,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    extension_data TEXT DEFAULT '{}', total_tokens INTEGER, input_tokens INTEGER,
    output_tokens INTEGER, accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER,
    accumulated_output_tokens INTEGER, schedule_id TEXT, recipe_json TEXT,
    user_recipe_values_json TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL,
    content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL,
    timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, tokens INTEGER, metadata_json TEXT);
INSERT INTO schema_version (version) VALUES (5);
"""
#: the first schema: 5's before migrations 2 (user_recipe_values_json), 3 (metadata_json),
#: 4 (name, user_set_name) and 5 (session_type)
SCHEMA_1 = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY,
    applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE sessions (id TEXT PRIMARY KEY, description TEXT NOT NULL DEFAULT '',
    working_dir TEXT NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, extension_data TEXT DEFAULT '{}',
    total_tokens INTEGER, input_tokens INTEGER, output_tokens INTEGER,
    accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER,
    accumulated_output_tokens INTEGER, schedule_id TEXT, recipe_json TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL,
    content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL,
    timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, tokens INTEGER);
INSERT INTO schema_version (version) VALUES (1);
"""


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def request(ident: str, name: str, **args: Any) -> dict:
    return {"type": "toolRequest", "id": ident,
            "toolCall": {"status": "success", "value": {"name": name, "arguments": args}}}


def response(ident: str, output: str, *, is_error: bool = False, failed: str | None = None,
             legacy: bool = False) -> dict:
    if failed is not None:
        return {"type": "toolResponse", "id": ident,
                "toolResult": {"status": "error", "error": failed}}
    content = [text(output)]
    value: Any = content if legacy else {"content": content, "isError": is_error}
    return {"type": "toolResponse", "id": ident,
            "toolResult": {"status": "success", "value": value}}


#: one session's messages: (role, content, seconds, metadata)
CONVERSATION: list[tuple[str, list[dict], int, dict | None]] = [
    ("user", [text("run the tests")], 100, None),
    ("assistant", [{"type": "thinking", "thinking": "private", "signature": "s"},
                   text("Running them."), request("t1", "developer__shell", command="pytest")],
     101, None),
    ("user", [response("t1", "1 failed", is_error=True)], 102, None),
    ("assistant", [request("t2", "developer__shel", command="pytest")], 103, None),
    ("user", [response("t2", "", failed="Tool developer__shel not found")], 104, None),
    ("assistant", [{"type": "toolRequest", "id": "t3",
                    "toolCall": {"status": "error", "error": "bad JSON"}}], 105, None),
    ("user", [response("t3", "", failed="could not parse the call")], 106, None),
    # a compaction: the messages before hidden from the agent (``database``), the summary
    # hidden from the user
    ("user", [text("Summary: tests fail")], 108, {"userVisible": False, "agentVisible": True}),
    ("assistant", [text("Done."), {"type": "toolRequest", "id": "t4", "toolCall": {
        "status": "success", "value": {"name": "todo__read", "arguments": {}}}}], 109, None),
    ("user", [response("t4", "nothing", legacy=True)], 110, None),
]


def database(path: Path, schema: str) -> Path:
    connection = sqlite3.connect(path)
    connection.executescript(schema)
    columns = {r[1] for r in connection.execute("PRAGMA table_info(messages)")}
    session_columns = {r[1] for r in connection.execute("PRAGMA table_info(sessions)")}
    for sid, kind, parent in (("20260715_1", "user", None), ("20260715_2", "sub_agent",
                                                             "20260715_1")):
        values: dict[str, Any] = {"id": sid, "working_dir": "/w",
                                  "accumulated_input_tokens": 1000,
                                  "accumulated_output_tokens": 50}
        if "session_type" in session_columns:
            values["session_type"] = kind
        if "parent_session_id" in session_columns:
            values["parent_session_id"] = parent
            values["accumulated_cost"] = 0.25
            values["model_config_json"] = json.dumps({"model_name": "claude-sonnet-4-5"})
        connection.execute(f"INSERT INTO sessions ({', '.join(values)}) VALUES "
                           f"({', '.join('?' * len(values))})", list(values.values()))
    for n, (role, content, seconds, metadata) in enumerate(CONVERSATION):
        row: dict[str, Any] = {"session_id": "20260715_1", "role": role,
                               "content_json": json.dumps(content),
                               "created_timestamp": 1_760_000_000 + seconds}
        if "metadata_json" in columns:  # compacted: the first seven, hidden from the agent
            row["metadata_json"] = json.dumps(metadata or {"userVisible": True,
                                                           "agentVisible": n >= 7})
        if "message_id" in columns:
            row["message_id"] = f"msg_20260715_1_{n}"
        connection.execute(f"INSERT INTO messages ({', '.join(row)}) VALUES "
                           f"({', '.join('?' * len(row))})", list(row.values()))
    connection.execute("INSERT INTO messages (session_id, role, content_json, created_timestamp)"
                       " VALUES ('20260715_2', 'user', ?, 1760000200)",
                       (json.dumps([text("sub task")]),))
    if "usage_ledger" in {r[0] for r in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}:
        for seconds, tokens, cost, compaction in ((101, 500, 0.1, 0), (103, 600, 0.1, 0),
                                                  (108, 200, 0.05, 1)):
            connection.execute(
                "INSERT INTO usage_ledger (session_id, created_timestamp, model, input_tokens, "
                "output_tokens, total_tokens, cache_read_tokens, cache_write_tokens, cost, "
                "cost_source, is_compaction) VALUES ('20260715_1', ?, 'claude-sonnet-4-5', ?, "
                "10, ?, 100, 0, ?, 'provider', ?)",
                (1_760_000_000 + seconds, tokens, tokens + 10, cost, compaction))
    connection.commit()
    connection.close()
    return path


TOTALS = {"usage": 1, "input_tokens": 1000, "output_tokens": 50}
BOTH = {"calls": 4, "results": 4, "failures": 3, "unknown_tools": 1, "texts": 2}


@pytest.mark.parametrize("schema, main, sub", [
    # the ledger: one usage per model call (the compaction's too), its cost as recorded; the
    # compaction is read from the messages' visibility
    (SCHEMA_17, {**BOTH, "turns": 1, "compactions": 1, "usage": 3, "input_tokens": 1300,
                 "output_tokens": 30, "cost_usd": 0.25}, {"turns": 1}),
    # before the ledger: the session's running totals, once, at its end
    (SCHEMA_5, {**BOTH, "turns": 1, "compactions": 1, **TOTALS}, {"turns": 1, **TOTALS}),
    # before metadata_json: no visibility, so the summary is read as a prompt
    (SCHEMA_1, {**BOTH, "turns": 2, **TOTALS}, {"turns": 1, **TOTALS}),
], ids=["schema-17", "schema-5", "schema-1"])
def test_every_schema_version(tmp_path: Path, schema: str, main: dict, sub: dict) -> None:
    path = database(tmp_path / "sessions.db", schema)
    assert detect(path) == "goose"
    assert counts(path) == {"20260715_1": main, "20260715_2": sub}


def test_the_current_schema_s_events_in_order(tmp_path: Path) -> None:
    path = database(tmp_path / "sessions.db", SCHEMA_17)
    got = events_of(path)
    assert [type(e).__name__ for s, e in got if s == "20260715_1"] == [
        "TurnStart", "Text", "Call", "Usage", "Result", "Call", "Usage", "Result", "Call",
        "Result", "Compaction", "Usage", "Text", "Call", "Result", "TurnEnd"]
    events = [e for _, e in got]
    results = [(r.id, r.name, r.error, r.unknown_tool) for r in events
               if isinstance(r, Result)]
    assert results == [("t1", "developer__shell", "1 failed", False),
                       ("t2", "developer__shel", "Tool developer__shel not found", True),
                       ("t3", "invalid_tool_call", "could not parse the call", False),
                       ("t4", "todo__read", None, False)]
    assert [e.text for e in events if isinstance(e, Text)] == ["Running them.", "Done."]
    assert next(e for e in events if isinstance(e, Compaction)) == Compaction(False, False)
    usage = next(e for e in events if isinstance(e, Usage))
    assert (usage.model, usage.cache_read_tokens, usage.cost_usd) == ("claude-sonnet-4-5",
                                                                      100, 0.1)


def test_the_database_is_opened_read_only(tmp_path: Path) -> None:
    path = database(tmp_path / "sessions.db", SCHEMA_17)
    before = path.read_bytes()
    path.chmod(0o444)
    try:
        assert counts(path)["20260715_2"] == {"turns": 1}
    finally:
        path.chmod(0o644)
    assert path.read_bytes() == before
    assert not (tmp_path / "sessions.db-wal").exists()


def test_the_sessions_folder_is_its_database(tmp_path: Path) -> None:
    folder = tmp_path / "goose" / "sessions"
    folder.mkdir(parents=True)
    database(folder / "sessions.db", SCHEMA_17)
    legacy(folder / "20260101_1.jsonl")  # imported into the database already
    (found,) = transcripts([str(tmp_path / "goose")])
    assert (found.path, found.format) == (folder, "goose")
    assert set(counts(folder)) == {"20260715_1", "20260715_2"}
    # a database that is not goose's is no transcript
    other = tmp_path / "other.db"
    connection = sqlite3.connect(other)
    connection.execute("CREATE TABLE rows (id INTEGER)")
    connection.commit()
    connection.close()
    assert detect(other) is None


def legacy(path: Path, metadata: bool = True) -> Path:
    lines: list[Any] = []
    if metadata:
        lines.append({"working_dir": "/w", "description": "fix tests", "schedule_id": None,
                      "message_count": 4, "total_tokens": 100, "input_tokens": 90,
                      "output_tokens": 10, "accumulated_total_tokens": 300,
                      "accumulated_input_tokens": 280, "accumulated_output_tokens": 20})
    for role, content, seconds, _ in CONVERSATION[:3]:
        lines.append({"role": role, "created": 1_760_000_000 + seconds, "content": content})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


@pytest.mark.parametrize("metadata", [True, False])
def test_a_legacy_session_file(tmp_path: Path, metadata: bool) -> None:
    path = legacy(tmp_path / "20260101_1.jsonl", metadata)
    assert detect(path) == "goose"
    want: dict[str, Any] = {str(path): {"calls": 1, "results": 1, "failures": 1, "texts": 1,
                                        "turns": 1}}
    if metadata:
        want[str(path)].update(usage=1, input_tokens=280, output_tokens=20)
        want[SKIPPED] = {"lines": 1}
    assert counts(path) == want
