"""The live operator page (``web.console``): the routes it reads (a session's state, server-side
paging, filters and sorts, the live feed, who may read and who may act), the page as served by
``tripwire serve`` and by the gateway, and the page itself in a real headless Chromium against a
real ``tripwire serve`` process: it loads, a halt made through the API appears without a reload,
its reset button clears it with the operator's token and is refused with the agent's, and a
screenshot of it is taken."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="tripwire serve needs the serve extra")
pytest.importorskip("httpx", reason="the serve tests talk HTTP with httpx")

import httpx
from starlette.testclient import TestClient

from tripwire import GuardrailsConfig
from tripwire.budgets import Budget
from tripwire.cli.serve import create_app
from tripwire.fleet.fleet import Fleet
from tripwire.interchange.events import parse_event
from tripwire.web.console import EventFeed, fanout, page_html

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "an operator token for the tests"
AGENT = "an agent token for the tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
AGENT_AUTH = {"Authorization": f"Bearer {AGENT}"}
LOOP = [{"type": "turn_start"}] + [
    {"type": "call", "name": "read_file", "args": {"path": "a.py"}} for _ in range(5)]
USAGE = {"type": "usage", "input_tokens": 1, "cost_usd": 0.0}


def _client(implementation: str, **config: Any) -> tuple[TestClient, Fleet, EventFeed]:
    feed = EventFeed()
    settings = {"mode": "enforce", "unattended": True, "max_session_cost_usd": 10.0, **config}
    fleet = Fleet(GuardrailsConfig(**settings), implementation=implementation,
                  on_event=feed.on_event)
    return TestClient(create_app(fleet, TOKEN, agent_token=AGENT, feed=feed)), fleet, feed


def _states(client: TestClient) -> dict[str, str]:
    page = client.get("/sessions", params={"limit": 500}, headers=AUTH).json()
    return {s["session"]: s["state"] for s in page["sessions"]}


def test_every_state_a_session_can_be_in(implementation: str) -> None:
    client, _, _ = _client(implementation, budget=Budget(steps=2))
    client.post("/sessions/quiet/events", json={"type": "turn_start"}, headers=AUTH)
    client.post("/sessions/looping/events", json=LOOP, headers=AUTH)
    client.post("/sessions/spender/events", json=[{"type": "turn_start"}, USAGE, USAGE, USAGE],
                headers=AUTH)
    # twelve varied calls with no text between them: a warning (tools-without-text), no halt
    client.post("/sessions/noisy/events", json=[{"type": "turn_start"}] + [
        e for i in range(12) for e in ({"type": "call", "name": "r", "args": {"i": i}},
                                       {"type": "result", "name": "r", "payload": f"ok {i}"})],
        headers=AUTH)
    paused, _, _ = _client(implementation, budget=Budget(checkin={"tool_calls": 1}))
    paused.post("/sessions/waiting/events", json=[
        {"type": "turn_start"}, {"type": "call", "name": "a", "args": {}},
        {"type": "call", "name": "b", "args": {}}], headers=AUTH)
    assert _states(client) == {"quiet": "watching", "looping": "halted",
                               "spender": "exhausted", "noisy": "warned"}
    assert _states(paused) == {"waiting": "paused"}
    row = client.get("/sessions", params={"state": "halted"}, headers=AUTH).json()
    (looping,) = row["sessions"]
    assert looping["halted_by"] == ["watchdog"] and "read_file" in looping["reason"]
    assert looping["alerts"] >= 1 and looping["task"] == "looping"
    assert row["counts"] == {"watching": 1, "warned": 1, "halted": 1, "exhausted": 1,
                             "paused": 0}
    (spender,) = client.get("/sessions", params={"state": "exhausted"},
                            headers=AUTH).json()["sessions"]
    assert spender["task_outcome"] == "exhausted(steps)"
    # a reset clears the warning with the halt; the check-in resumes the paused task
    assert client.post("/sessions/noisy/guardrails/reset", headers=AUTH).status_code == 200
    assert _states(client)["noisy"] == "watching"
    assert paused.post("/tasks/waiting/check-in", headers=AUTH).status_code == 200
    assert _states(paused) == {"waiting": "watching"}


def test_thousands_of_sessions_are_paged_filtered_and_sorted_on_the_server(
        implementation: str) -> None:
    client, fleet, _ = _client(implementation)
    fleet.observe_many([(f"s{i:04d}", parse_event(e)) for i in range(1200)
                        for e in ({"type": "turn_start"}, {**USAGE, "cost_usd": i / 1000})])
    client.post("/sessions/s0007/events", json=LOOP, headers=AUTH)
    page = client.get("/sessions", params={"sort": "spend", "limit": 3}, headers=AUTH).json()
    assert (page["total"], page["offset"], page["limit"]) == (1200, 0, 3)
    assert [s["session"] for s in page["sessions"]] == ["s1199", "s1198", "s1197"]
    assert page["sessions"][0]["spent_usd"] == 1.199
    page = client.get("/sessions", params={"sort": "id", "offset": 1198, "limit": 50},
                      headers=AUTH).json()
    assert [s["session"] for s in page["sessions"]] == ["s1198", "s1199"]
    page = client.get("/sessions", params={"q": "s000", "sort": "id", "order": "desc"},
                      headers=AUTH).json()
    assert page["total"] == 10 and page["sessions"][0]["session"] == "s0009"
    halted = client.get("/sessions", params={"state": "halted"}, headers=AUTH).json()
    assert [s["session"] for s in halted["sessions"]] == ["s0007"]
    assert halted["counts"]["halted"] == 1 and halted["counts"]["watching"] == 1199
    recent = client.get("/sessions", params={"sort": "last_active", "limit": 1},
                        headers=AUTH).json()
    assert recent["sessions"][0]["session"] == "s0007"  # the last one used comes first
    for bad, error in ((("state", "asleep"), "state must be one of watching, warned, halted, "
                                             "exhausted, paused, not 'asleep'"),
                       (("sort", "age"), "sort must be one of id, spend, last_active, state, "
                                         "not 'age'"),
                       (("limit", "501"), "limit must be an integer from 1 to 500, not '501'"),
                       (("offset", "-1"), "offset must be an integer from 0 to 1000000000, "
                                          "not '-1'"),
                       (("limit", "\u00b2"), "limit must be an integer from 1 to 500, not '\u00b2'")):
        r = client.get("/sessions", params=dict([bad]), headers=AUTH)
        assert (r.status_code, r.json()) == (400, {"error": error})


def test_the_feed_gives_each_event_once_after_the_last_seen(implementation: str) -> None:
    client, _, _ = _client(implementation)
    client.post("/sessions/f/events", json=LOOP, headers=AUTH)
    feed = client.get("/alerts", headers=AUTH).json()
    kinds = [(e["kind"], e["session"]) for e in feed["events"]]
    assert ("halt", "f") in kinds and ("alert", "f") in kinds
    alert = next(e for e in feed["events"] if e["kind"] == "alert")
    assert (alert["signal"], alert["severity"]) == ("repeated-tool-call", "critical")
    assert [e["seq"] for e in feed["events"]] == list(range(1, len(kinds) + 1))
    assert feed["live"] is True and feed["last"] == len(kinds)
    assert client.get("/alerts", params={"after": feed["last"]},
                      headers=AUTH).json()["events"] == []
    client.post("/sessions/f/guardrails/reset", headers=AUTH)
    (reset,) = client.get("/alerts", params={"after": feed["last"]},
                          headers=AUTH).json()["events"]
    assert (reset["kind"], reset["seq"]) == ("reset", feed["last"] + 1)


def test_fanout_calls_every_callback_in_order() -> None:
    heard: list[tuple[str, object]] = []
    callback = fanout(lambda e: heard.append(("a", e)), None, lambda e: heard.append(("b", e)))
    callback("x")
    assert heard == [("a", "x"), ("b", "x")]


def test_the_agent_token_reads_the_page_and_may_not_act(implementation: str) -> None:
    client, _, _ = _client(implementation)
    client.post("/sessions/a/events", json=LOOP, headers=AUTH)
    assert client.get("/sessions", headers=AGENT_AUTH).json()["total"] == 1
    assert client.get("/alerts", headers=AGENT_AUTH).status_code == 200
    r = client.post("/sessions/a/guardrails/reset", headers=AGENT_AUTH)
    assert r.status_code == 403 and "operator's token" in r.json()["error"]
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        assert client.get("/sessions", headers=headers).status_code == 401
        assert client.get("/alerts", headers=headers).status_code == 401


def test_the_page_is_one_small_file_with_no_external_asset(implementation: str) -> None:
    client, _, _ = _client(implementation)
    r = client.get("/")  # no token: the page holds no data
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/=]{44}'", csp)
    html = r.text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "http://" not in html and "https://" not in html and "@import" not in html
    assert len(r.content) < 20_000, len(r.content)
    assert 'data-api=""' in html
    shipped = ROOT / "src" / "tripwire" / "web" / "console.html"
    assert len(shipped.read_bytes()) == len(page_html("")[0].encode())
    # docs/fleet.md says the page's weight: the weight it has
    weight = f"{len(shipped.read_bytes()):,} bytes"
    assert weight in (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8"), weight


def test_the_gateway_serves_the_page_over_its_operator_routes(implementation: str) -> None:
    from tripwire.gateway.app import Gateway
    from tripwire.gateway.app import create_app as gateway_app

    feed = EventFeed()
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=True),
                  implementation=implementation, on_event=feed.on_event, feedback_at_once=True)
    client = TestClient(gateway_app(Gateway(fleet, {}, feed=feed), TOKEN))
    r = client.get("/")
    assert r.status_code == 200 and 'data-api="/tripwire"' in r.text
    fleet.observe_many([("g", parse_event(e)) for e in LOOP])
    page = client.get("/tripwire/sessions", headers=AUTH).json()
    assert [(s["session"], s["state"]) for s in page["sessions"]] == [("g", "halted")]
    assert any(e["kind"] == "halt" for e in client.get("/tripwire/alerts",
                                                        headers=AUTH).json()["events"])
    # without an operator token the gateway serves no operator surface, the page neither
    bare = TestClient(gateway_app(Gateway(fleet, {}), None))
    assert bare.get("/").status_code == 404


# --- the page in a real headless Chromium, against a real tripwire serve ------------------------


def _start_serve(tmp_path: Path, implementation: str) -> tuple[subprocess.Popen[str], str]:
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "agent").write_text(AGENT + "\n")
    (tmp_path / "tripwire.toml").write_text('[watchdog]\nmode = "enforce"\n')
    env = {k: v for k, v in os.environ.items() if k != "TRIPWIRE_SERVE_TOKEN"}
    env["TRIPWIRE_IMPLEMENTATION"] = implementation
    proc = subprocess.Popen(
        [sys.executable, "-m", "tripwire", "serve", "--port", "0", "--token-file",
         str(tmp_path / "token"), "--agent-token-file", str(tmp_path / "agent"),
         "--config", str(tmp_path / "tripwire.toml")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("tripwire serve: listening on http://127.0.0.1:"), (
        line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, line.rsplit(" ", 1)[1].strip()


def _row_state(session: str) -> str:
    return (f"((document.querySelector('tr[data-session=\"{session}\"]') || "
            "{dataset: {}}).dataset.state || '')")


def _use_token(browser: Any, token: str) -> None:
    browser.js(f"document.getElementById('token').value = {token!r}; "
               "document.getElementById('use-token').click(); true")


def test_the_page_in_chromium_shows_a_halt_live_and_resets_it(
        tmp_path: Path, implementation: str) -> None:
    from browser import Browser, chromium_binary

    chromium_binary()  # skips, saying how to install it, where there is none
    proc, url = _start_serve(tmp_path, implementation)
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=10) as http, Browser() as browser:
            http.post("/sessions/calm/events", json={"type": "turn_start"})
            browser.goto(url + "/")
            assert browser.js("document.title") == "tripwire"
            assert "no token" in browser.js("document.getElementById('who').textContent")
            _use_token(browser, AGENT)  # the agent's token: it reads, it may not act
            assert browser.wait_for(_row_state("calm")) == "watching"
            # a halt made through the API appears without a reload
            marker = browser.js("window.__same_page = 1")
            assert marker == 1
            http.post("/sessions/runaway/events", json=LOOP)
            http.post("/sessions/busy/events", json=[{"type": "turn_start"}] + [
                e for i in range(12) for e in (
                    {"type": "call", "name": "grep", "args": {"pattern": f"p{i}"}},
                    {"type": "result", "name": "grep", "payload": f"match {i}"})])
            http.post("/sessions/spender/events", json=[
                {"type": "turn_start"}, {"type": "usage", "input_tokens": 900, "cost_usd": 6.5}])
            assert browser.wait_for(_row_state("runaway")) == "halted"
            assert browser.wait_for(_row_state("busy")) == "warned"
            assert browser.js("window.__same_page") == 1  # no reload happened
            reason = browser.js("document.querySelector('tr[data-session=\"runaway\"] "
                                ".reason').textContent")
            assert "read_file" in reason
            assert browser.wait_for("[...document.querySelectorAll('#feed li')]"
                                    ".some(li => li.textContent.includes('runaway'))")
            # the reset button with the agent's token: refused, the session still halted
            browser.js("document.querySelector('tr[data-session=\"runaway\"] "
                       "button.reset').click(); true")
            refused = browser.wait_for("document.getElementById('msg').className === 'err' "
                                       "&& document.getElementById('msg').textContent")
            assert refused.startswith("Reset refused (403)"), refused
            assert http.get("/sessions/runaway/guardrails").json()["halted"] is True
            # the screenshot, with the halted session on it
            shot = tmp_path / "console.png"
            size = browser.screenshot(shot)
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert 10_000 < size < 1_000_000, size
            width, height = (int.from_bytes(shot.read_bytes()[16 + 4 * i:20 + 4 * i], "big")
                             for i in range(2))
            assert (width, height) == (1280, 800)
            if os.environ.get("TRIPWIRE_SAVE_SCREENSHOTS"):  # docs/img/console.png, for docs
                shutil.copy(shot, ROOT / "docs" / "img" / "console.png")
            # with the operator's token the same button clears the halt
            _use_token(browser, TOKEN)
            browser.wait_for("!!document.querySelector('tr[data-session=\"runaway\"] "
                             "button.reset')")
            browser.js("document.querySelector('tr[data-session=\"runaway\"] "
                       "button.reset').click(); true")
            said = browser.wait_for("document.getElementById('msg').textContent.startsWith("
                                    "'reset:') && document.getElementById('msg').textContent")
            assert said.startswith("reset: cleared watchdog"), said
            assert browser.wait_for(_row_state("runaway") + " === 'watching'")
            assert http.get("/sessions/runaway/guardrails").json()["halted"] is False
            assert browser.js("sessionStorage.getItem('tripwire-token')") == TOKEN
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_the_gateway_s_page_in_chromium_shows_its_sessions(implementation: str) -> None:
    from browser import Browser, chromium_binary
    from gateway_support import serving

    from tripwire.gateway.app import Gateway
    from tripwire.gateway.app import create_app as gateway_app

    chromium_binary()
    feed = EventFeed()
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=True),
                  implementation=implementation, on_event=feed.on_event, feedback_at_once=True)
    with serving(gateway_app(Gateway(fleet, {}, feed=feed), TOKEN)) as url, Browser() as browser:
        browser.goto(url + "/")
        _use_token(browser, TOKEN)
        fleet.observe_many([("through-gateway", parse_event(e)) for e in LOOP])
        assert browser.wait_for(_row_state("through-gateway")) == "halted"
        browser.js("document.querySelector('tr[data-session=\"through-gateway\"] "
                   "button.reset').click(); true")
        assert browser.wait_for(_row_state("through-gateway") + " === 'watching'")
        assert fleet.existing("through-gateway").halted is False
