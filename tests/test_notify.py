"""Notifications (``--notify URL``): a halt posts one JSON body to a real receiver on 127.0.0.1,
through serve's own app; a receiver that is down, answers 500, or is slow never delays the
decision and gets the message once it can; past the queue's bound a message is dropped and
counted in /metrics. Orderings are asserted with events, never with timings."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("starlette", reason="tripwire serve needs the serve extra (starlette)")
pytest.importorskip("httpx", reason="the serve tests talk HTTP with httpx")
from starlette.testclient import TestClient  # noqa: E402

from tripwire import GuardrailsConfig  # noqa: E402
from tripwire.cli.serve import create_app  # noqa: E402
from tripwire.errors import ConfigError  # noqa: E402
from tripwire.fleet.fleet import Fleet  # noqa: E402
from tripwire.web.notify import Notifier, attach  # noqa: E402

TOKEN = "a token for the tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CONFIG = GuardrailsConfig(mode="enforce", unattended=True, max_session_cost_usd=10.0)
LOOP = [{"type": "turn_start"}] + [
    {"type": "call", "name": "read_file", "args": {"path": "a.py"}} for _ in range(5)]
WAIT = 10.0  # seconds a test waits for something that must happen (a bound, not a measure)


class Receiver:
    """An HTTP receiver on 127.0.0.1: answers each POST with the next of ``statuses`` (then
    200), after ``hold`` is set (or ``hold_for`` seconds) when ``slow``."""

    def __init__(self, port: int = 0, statuses: list[int] | None = None,
                 slow: bool = False, hold_for: float = 2.0) -> None:
        self.statuses = list(statuses or [])
        self.requests: list[tuple[int, dict[str, Any]]] = []  # (status answered, body)
        self.arrived = threading.Event()
        self.answered = threading.Event()
        self.hold = threading.Event()
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                receiver.arrived.set()
                if slow:
                    receiver.hold.wait(hold_for)
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                with receiver.changed:
                    receiver.requests.append((status, body))
                    receiver.changed.notify_all()
                receiver.answered.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, n: int) -> list[tuple[int, dict[str, Any]]]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.requests) >= n, WAIT), self.requests
            return list(self.requests)

    def stop(self) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def served(implementation: str, notifier: Notifier) -> TestClient:
    fleet = Fleet(CONFIG, implementation=implementation, on_event=notifier.on_event)
    attach(notifier, fleet)
    return TestClient(create_app(fleet, TOKEN, notifier))


def halt(client: TestClient, session: str) -> dict[str, Any]:
    r = client.post(f"/sessions/{session}/events", json=LOOP, headers=AUTH)
    assert r.status_code == 200 and r.json()["halted"] is True, r.text
    return dict(r.json())


def counted(client: TestClient, name: str) -> int:
    for line in client.get("/metrics", headers=AUTH).text.splitlines():
        if line.startswith(f"tripwire_notifications_{name}_total "):
            return int(line.split()[1])
    return 0


def settle(client: TestClient, name: str, n: int) -> None:
    deadline = time.monotonic() + WAIT
    while counted(client, name) < n:
        assert time.monotonic() < deadline, f"notifications_{name} never reached {n}"
        time.sleep(0.01)


def test_a_halt_posts_exactly_one_body_with_its_fields(implementation: str,
                                                       receiver: Receiver) -> None:
    notifier = Notifier([receiver.url], backoff=0.01)
    client = served(implementation, notifier)
    decision = halt(client, "s-1")["decisions"][0]
    # a refused turn of the halted session afterwards is no new halt: nothing more is posted
    client.post("/sessions/s-1/events", json=[{"type": "turn_start"}], headers=AUTH)
    ((status, body),) = receiver.wait_for(1)
    notifier.close()
    assert len(receiver.requests) == 1
    assert set(body) == {"event", "session", "task", "guardrail", "reason", "at"}
    assert (body["event"], body["session"], body["task"], body["guardrail"]) == (
        "halt", "s-1", "s-1", "watchdog")  # the session's implicit task has its id
    assert body["reason"] == decision["reason"]
    assert body["at"].endswith("+00:00")
    assert counted(client, "sent") == 1 and counted(client, "dropped") == 0


def test_a_slack_body_is_one_text(implementation: str, receiver: Receiver) -> None:
    notifier = Notifier([receiver.url], "slack", backoff=0.01)
    halt(served(implementation, notifier), "s-9")
    ((_, body),) = receiver.wait_for(1)
    notifier.close()
    assert list(body) == ["text"]
    assert body["text"].startswith("tripwire halt: session s-9 (task s-9), watchdog: watchdog "
                                   "halted the session (repeated-tool-call)")


def test_a_receiver_down_at_first_gets_the_message_when_it_is_back(implementation: str) -> None:
    with socket.socket() as s:  # a port nobody listens on (yet): connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    notifier = Notifier([f"http://127.0.0.1:{port}/hook"], attempts=8, backoff=0.05)
    client = served(implementation, notifier)
    halt(client, "s-2")
    settle(client, "retries", 1)  # an attempt failed against the closed port
    assert counted(client, "sent") == 0
    back = Receiver(port)
    try:
        ((status, body),) = back.wait_for(1)
        settle(client, "sent", 1)
        notifier.close()
        assert (status, body["event"], body["session"]) == (200, "halt", "s-2")
        assert len(back.requests) == 1 and counted(client, "dropped") == 0
    finally:
        back.stop()


def test_a_500_then_200_is_delivered_once(implementation: str) -> None:
    flaky = Receiver(statuses=[500])
    try:
        notifier = Notifier([flaky.url], backoff=0.01)
        client = served(implementation, notifier)
        halt(client, "s-3")
        settle(client, "sent", 1)
        notifier.close()  # the worker has stopped: no later attempt can arrive
        assert [status for status, _ in flaky.requests] == [500, 200]
        assert flaky.requests[0][1] == flaky.requests[1][1]  # the same message, retried
        assert (counted(client, "sent"), counted(client, "retries"),
                counted(client, "dropped")) == (1, 1, 0)
    finally:
        flaky.stop()


def test_a_slow_receiver_never_delays_the_decision(implementation: str) -> None:
    slow = Receiver(slow=True, hold_for=2.0)  # answers after 2 s unless released sooner
    try:
        notifier = Notifier([slow.url], backoff=0.01)
        client = served(implementation, notifier)
        halt(client, "s-4")
        # the decision came back while the receiver still holds its answer
        assert not slow.answered.is_set()
        assert slow.arrived.wait(WAIT)  # the message is on its way all the same
        assert not slow.answered.is_set()
        slow.hold.set()
        settle(client, "sent", 1)
        notifier.close()
    finally:
        slow.stop()


def test_past_the_queue_bound_messages_are_dropped_and_counted(implementation: str) -> None:
    slow = Receiver(slow=True, hold_for=WAIT)
    try:
        notifier = Notifier([slow.url], queue_size=1, backoff=0.01)
        client = served(implementation, notifier)
        halt(client, "q-1")
        assert slow.arrived.wait(WAIT)  # the worker holds q-1 in its post: the queue is empty
        for sid in ("q-2", "q-3", "q-4"):  # q-2 fills the queue; q-3 and q-4 find it full
            halt(client, sid)
        assert counted(client, "dropped") == 2
        text = client.get("/metrics", headers=AUTH).text
        assert "# TYPE tripwire_notifications_dropped_total counter\n" \
               "tripwire_notifications_dropped_total 2\n" in text
        slow.hold.set()
        settle(client, "sent", 2)
        notifier.close()
        assert [body["session"] for _, body in slow.requests] == ["q-1", "q-2"]
    finally:
        slow.stop()


def test_a_receiver_that_never_answers_well_is_given_up_and_counted(implementation: str) -> None:
    broken = Receiver(statuses=[500, 500, 500])
    try:
        notifier = Notifier([broken.url], attempts=3, backoff=0.01)
        client = served(implementation, notifier)
        halt(client, "s-5")
        settle(client, "dropped", 1)
        notifier.close()
        assert [status for status, _ in broken.requests] == [500, 500, 500]
        assert counted(client, "sent") == 0
    finally:
        broken.stop()


@pytest.mark.parametrize("url", ["ftp://example.org/x", "not a url", "http:///nohost"])
def test_a_bad_url_is_a_one_line_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match="an http:// or https:// URL with a host"):
        Notifier([url])


@pytest.mark.parametrize(("checkin", "event", "words"), [
    ({"steps": 3}, "check_in", "check-in window"), (None, "exhausted", "exhausted")])
def test_a_task_paused_at_a_check_in_or_exhausted_posts_one_body(
        implementation: str, receiver: Receiver, checkin: dict[str, int] | None, event: str,
        words: str) -> None:
    from tripwire.budgets.caps import Budget

    budget = Budget(steps=100, checkin=checkin) if checkin else Budget(steps=3)
    config = GuardrailsConfig(mode="enforce", unattended=True, max_session_cost_usd=0,
                              budget=budget)
    notifier = Notifier([receiver.url], backoff=0.01)
    fleet = Fleet(config, implementation=implementation, on_event=notifier.on_event)
    attach(notifier, fleet)
    client = TestClient(create_app(fleet, TOKEN, notifier))
    events: list[dict[str, Any]] = [{"type": "turn_start"}]
    for n in range(5):
        events += [{"type": "call", "name": "read_file", "args": {"path": f"m{n}.py"}},
                   {"type": "result", "name": "read_file", "output": f"contents {n}"},
                   {"type": "usage", "model": "m", "input_tokens": 100, "output_tokens": 10,
                    "cost_usd": 0.001}]
    r = client.post("/sessions/t-1/events", json=events, headers=AUTH)
    assert r.status_code == 200, r.text
    cut = [d for d in r.json()["decisions"] if d["action"] == "cut_turn"]
    assert cut and cut[0]["guardrail"] == "budget", r.json()
    ((_, body),) = receiver.wait_for(1)
    notifier.close()
    assert len(receiver.requests) == 1
    assert (body["event"], body["session"], body["task"], body["guardrail"]) == (
        event, "t-1", "t-1", "budget")
    assert words in body["reason"] and body["reason"] == cut[0]["reason"]


def test_the_gateway_posts_a_halt_and_counts_it_in_its_metrics(implementation: str,
                                                              receiver: Receiver) -> None:
    """The same notifier on the gateway: its fleet's operator callback, its app's metrics."""
    pytest.importorskip("aiohttp", reason="the gateway needs the gateway extra (aiohttp)")
    import httpx
    from gateway_support import FakeModel, Harness, looping, serving

    from tripwire.gateway.app import Gateway
    from tripwire.gateway.app import create_app as gateway_app
    from tripwire.gateway.upstreams import Upstream

    notifier = Notifier([receiver.url], backoff=0.01)
    call = {"name": "Bash", "input": {"command": "echo hi >> f"}}
    with FakeModel(looping("anthropic", call)) as model:
        fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=True),
                      implementation=implementation, feedback_at_once=True,
                      on_event=notifier.on_event)
        attach(notifier, fleet)
        gateway = Gateway(fleet, {"anthropic": Upstream("anthropic", model.url, None)}, None,
                          store_label="s.db")
        with serving(gateway_app(gateway, TOKEN, notifier.metrics)) as url:
            Harness(httpx.Client(base_url=url, timeout=10), "anthropic", stream=False).turn("do it")
            assert fleet.session("s1").halted
            ((_, body),) = receiver.wait_for(1)
            deadline = time.monotonic() + WAIT
            while "tripwire_notifications_sent_total 1\n" not in (metrics := httpx.get(
                    f"{url}/tripwire/metrics", headers=AUTH).text):
                assert time.monotonic() < deadline, metrics
                time.sleep(0.01)
    notifier.close()
    assert (body["event"], body["session"], body["guardrail"]) == ("halt", "s1", "watchdog")
    assert "repeated-tool-call" in body["reason"] and len(receiver.requests) == 1


def test_a_real_serve_process_posts_to_each_notify_url(tmp_path: Any, implementation: str,
                                                       receiver: Receiver) -> None:
    """``tripwire serve --config F --notify B`` with F's ``[notify] urls = [A]`` and
    ``format = "slack"``: the command line's wiring, in a real process; each URL gets the halt
    once."""
    import httpx
    from test_serve import _config, start_server, stop

    other = Receiver()
    try:
        config = _config(tmp_path)
        config.write_text(config.read_text() + f'\n[notify]\nurls = ["{receiver.url}"]\n'
                          'format = "slack"\n')
        proc, url = start_server(tmp_path, str(tmp_path / "serve.db"), implementation,
                                 "--config", str(config), "--notify", other.url)
        try:
            with httpx.Client(base_url=url, headers=AUTH, timeout=10) as http:
                assert http.post("/sessions/live/events", json=LOOP).json()["halted"]
                ((_, body),) = receiver.wait_for(1)
                ((_, same),) = other.wait_for(1)
        finally:
            err = stop(proc)
        assert proc.returncode == 0, err
        assert body == same and body["text"].startswith("tripwire halt: session live")
    finally:
        other.stop()


def test_a_bad_notify_url_stops_serve_with_one_line(tmp_path: Any) -> None:
    import subprocess
    import sys

    token = tmp_path / "token"
    token.write_text(TOKEN)
    r = subprocess.run([sys.executable, "-m", "tripwire", "serve", "--port", "0",
                        "--token-file", str(token), "--notify", "ftp://x"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r
    assert r.stderr.count("\n") == 1 and "an http:// or https:// URL with a host" in r.stderr


@pytest.mark.parametrize(("section", "words"), [
    ({"url": ["http://x"]}, "[notify] takes urls"), ({"urls": "http://x"}, "a list of http(s)"),
    ({"urls": ["ftp://x"]}, "an http:// or https:// URL"), ({"format": "xml", "urls": ["http://x"]},
                                                           "one of json, slack")])
def test_a_bad_notify_section_is_a_config_error(section: dict[str, Any], words: str) -> None:
    from tripwire.web.notify import notifier_for

    with pytest.raises(ConfigError, match=re.escape(words)):
        notifier_for([], None, section)
    assert notifier_for([], None, {}) is None  # no URL anywhere: no notifier
