"""`tripwire serve`: the HTTP surface over a Fleet — the token, each route's exact answers, the
409 of a reset that would re-trip (the library's own rule), one-line 400s; Starlette's
TestClient in process, and a real server process on loopback (SIGTERM, restart, the halt
restored from the store)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="tripwire serve needs the serve extra (starlette)")
httpx = pytest.importorskip("httpx", reason="the serve tests talk HTTP with httpx")
from starlette.testclient import TestClient  # noqa: E402

from tripwire import GuardrailsConfig  # noqa: E402
from tripwire.cli.serve import create_app  # noqa: E402
from tripwire.durability.sqlite import SQLiteStore  # noqa: E402
from tripwire.errors import ResetRefused  # noqa: E402
from tripwire.fleet.fleet import Fleet  # noqa: E402

TOKEN = "a token for the tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CONFIG = GuardrailsConfig(mode="enforce", unattended=True, max_session_cost_usd=10.0)
LOOP = [{"type": "turn_start"}] + [
    {"type": "call", "name": "read_file", "args": {"path": "a.py"}} for _ in range(5)]


@pytest.fixture
def client(implementation: str) -> TestClient:
    fleet = Fleet(CONFIG, implementation=implementation)
    return TestClient(create_app(fleet, TOKEN))


def test_every_route_but_healthz_needs_the_token(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"ok": True, "sessions": 0}
    for method, url in (("GET", "/metrics"), ("GET", "/sessions/s/guardrails"),
                        ("POST", "/sessions/s/guardrails/reset"), ("POST", "/sessions/s/events")):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            r = client.request(method, url, headers=headers)
            assert r.status_code == 401, (method, url, headers)
            assert r.json() == {"error": "missing or wrong bearer token"}
            assert r.headers["www-authenticate"] == "Bearer"


def test_events_in_decisions_out(client: TestClient) -> None:
    r = client.post("/sessions/s-1/events", json=LOOP, headers=AUTH)
    assert r.status_code == 200
    body = r.json()
    assert (body["session"], body["events"], body["halted"]) == ("s-1", 6, True)
    (halt,) = body["decisions"]  # the four calls before it continue: not listed
    assert (halt["event"], halt["action"], halt["guardrail"]) == (5, "halt_session", "watchdog")
    assert halt["alerts"] == [{"signal": "repeated-tool-call", "severity": "critical"}]
    assert halt["reason"].startswith("watchdog halted the session (repeated-tool-call)")
    # the next turn of the halted session is refused, as Fleet.observe_many refuses it
    r = client.post("/sessions/s-1/events", json={"type": "turn_start"}, headers=AUTH)
    assert [(d["event"], d["action"]) for d in r.json()["decisions"]] == [(0, "refuse_turn")]
    assert client.get("/healthz").json()["sessions"] == 1


def test_guardrails_say_what_is_armed_what_tripped_and_the_budget_needed(
        client: TestClient) -> None:
    client.post("/sessions/s-2/events", json={"type": "turn_start"}, headers=AUTH)
    assert client.get("/sessions/s-2/guardrails", headers=AUTH).json() == {
        "session": "s-2", "mode": "enforce",
        "armed": {"watchdog": True, "max_turn_cost_usd": 0.0, "max_session_cost_usd": 10.0,
                  "context": True},
        "halted": False, "halted_by": [], "tripped": {"watchdog": None, "cost_ceiling": None},
        "spent_usd": 0.0, "granted_budget_usd": 0.0, "would_retrip": False,
        "budget_needed_usd": 0.0}
    client.post("/sessions/s-2/events", json=[{"type": "turn_start"},
                                              {"type": "usage", "cost_usd": 12.5}], headers=AUTH)
    got = client.get("/sessions/s-2/guardrails", headers=AUTH).json()
    assert (got["halted"], got["halted_by"], got["spent_usd"]) == (True, ["cost_ceiling"], 12.5)
    assert got["tripped"]["cost_ceiling"].startswith("per-session cost ceiling exceeded")
    assert (got["would_retrip"], got["budget_needed_usd"]) == (True, 2.5)


def test_a_reset_that_would_retrip_is_409_with_the_librarys_figures(
        client: TestClient, implementation: str) -> None:
    client.post("/sessions/s-3/events", json=[{"type": "turn_start"},
                                              {"type": "usage", "cost_usd": 12.5}], headers=AUTH)
    # the library's own answer for the same session state
    twin = Fleet(CONFIG, implementation=implementation)
    twin.session("t").start_turn()
    twin.session("t").on_usage(cost_usd=12.5)
    for body in (None, {"additional_budget_usd": 2.5}):
        with pytest.raises(ResetRefused) as refused:
            twin.reset("t", additional_budget_usd=(body or {}).get("additional_budget_usd", 0.0))
        r = client.post("/sessions/s-3/guardrails/reset", headers=AUTH,
                        **({"json": body} if body is not None else {}))
        assert r.status_code == 409
        assert r.json() == {"error": refused.value.reason,
                            "budget_needed_usd": refused.value.needed_usd,
                            "spent_usd": 12.5, "ceiling_usd": refused.value.ceiling_usd}
    assert client.get("/sessions/s-3/guardrails", headers=AUTH).json()["halted"] is True
    r = client.post("/sessions/s-3/guardrails/reset", json={"additional_budget_usd": 2.51},
                    headers=AUTH)
    assert r.status_code == 200
    assert r.json() == {"session": "s-3", "cleared": ["per-session cost ceiling"],
                        "still_halted_by": [], "max_session_cost_usd": 12.51,
                        "message": r.json()["message"]}
    assert r.json()["message"].startswith("reset: cleared per-session cost ceiling")
    assert client.get("/sessions/s-3/guardrails", headers=AUTH).json()["halted"] is False


def test_a_bare_reset_clears_a_watchdog_halt(client: TestClient) -> None:
    client.post("/sessions/s-4/events", json=LOOP, headers=AUTH)
    r = client.post("/sessions/s-4/guardrails/reset", headers=AUTH)
    assert (r.status_code, r.json()["cleared"], r.json()["still_halted_by"]) == (
        200, ["watchdog"], [])
    r = client.post("/sessions/s-4/events", json={"type": "turn_start"}, headers=AUTH)
    (turn,) = r.json()["decisions"]  # the resumed turn: not refused, and it says why it stopped
    assert (turn["event"], turn["action"], turn["compact"]) == (0, "continue", False)
    assert turn["feedback"].startswith("[watchdog] ") and "read_file" in turn["feedback"]
    assert r.json()["halted"] is False


@pytest.mark.parametrize(("url", "body", "error"), [
    ("/sessions/s/events", b"", "the body is empty: send JSON"),
    ("/sessions/s/events", b"{not json", "the body is not JSON (Expecting property name "
                                         "enclosed in double quotes: line 1 column 2 (char 1))"),
    ("/sessions/s/events", b"[]", "no events in the body"),
    ("/sessions/s/events", b'[{"type": "turn_start"}, {"type": "nap"}]',
     "event 1: unknown event type 'nap' (this route takes call, result, text, usage, "
     "turn_start, turn_end, reset, compaction, stop_attempt, retry)"),
    ("/sessions/s/events", b'[{"type": "turn_start"}, {"type": "task_start"}]',
     "event 1: a 'task_start' event is not taken here (serve runs each session under its own "
     "task, whose caps are --config's [budget]) (this route takes call, result, text, usage, "
     "turn_start, turn_end, reset, compaction, stop_attempt, retry)"),
    ("/sessions/s/events", b'[{"type": "turn_start"}, {"type": "budget_raise", "by": 5}]',
     "event 1: a 'budget_raise' event is not taken here (an operator raises a task's caps "
     "with POST /tasks/{id}/budget) (this route takes call, result, text, usage, turn_start, "
     "turn_end, reset, compaction, stop_attempt, retry)"),
    ("/sessions/s/events", b'[{"type": "call"}]', None),
    ("/sessions/s/guardrails/reset", b"[1]", "a reset body is a JSON object, not list"),
    ("/sessions/s/guardrails/reset", b'{"budget": 1}',
     "unknown reset field(s) budget (known: guardrail, additional_budget_usd)"),
    ("/sessions/s/guardrails/reset", b'{"guardrail": 1}',
     "guardrail must be a string: watchdog, cost_ceiling or all"),
    ("/sessions/s/guardrails/reset", b'{"additional_budget_usd": "5"}',
     "additional_budget_usd must be a number of US dollars"),
    ("/sessions/s/guardrails/reset", b'{"guardrail": "everything"}', None),
    ("/sessions/s/guardrails/reset", b'{"guardrail": "watchdog", "additional_budget_usd": 1}',
     "additional budget applies to the cost ceiling, not the watchdog"),
    ("/sessions/s/guardrails/reset", b'{"additional_budget_usd": -1}', None),
])
def test_bad_bodies_are_400_with_one_line(client: TestClient, url: str, body: bytes,
                                          error: str | None) -> None:
    client.post("/sessions/s/events", json={"type": "turn_start"}, headers=AUTH)
    r = client.post(url, content=body, headers=AUTH)
    assert r.status_code == 400, r.text
    got = r.json()["error"]
    assert "\n" not in got and "Traceback" not in got
    if error is not None:
        assert got == error
    else:
        assert got  # the library's own message, whatever its wording
    assert client.get("/sessions/s/guardrails", headers=AUTH).json()["halted"] is False


def test_metrics_count_alerts_trips_and_requests(client: TestClient) -> None:
    client.post("/sessions/m/events", json=LOOP, headers=AUTH)
    client.post("/sessions/m/events", json={"type": "turn_start"}, headers=AUTH)
    client.get("/metrics")
    text = client.get("/metrics", headers=AUTH).text
    lines = set(text.splitlines())
    assert {'tripwire_alerts_total{signal="repeated-tool-call",severity="critical"} 1',
            'tripwire_trips_total{guardrail="watchdog"} 1',
            "tripwire_refused_turns_total 1", "tripwire_sessions 1",
            "tripwire_http_events_total 7",
            'tripwire_http_requests_total{route="events",code="200"} 2',
            'tripwire_http_requests_total{route="metrics",code="401"} 1'} <= lines


# --- usage without cost_usd: priced from the catalogue, as replay prices it ---------------

ESTIMATED = " (estimated: the spend includes costs computed from token prices)"


def catalogue_price(model: str, provider: str, input_tokens: int, output_tokens: int) -> float:
    genai_prices = pytest.importorskip("genai_prices", reason="the prices extra is not installed")
    return float(genai_prices.calc_price(
        genai_prices.Usage(input_tokens=input_tokens, output_tokens=output_tokens), model,
        provider_id=provider).total_price)


def sonnet(input_tokens: int, output_tokens: int) -> dict[str, object]:
    return {"type": "usage", "model": "claude-sonnet-4-5", "provider": "anthropic",
            "input_tokens": input_tokens, "output_tokens": output_tokens}


def test_usage_without_a_cost_is_priced_from_the_catalogue(tmp_path: Path,
                                                           implementation: str) -> None:
    # claude-sonnet-4-5 at $3 per million input tokens and $15 per million output tokens:
    # 12,000 in and 3,000 out cost $0.036 + $0.045
    assert catalogue_price("claude-sonnet-4-5", "anthropic", 12_000, 3_000) == 0.081
    fleet = Fleet(CONFIG, implementation=implementation, store=SQLiteStore(tmp_path / "p.db"))
    client = TestClient(create_app(fleet, TOKEN))
    r = client.post("/sessions/p/events", headers=AUTH, json=[
        {"type": "turn_start"}, sonnet(12_000, 3_000),
        {"type": "usage", "cost_usd": 0.5},  # reported: taken as is
        {"type": "usage", "model": "no-such-model-9", "input_tokens": 100},  # no price
        {"type": "turn_end"}])
    assert (r.status_code, r.json()["decisions"]) == (200, [])
    assert client.get("/sessions/p/guardrails", headers=AUTH).json()["spent_usd"] == 0.581
    fleet.session("p").flush()
    # the store says so, as replay's rows do: the spend is partly estimated, a model unpriced
    last = [r.data for r in fleet.store.history("p").rows if "spent_usd" in r.data][-1]
    assert (last["spent_usd"], last["estimated"], last["unpriced_models"]) == (
        0.581, True, ["no-such-model-9"])


def test_a_trip_on_priced_usage_says_it_is_estimated(client: TestClient) -> None:
    # 400,000 output tokens at $15 per million: $6, twice, past the $10 ceiling
    assert catalogue_price("claude-sonnet-4-5", "anthropic", 0, 400_000) == 6.0
    r = client.post("/sessions/e/events", headers=AUTH, json=[
        {"type": "turn_start"}, sonnet(0, 400_000),
        {"type": "call", "name": "read_file", "args": {"path": "a.py"}},
        sonnet(0, 400_000), {"type": "call", "name": "read_file", "args": {"path": "b.py"}}])
    assert r.status_code == 200
    halt, blocked = r.json()["decisions"]  # by the request's own event indexes
    assert (halt["event"], halt["action"], halt["guardrail"]) == (3, "halt_session",
                                                                   "cost_ceiling")
    assert halt["reason"] == (
        "per-session cost ceiling exceeded: the session cost $12.0000, ceiling is $10.0000; "
        "a reset must add budget (additional_budget_usd) because a bare reset would re-trip "
        "at once" + ESTIMATED)
    assert (blocked["event"], blocked["action"]) == (4, "halt_session")
    got = client.get("/sessions/e/guardrails", headers=AUTH).json()
    assert (got["spent_usd"], got["budget_needed_usd"]) == (12.0, 2.0)


def test_priced_usage_keeps_the_batch_s_event_indexes(client: TestClient) -> None:
    """A priced usage runs between batches: the decisions after it keep the request's
    indexes, and a halted session's later priced usage gets the halt, as a batch row would."""
    loop = list(LOOP)
    loop.insert(2, sonnet(1_000, 100))
    loop.append(sonnet(1_000, 100))
    r = client.post("/sessions/i/events", json=loop, headers=AUTH)
    assert [(d["event"], d["action"]) for d in r.json()["decisions"]] == [
        (6, "halt_session"), (7, "halt_session")]
    spent = client.get("/sessions/i/guardrails", headers=AUTH).json()["spent_usd"]
    assert spent == round(2 * catalogue_price("claude-sonnet-4-5", "anthropic", 1_000, 100), 9)


# --- a real server process -----------------------------------------------------------------


def start_server(tmp_path: Path, store: str, implementation: str,
                 *extra: str) -> tuple[subprocess.Popen[str], str]:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    env = {k: v for k, v in os.environ.items() if k != "TRIPWIRE_SERVE_TOKEN"}
    env["TRIPWIRE_IMPLEMENTATION"] = implementation
    proc = subprocess.Popen(
        [sys.executable, "-m", "tripwire", "serve", "--port", "0", "--store", store,
         "--token-file", str(token_file), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed once the socket listens
    assert line.startswith("tripwire serve: listening on http://127.0.0.1:"), (
        line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, line.rsplit(" ", 1)[1].strip()


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    return err


def test_a_real_server_halts_refuses_and_restores_from_its_store(
        tmp_path: Path, implementation: str) -> None:
    store = str(tmp_path / "serve.db")
    config = ("--config", str(_config(tmp_path)))
    proc, url = start_server(tmp_path, store, implementation, *config)
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=10) as http:
            r = http.post("/sessions/live/events", json=LOOP)
            assert [(d["event"], d["action"]) for d in r.json()["decisions"]] == [
                (5, "halt_session")]
    finally:
        err = stop(proc)
    assert proc.returncode == 0, err
    proc, url = start_server(tmp_path, store, implementation, *config)  # the same store
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=10) as http:
            got = http.get("/sessions/live/guardrails").json()
            assert (got["halted"], got["halted_by"]) == (True, ["watchdog"])
            r = http.post("/sessions/live/events", json={"type": "turn_start"})
            assert r.json()["decisions"][0]["action"] == "refuse_turn"
            assert http.post("/sessions/live/guardrails/reset").status_code == 200
            assert http.get("/healthz", headers={}).json() == {"ok": True, "sessions": 1}
    finally:
        stop(proc)


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "tripwire.toml"
    path.write_text('[watchdog]\nmode = "enforce"\n[cost]\nmax_session_usd = 10.0\n')
    return path


def test_serve_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRIPWIRE_SERVE_TOKEN"}
    proc = subprocess.run([sys.executable, "-m", "tripwire", "serve", "--port", "0"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "tripwire: tripwire serve needs a bearer token: --token-file PATH or "
        "$TRIPWIRE_SERVE_TOKEN")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    proc = subprocess.run([sys.executable, "-m", "tripwire", "serve", "--token-file",
                           str(empty)], capture_output=True, text=True, env=env, timeout=60)
    assert (proc.returncode, proc.stderr.strip().splitlines()[-1]) == (
        2, f"tripwire: {empty}: the token file is empty")



# --- issue 23: bad input is a 400 (never a 500), bounded bodies, routes, sessions ------------

DEEP = b'{"type": "call", "name": "a", "args": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
HUGE = b'{"type": "usage", "input_tokens": ' + b"9" * 5_000 + b"}"
LONG = b'{"type": "usage", "input_tokens": ' + b"9" * 400 + b", \"cost_usd\": 0.01}"


@pytest.mark.parametrize("url, body, error", [
    ("/sessions/%2A/events", b'{"type": "turn_start"}', "session id '*' is reserved"),
    ("/sessions/task:t1/events", b'{"type": "turn_start"}', "session id 'task:t1' is reserved"),
    ("/sessions/s/events", DEEP, "the body is not JSON tripwire reads (nested too deeply)"),
    ("/sessions/s/events", HUGE, "the body is not JSON (Exceeds the limit (4300 digits)"),
    ("/sessions/s/events", LONG, "event 0: field 'input_tokens' must be an integer from 0 to "
                                 "1,000,000,000,000, not an integer of 400 digits"),
])
def test_bad_requests_are_400_never_500(client: TestClient, url: str, body: bytes,
                                        error: str) -> None:
    r = client.post(url, content=body, headers=AUTH)
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith(error)
    # nothing was charged, and the session's next event is taken as usual
    r = client.post("/sessions/s/events", json=[{"type": "turn_start"},
                                                {"type": "usage", "cost_usd": 0.5}], headers=AUTH)
    assert r.status_code == 200
    assert client.get("/sessions/s/guardrails", headers=AUTH).json()["spent_usd"] == 0.5
    assert 'code="500"' not in client.get("/metrics", headers=AUTH).text


def test_an_internal_fault_is_a_counted_json_500(implementation: str) -> None:
    fleet = Fleet(CONFIG, implementation=implementation)

    def broken(*args: object) -> None:
        raise RuntimeError("a fault of tripwire's own")

    fleet.observe_many = broken  # type: ignore[method-assign]
    client = TestClient(create_app(fleet, TOKEN), raise_server_exceptions=False)
    r = client.post("/sessions/s/events", json={"type": "turn_start"}, headers=AUTH)
    assert (r.status_code, r.json()) == (500, {"error": "internal error: a fault of tripwire's own"})
    assert 'tripwire_http_requests_total{route="events",code="500"} 1' in \
        client.get("/metrics", headers=AUTH).text


def test_the_bearer_scheme_is_case_insensitive_and_the_token_is_not(client: TestClient) -> None:
    for scheme in ("bearer", "BEARER", "Bearer", "bEaReR"):
        r = client.get("/metrics", headers={"Authorization": f"{scheme} {TOKEN}"})
        assert r.status_code == 200, scheme
    r = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN.upper()}"})
    assert r.status_code == 401


def test_unknown_routes_and_methods_answer_json(client: TestClient) -> None:
    r = client.get("/nowhere", headers=AUTH)
    assert (r.status_code, r.json()) == (404, {"error": "no such route: GET /nowhere"})
    r = client.get("/sessions/s/events", headers=AUTH)
    assert (r.status_code, r.json()) == (
        405, {"error": "method not allowed: GET /sessions/s/events"})
    text = client.get("/metrics", headers=AUTH).text
    assert 'tripwire_http_requests_total{route="unknown",code="404"} 1' in text


def test_an_unknown_session_is_404_and_is_not_created(client: TestClient) -> None:
    r = client.get("/sessions/ghost/guardrails", headers=AUTH)
    assert (r.status_code, r.json()) == (404, {"error": "no session 'ghost'"})
    r = client.post("/sessions/ghost/guardrails/reset", headers=AUTH)
    assert (r.status_code, r.json()) == (404, {"error": "no session 'ghost'"})
    assert client.get("/healthz").json() == {"ok": True, "sessions": 0}


def test_a_session_known_only_to_the_store_is_found(tmp_path: Path, implementation: str) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    first = Fleet(CONFIG, implementation=implementation, store=store)
    first.session("old").start_turn()
    first.session("old").on_usage(cost_usd=12.0)  # halts past the $10 ceiling
    client = TestClient(create_app(Fleet(CONFIG, implementation=implementation, store=store),
                                   TOKEN))
    got = client.get("/sessions/old/guardrails", headers=AUTH).json()
    assert (got["halted"], got["spent_usd"]) == (True, 12.0)


def _raw_request(url: str, head: bytes) -> tuple[bytes, float]:
    """Send ``head`` on a new connection; the first bytes of the answer and how long they
    took (a server that read a declared body first would wait for bytes never sent)."""
    import socket
    import time

    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        start = time.monotonic()
        s.sendall(head)
        answer = b""
        while not answer.endswith(b"}"):  # the status line, headers, then the JSON body
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
        return answer, time.monotonic() - start


def test_a_real_server_refuses_an_oversized_body_before_reading_it(
        tmp_path: Path, implementation: str) -> None:
    proc, url = start_server(tmp_path, str(tmp_path / "serve.db"), implementation)
    try:
        # a declared gigabyte, of which nothing is sent: answered at once, not read first
        answer, took = _raw_request(url, (
            f"POST /sessions/s/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n").encode())
        assert answer.startswith(b"HTTP/1.1 413 "), answer
        assert b'"the body is 1000000000 bytes (at most 1048576)"' in answer
        assert took < 5
        # a chunked body with no length is cut off once it passes the bound
        with httpx.Client(base_url=url, headers=AUTH, timeout=30) as http:
            def chunks():
                for _ in range(40):
                    yield b" " * 65536
            r = http.post("/sessions/s/events", content=chunks())
            assert (r.status_code, r.json()) == (413, {"error": "the body is over 1048576 bytes"})
    finally:
        err = stop(proc)
    assert proc.returncode == 0, err


def test_a_huge_count_over_http_poisons_nothing(tmp_path: Path, implementation: str) -> None:
    """A 400-digit token count is a 400 before anything is charged; the session's later
    events on the same keep-alive connection are decided as usual (a $12 usage past the $10
    ceiling halts); SIGTERM exits 0 without a traceback, and the restart restores the halt."""
    store = str(tmp_path / "serve.db")
    config = ("--config", str(_config(tmp_path)))
    proc, url = start_server(tmp_path, store, implementation, *config)
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=10) as http:
            assert http.post("/sessions/p/events", json={"type": "turn_start"}).status_code == 200
            r = http.post("/sessions/p/events", content=LONG)
            assert r.status_code == 400, r.text
            r = http.post("/sessions/p/events", json={"type": "usage", "cost_usd": 12.0})
            assert r.status_code == 200
            assert [d["action"] for d in r.json()["decisions"]] == ["halt_session"]
            assert http.post("/sessions/q/events", json={"type": "usage", "cost_usd": 1.5}
                             ).status_code == 200
    finally:
        err = stop(proc)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    proc, url = start_server(tmp_path, store, implementation, *config)
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=10) as http:
            got = http.get("/sessions/p/guardrails").json()
            assert (got["halted"], got["spent_usd"]) == (True, 12.0)
            assert http.get("/sessions/q/guardrails").json()["spent_usd"] == 1.5
    finally:
        stop(proc)


def test_serve_port_is_range_checked() -> None:
    proc = subprocess.run([sys.executable, "-m", "tripwire", "serve", "--port", "99999"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "tripwire serve: argument --port: a port is 0 to 65535 (0: any free port), not 99999 "
        "(see tripwire serve --help)"]


def test_stop_attempts_and_retries_are_a_sessions_events(client: TestClient) -> None:
    """A stop attempt a stop hook refused, and a provider retry, are charged to the session's
    task over HTTP as in replay (the route takes every session event): the 9th refusal passes
    the default cap of 8 and exhausts the task; the next turn is refused."""
    events = [{"type": "turn_start"}, {"type": "retry", "reason": "529 overloaded"}] + [
        {"type": "stop_attempt", "accepted": False} for _ in range(9)]
    r = client.post("/sessions/s-9/events", json=events, headers=AUTH)
    assert r.status_code == 200, r.text
    (cut,) = r.json()["decisions"]
    assert (cut["event"], cut["action"], cut["guardrail"]) == (10, "cut_turn", "budget")
    assert cut["reason"] == "task s-9 exhausted this task's refused attempts to finish: 9 of 8"
    r = client.post("/sessions/s-9/events", json={"type": "turn_start"}, headers=AUTH)
    (refused,) = r.json()["decisions"]
    assert (refused["action"], refused["guardrail"]) == ("refuse_turn", "budget")


@pytest.mark.parametrize("budget", [None, {"tool_calls": 50}])
def test_a_live_sessions_task_answers_its_routes(implementation: str,
                                                 budget: dict | None) -> None:
    """``/tasks/{id}/budget`` and ``/check-in`` find a live session's own task by the
    session's id, with or without a [budget] config: never 404. A counter with no cap has
    nothing to raise (400, saying so); a capped one is raised."""
    from tripwire.budgets import Budget

    config = GuardrailsConfig(mode="enforce", unattended=False,
                              budget=Budget(**budget) if budget else None)
    client = TestClient(create_app(Fleet(config, implementation=implementation), TOKEN))
    client.post("/sessions/live-1/events", json=LOOP[:3], headers=AUTH)
    r = client.post("/tasks/live-1/check-in", headers=AUTH)
    assert (r.status_code, r.json()["task"]) == (200, "live-1")
    r = client.post("/tasks/live-1/budget", json={"raise": {"tool_calls": 10}}, headers=AUTH)
    if budget is None:
        assert (r.status_code, r.json()) == (
            400, {"error": "task live-1 has no cap of tool_calls to raise"})
    else:
        assert r.status_code == 200, r.text
        assert r.json()["caps"] == {"tool_calls": 60}
        assert r.json()["remaining"]["tool_calls"] == 58
    assert client.post("/tasks/nobody/check-in", headers=AUTH).status_code == 404


def test_the_agent_token_posts_events_and_is_refused_a_reset(implementation: str) -> None:
    fleet = Fleet(CONFIG, implementation=implementation)
    agent = {"Authorization": "Bearer the agent's token"}
    http = TestClient(create_app(fleet, TOKEN, agent_token="the agent's token"))
    assert http.post("/sessions/a/events", json=LOOP, headers=agent).json()["halted"] is True
    for url in ("/sessions/a/guardrails/reset", "/tasks/a/check-in"):
        r = http.post(url, headers=agent)
        assert r.status_code == 403, url
    assert http.post("/tasks/a/budget", headers=agent,
                     json={"raise": {"steps": 9}}).status_code == 403
    assert http.get("/sessions/a/guardrails", headers=agent).json()["halted"] is True
    assert http.post("/sessions/a/guardrails/reset", headers=AUTH).status_code == 200


def test_an_agent_token_equal_to_the_operators_is_refused() -> None:
    from tripwire.errors import ConfigError

    with pytest.raises(ConfigError, match="differ from the operator's"):
        create_app(Fleet(CONFIG), TOKEN, agent_token=TOKEN)
