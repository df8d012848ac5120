"""``tripwire serve``: a fleet's guardrails over HTTP, for harnesses that are not Python (the
sidecar path) and for operators resetting halted sessions. Needs ``tripwire[serve]``
(Starlette on uvicorn).

Routes (JSON in and out; every route but ``/healthz`` needs ``Authorization: Bearer TOKEN``):

    GET  /healthz                          {"ok": true, "sessions": N}   (no token: for probes)
    GET  /metrics                          Prometheus text: alerts, trips, refused turns, HTTP
    GET  /sessions/{id}/guardrails         what is armed, what tripped and why, budget needed
    POST /sessions/{id}/guardrails/reset   body optional: {"guardrail", "additional_budget_usd"}
    POST /sessions/{id}/events             a session's interchange events in (an object or an
                                           array: ``SESSION_TYPES``), the decisions that are
                                           not a plain "continue" out
    POST /tasks/{id}/budget                {"raise": {"steps": 200, ...}}: raise a task's caps
    POST /tasks/{id}/check-in              the operator checked in: a new check-in window

Usage without ``cost_usd`` is priced from the model catalogue (``tripwire[prices]``) by the
dispatcher's rule (``session.dispatch``), as ``tripwire replay`` and the hooks price it: the cost
is marked estimated (trips say so, rows carry it), and a model the catalogue does not know has
no cost (``status`` names it unpriced).

A reset that would re-trip at once (the session spent at least its per-session ceiling plus
the added budget) is refused with **409** and the budget needed (add strictly more than
``budget_needed_usd``): the rule is the library's own (``CostCeiling.check_reset``, through
``Fleet.reset``). A request that makes no sense gets **400** with a one-line ``error``; a
missing or wrong token **401**; the agent's token (``--agent-token-file``: events, guardrails
status and metrics only) on a reset, raise or check-in **403**. Events go through ``Fleet.observe_many`` (in order, detection in
the native core; a usage the catalogue prices goes through the session's ``on_usage`` between
batches, with its estimated mark), so a session's decisions over HTTP are exactly the library's.

Every answer is JSON: 404 for an unknown route or a session the fleet does not know (a status
or a reset never creates one), 405 for a wrong method, 413 for a body over ``MAX_BODY`` (a
declared length is refused before the body is read), 500 for a fault of tripwire's own (logged,
and counted in ``/metrics`` as every status is).

A task (the fleet's, a session's implicit one by the session's id, or one the store holds)
is raised with ``POST /tasks/{id}/budget``; a raise that would leave its counter exhausted is
refused with **409** and ``raise_needed`` (the smallest sufficient raise, in the counter's
units), nothing changed (``Task.raise_cap``'s rule). A raise that is enough continues an
exhausted task: its next turn starts.

The default bind is loopback (127.0.0.1): exposing the reset surface beyond the machine is a
deliberate ``--host``. The token comes from ``--token-file`` or ``$TRIPWIRE_SERVE_TOKEN``;
without one the server does not start.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from ..base.decision import CONTINUE, Decision, Turn
from ..base.money import parse_dollars
from ..base.validate import check_session_id
from ..errors import (
    BatchInterrupted,
    ConfigError,
    InvalidEvent,
    InvalidReset,
    RaiseRefused,
    ResetRefused,
    TaskEnded,
    TripwireError,
)
from ..fleet.fleet import Fleet
from ..interchange.events import Retry, StopAttempt, parse_event
from ..session.dispatch import needs_pricing, observe_event

__all__ = ["create_app", "read_token", "TOKEN_ENV", "DEFAULT_HOST", "DEFAULT_PORT", "MAX_BODY"]

LOGGER = logging.getLogger("tripwire")

TOKEN_ENV = "TRIPWIRE_SERVE_TOKEN"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8737
MAX_BODY = 1 << 20  # bytes of one request body
MAX_EVENTS = 10_000  # events in one request
_RESET_KEYS = frozenset({"guardrail", "additional_budget_usd"})


def read_agent_token(token_file: str | None) -> str | None:
    """The agent's events-only token (``--agent-token-file``), or None when not given."""
    return None if token_file is None else read_token(token_file)


def read_token(token_file: str | None) -> str:
    """The bearer token: the file's content (stripped), else ``$TRIPWIRE_SERVE_TOKEN``."""
    if token_file is not None:
        try:
            with open(token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as exc:
            raise ConfigError(f"{token_file}: cannot read the token file ({exc.strerror})") \
                from None
        if not token:
            raise ConfigError(f"{token_file}: the token file is empty")
        return token
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise ConfigError(f"tripwire serve needs a bearer token: --token-file PATH or "
                          f"${TOKEN_ENV}")
    return token


class _BadRequest(Exception):
    def __init__(self, reason: str, status: int = 400, **extra: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.extra = extra


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _decision(index: int, outcome: Decision | Turn) -> dict[str, Any]:
    if isinstance(outcome, Turn):
        return {"event": index, "action": "continue", "feedback": outcome.feedback,
                "compact": outcome.compact}
    return {"event": index, **outcome.to_dict(),
            "alerts": [{"signal": a.signal, "severity": str(a.severity)} for a in outcome.alerts]}


def _known(fleet: Fleet, session_id: str) -> Any:
    """The session's guardrails; 404 for a session the fleet does not know (neither in memory
    nor in its store), which a status or a reset must not create (``tripwire status|reset``
    refuse it with exit 2 the same way)."""
    g = fleet.existing(session_id)
    if g is None:
        raise _BadRequest(f"no session {session_id!r}", 404)
    return g


def _guardrails(fleet: Fleet, session_id: str) -> dict[str, Any]:
    s = _known(fleet, session_id).status()
    return {
        "session": s.session_id,
        "mode": s.mode,
        "armed": {"watchdog": s.mode != "off", "max_turn_cost_usd": s.max_turn_cost_usd,
                  "max_session_cost_usd": s.max_session_cost_usd,
                  "context": s.context is not None},
        "halted": s.halted,
        "halted_by": list(s.halted_by),
        "tripped": {"watchdog": s.watchdog_reason, "cost_ceiling": s.cost_reason},
        "spent_usd": round(s.spent_usd, 9),
        "granted_budget_usd": round(s.granted_budget_usd, 9),
        "would_retrip": s.would_retrip,
        "budget_needed_usd": round(s.budget_needed_usd, 9),
    }


def _reset(fleet: Fleet, session_id: str, body: Any) -> dict[str, Any]:
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise _BadRequest(f"a reset body is a JSON object, not {type(body).__name__}")
    unknown = sorted(set(body) - _RESET_KEYS)
    if unknown:
        raise _BadRequest(f"unknown reset field(s) {', '.join(unknown)} (known: guardrail, "
                          "additional_budget_usd)")
    guardrail = body.get("guardrail", "all")
    budget = body.get("additional_budget_usd", 0.0)
    if not isinstance(guardrail, str):
        raise _BadRequest("guardrail must be a string: watchdog, cost_ceiling or all")
    if isinstance(budget, bool) or not isinstance(budget, int | float):
        raise _BadRequest("additional_budget_usd must be a number of US dollars")
    g = _known(fleet, session_id)
    try:
        outcome = g.reset(guardrail, parse_dollars(budget, "additional_budget_usd",
                                                   error=InvalidReset))
    except ResetRefused as refused:
        raise _BadRequest(refused.reason, 409, budget_needed_usd=round(refused.needed_usd, 9),
                          spent_usd=round(refused.spent_usd, 9),
                          ceiling_usd=round(refused.ceiling_usd, 9)) from None
    except InvalidReset as invalid:
        raise _BadRequest(str(invalid)) from None
    return {"session": session_id, "cleared": list(outcome.cleared),
            "still_halted_by": list(outcome.still_halted_by),
            "max_session_cost_usd": outcome.max_session_cost_usd,
            "message": outcome.message}


def _task_of(fleet: Fleet, task_id: str) -> Any:
    """The task ``task_id``: the fleet's, a session's implicit one (by the session's id), or
    one the store holds; 404 for none of them."""
    task = fleet.tasks.get(task_id)
    if task is not None:
        return task
    g = fleet.existing(task_id)
    if g is not None and g.task.task_id == task_id:
        return g.task
    if fleet.store is not None:
        from ..budgets.task_stored import open_stored_task

        try:
            return open_stored_task(fleet.store, task_id)
        except InvalidEvent:
            pass
    raise _BadRequest(f"no task {task_id!r}", 404)


def _raise(fleet: Fleet, task_id: str, body: Any) -> dict[str, Any]:
    from ..budgets.caps import CONSUMED

    raises = body.get("raise") if isinstance(body, dict) and set(body) == {"raise"} else None
    if not isinstance(raises, dict) or not raises:
        raise _BadRequest('a raise body is {"raise": {"<counter>": <amount>, ...}}')
    for counter, by in raises.items():
        if counter not in CONSUMED:
            raise _BadRequest(f"cannot raise {counter!r}: one of {', '.join(CONSUMED)}")
        if isinstance(by, bool) or not isinstance(by, int | float):
            raise _BadRequest(f"a raise of {counter} is a number, not {by!r}")
    task = _task_of(fleet, task_id)
    was = task.outcome
    caps: dict[str, Any] = {}
    try:
        for counter, by in raises.items():
            caps[counter] = task.raise_cap(counter, by, who="serve")
    except RaiseRefused as refused:
        raise _BadRequest(str(refused), 409, task=refused.task_id, counter=refused.counter,
                          raise_needed=refused.raise_needed, used=refused.used,
                          cap=refused.cap, raised=caps) from None
    except TaskEnded as ended:
        raise _BadRequest(f"task {task_id} has ended ({ended.outcome}): nothing to raise",
                          409) from None
    except ConfigError as bad:
        raise _BadRequest(str(bad)) from None
    return {"task": task.task_id, "caps": caps, "remaining": task.remaining(),
            "resumed": str(was) if was is not None and task.outcome is None else None,
            "outcome": None if task.outcome is None else str(task.outcome)}


def _check_in(fleet: Fleet, task_id: str, body: Any) -> dict[str, Any]:
    if body not in (None, {}):
        raise _BadRequest("a check-in takes no body")
    task = _task_of(fleet, task_id)
    was = task.outcome
    try:
        opened = task.check_in(who="serve")
    except TaskEnded as ended:
        raise _BadRequest(f"task {task_id} has ended ({ended.outcome})", 409) from None
    return {"task": task.task_id, "opened": opened,
            "resumed": str(was) if was is not None and task.outcome is None else None,
            "outcome": None if task.outcome is None else str(task.outcome)}


#: The interchange events ``POST /sessions/{id}/events`` takes: a session's observations.
#: A task's start and end are its host's (serve runs each session under its own implicit
#: task, capped by ``--config``'s ``[budget]``), and a raise or check-in is an operator's, on
#: its own route, never an event a harness sends.
SESSION_TYPES = ("call", "result", "text", "usage", "turn_start", "turn_end", "reset",
                 "compaction", "stop_attempt", "retry")
_NOT_TAKEN = {
    "task_start": "serve runs each session under its own task, whose caps are --config's "
                  "[budget]",
    "task_end": "serve runs each session under its own task, which ends with the session",
    "budget_raise": "an operator raises a task's caps with POST /tasks/{id}/budget",
    "check_in": "an operator checks in with POST /tasks/{id}/check-in",
}
#: events observed one at a time through the session, between batches (no batch row's kinds)
_ONE_AT_A_TIME = (StopAttempt, Retry)


def _events(fleet: Fleet, session_id: str, body: Any) -> dict[str, Any]:
    items = body if isinstance(body, list) else [body]
    if not items:
        raise _BadRequest("no events in the body")
    if len(items) > MAX_EVENTS:
        raise _BadRequest(f"{len(items)} events in one request (at most {MAX_EVENTS})")
    events = []
    for i, item in enumerate(items):
        kind = item.get("type") if isinstance(item, dict) else None
        if isinstance(kind, str) and kind not in SESSION_TYPES:
            why = _NOT_TAKEN.get(kind)
            raise _BadRequest(f"event {i}: " + (
                f"a {kind!r} event is not taken here ({why})" if why else
                f"unknown event type {kind!r}") + f" (this route takes "
                f"{', '.join(SESSION_TYPES)})")
        try:
            event = parse_event(item)
        except InvalidEvent as exc:
            raise _BadRequest(f"event {i}: {exc}") from None
        events.append(event)
    out: list[tuple[int, Decision | Turn]] = []
    run: list[int] = []  # indexes of the events the next batch takes
    for i, event in enumerate(events):
        if not needs_pricing(event) and not isinstance(event, _ONE_AT_A_TIME):
            run.append(i)
            continue
        # a usage the pricing rule prices (marked estimated, or its model unpriced), which a
        # batch row cannot carry, or a stop attempt or retry (no batch row's kinds: charged to
        # the session's task): on its own, through the session, between batches
        _batch(fleet, session_id, events, run, out)
        try:
            decision = observe_event(fleet.session(session_id), event)
        except TripwireError as exc:
            raise _BadRequest(f"event {i}: {exc}", 400, event=i,
                              decisions=[_decision(j, o) for j, o in out]) from None
        if decision is not CONTINUE:
            out.append((i, decision))  # type: ignore[arg-type]
    _batch(fleet, session_id, events, run, out)
    g = fleet.session(session_id)
    return {"session": session_id, "events": len(events),
            "decisions": [_decision(i, o) for i, o in out], "halted": g.halted}


def _batch(fleet: Fleet, session_id: str, events: list[Any], run: list[int],
           out: list[tuple[int, Decision | Turn]]) -> None:
    """The events at ``run`` (request indexes) through ``Fleet.observe_many``; their outcomes
    onto ``out`` by request index."""
    if not run:
        return
    try:
        outcomes = fleet.observe_many([(session_id, events[i]) for i in run])
    except InvalidEvent as exc:
        raise _BadRequest(str(exc)) from None
    except BatchInterrupted as stopped:
        error = stopped.error
        status = 409 if isinstance(error, ResetRefused) else 400
        at = run[stopped.index]
        done = out + [(run[j], o) for j, _, o in stopped.outcomes]
        extra: dict[str, Any] = {"event": at, "decisions": [_decision(i, o) for i, o in done]}
        if isinstance(error, ResetRefused):
            extra["budget_needed_usd"] = round(error.needed_usd, 9)
        raise _BadRequest(f"event {at}: {error}", status, **extra) from None
    out.extend((run[j], o) for j, _, o in outcomes)
    run.clear()


class _Metrics:
    """HTTP request counts by route and status (the fleet's own counters are the rest)."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, int]] = Counter()
        self.events = 0
        self.lock = threading.Lock()

    def count(self, route: str, status: int, events: int = 0) -> None:
        with self.lock:
            self.requests[(route, status)] += 1
            self.events += events

    def render(self, fleet: Fleet) -> str:
        snap = fleet.counters.snapshot()
        out = ["# TYPE tripwire_sessions gauge", f"tripwire_sessions {len(fleet)}",
               "# TYPE tripwire_alerts_total counter"]
        for key, n in snap["alerts"].items():
            signal, severity = key.split("/", 1)
            out.append(f'tripwire_alerts_total{{signal="{signal}",severity="{severity}"}} {n}')
        out.append("# TYPE tripwire_trips_total counter")
        for guardrail, n in snap["trips"].items():
            out.append(f'tripwire_trips_total{{guardrail="{guardrail}"}} {n}')
        out += ["# TYPE tripwire_refused_turns_total counter",
                f"tripwire_refused_turns_total {snap['refused_turns']}",
                "# TYPE tripwire_http_events_total counter"]
        with self.lock:
            out.append(f"tripwire_http_events_total {self.events}")
            out.append("# TYPE tripwire_http_requests_total counter")
            for (route, status), n in sorted(self.requests.items()):
                out.append(f'tripwire_http_requests_total{{route="{route}",code="{status}"}} {n}')
        return "\n".join(out) + "\n"


# what an agent's token (``--agent-token-file``) may do: send its events and read a status;
# never reset, raise or check in (those need the operator's token: 403)
AGENT_ROUTES = frozenset({"events", "guardrails", "metrics"})


def create_app(fleet: Fleet, token: str, agent_token: str | None = None) -> Any:
    """The Starlette application serving ``fleet``; every route but /healthz checks ``token``
    (the operator's); ``agent_token``, when given, is taken on ``AGENT_ROUTES`` only."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    if not token:
        raise ConfigError("the bearer token is empty")
    if agent_token is not None and (not agent_token or agent_token == token):
        raise ConfigError("the agent token must be non-empty and differ from the operator's")
    expected = token.encode()
    expected_agent = agent_token.encode() if agent_token else None
    metrics = _Metrics()

    def credential(request: Request) -> str | None:
        """"operator", "agent" or None: who the bearer token says the caller is."""
        # RFC 9110 §11.1: the scheme is case-insensitive ("bearer", "BEARER"); the token is not
        scheme, _, given = request.headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        raw = given.strip().encode("utf-8", "replace")
        if hmac.compare_digest(raw, expected):
            return "operator"
        if expected_agent is not None and hmac.compare_digest(raw, expected_agent):
            return "agent"
        return None

    async def body_of(request: Request, optional: bool) -> Any:
        # Never hold more than MAX_BODY bytes: a declared length is refused before reading, a
        # streamed body as soon as it passes the bound.
        declared = request.headers.get("content-length", "").strip()
        if declared and (not declared.isdigit() or int(declared) > MAX_BODY):
            raise _BadRequest(f"the body is {declared} bytes (at most {MAX_BODY})", 413)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                raise _BadRequest(f"the body is over {MAX_BODY} bytes", 413)
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw.strip():
            if optional:
                return None
            raise _BadRequest("the body is empty: send JSON")
        try:
            return json.loads(raw)
        except RecursionError:
            raise _BadRequest("the body is not JSON tripwire reads (nested too deeply)") \
                from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise _BadRequest(f"the body is not JSON ({_one_line(str(exc))})") from None

    Handler = Callable[[Request], Awaitable[tuple[Any, int]]]

    def route(name: str, handler: Handler, *, auth: bool = True) -> Callable[..., Any]:
        async def endpoint(request: Request) -> Response:
            who = credential(request) if auth else "operator"
            if who is None:
                metrics.count(name, 401)
                return JSONResponse({"error": "missing or wrong bearer token"}, 401,
                                    headers={"WWW-Authenticate": "Bearer"})
            if who == "agent" and name not in AGENT_ROUTES:
                metrics.count(name, 403)
                return JSONResponse({"error": f"the agent token may not use {name}: "
                                              "it needs the operator's token"}, 403)
            try:
                payload, status = await handler(request)
            except _BadRequest as bad:
                metrics.count(name, bad.status)
                return JSONResponse({"error": _one_line(bad.reason), **bad.extra}, bad.status)
            except TripwireError as exc:  # any other typed refusal: still one line, never a trace
                metrics.count(name, 400)
                return JSONResponse({"error": _one_line(str(exc))}, 400)
            except Exception as exc:  # a fault of tripwire's own: counted, logged, one line
                metrics.count(name, 500)
                LOGGER.exception("tripwire serve: %s %s failed", request.method, request.url.path)
                reason = _one_line(str(exc)) or type(exc).__name__
                return JSONResponse({"error": f"internal error: {reason}"}, 500)
            events = payload.get("events", 0) if isinstance(payload, dict) else 0
            metrics.count(name, status, events if isinstance(events, int) else 0)
            if isinstance(payload, str):
                return PlainTextResponse(payload, status,
                                         media_type="text/plain; version=0.0.4")
            return JSONResponse(payload, status)
        return endpoint

    def session_of(request: Request) -> str:
        try:
            return check_session_id(str(request.path_params["session_id"]))
        except InvalidEvent as exc:
            raise _BadRequest(str(exc)) from None

    async def healthz(request: Request) -> tuple[Any, int]:
        return {"ok": True, "sessions": len(fleet)}, 200

    async def get_metrics(request: Request) -> tuple[Any, int]:
        return metrics.render(fleet), 200

    async def get_guardrails(request: Request) -> tuple[Any, int]:
        sid = session_of(request)
        return await run_in_threadpool(_guardrails, fleet, sid), 200

    async def post_reset(request: Request) -> tuple[Any, int]:
        sid = session_of(request)
        body = await body_of(request, optional=True)
        return await run_in_threadpool(_reset, fleet, sid, body), 200

    async def post_events(request: Request) -> tuple[Any, int]:
        sid = session_of(request)
        body = await body_of(request, optional=False)
        return await run_in_threadpool(_events, fleet, sid, body), 200

    def task_of(request: Request) -> str:
        try:
            return check_session_id(str(request.path_params["task_id"]))
        except InvalidEvent as exc:
            raise _BadRequest(str(exc)) from None

    async def post_budget(request: Request) -> tuple[Any, int]:
        tid = task_of(request)
        body = await body_of(request, optional=False)
        return await run_in_threadpool(_raise, fleet, tid, body), 200

    async def post_check_in(request: Request) -> tuple[Any, int]:
        tid = task_of(request)
        body = await body_of(request, optional=True)
        return await run_in_threadpool(_check_in, fleet, tid, body), 200

    routes = [
        Route("/healthz", route("healthz", healthz, auth=False), methods=["GET"]),
        Route("/metrics", route("metrics", get_metrics), methods=["GET"]),
        Route("/sessions/{session_id}/guardrails", route("guardrails", get_guardrails),
              methods=["GET"]),
        Route("/sessions/{session_id}/guardrails/reset", route("reset", post_reset),
              methods=["POST"]),
        Route("/sessions/{session_id}/events", route("events", post_events), methods=["POST"]),
        Route("/tasks/{task_id}/budget", route("task_budget", post_budget), methods=["POST"]),
        Route("/tasks/{task_id}/check-in", route("task_check_in", post_check_in),
              methods=["POST"]),
    ]

    async def no_route(request: Request, exc: Exception) -> Response:
        """Starlette's 404 and 405, as every other answer: JSON with a one-line error."""
        status = getattr(exc, "status_code", 404)
        metrics.count("unknown", status)
        what = "no such route" if status == 404 else "method not allowed"
        return JSONResponse({"error": f"{what}: {request.method} {request.url.path}"}, status,
                            headers=getattr(exc, "headers", None))

    return Starlette(routes=routes, exception_handlers={404: no_route, 405: no_route})


def run(fleet: Fleet, token: str, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
        announce: Callable[[str], object] | None = None,
        agent_token: str | None = None) -> None:
    """Serve until SIGINT/SIGTERM; then write every row the store has not taken yet. The
    socket is bound before ``announce`` is told its address (``--port 0``: a free port)."""
    import socket

    import uvicorn

    app = create_app(fleet, token, agent_token)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on a connection only when its socket
    # says proto == IPPROTO_TCP, and a socket made with proto 0 (the default) does not. Without
    # it a reused keep-alive connection waits ~40 ms per request (Nagle holding the response's
    # second write until the client's delayed ACK: benchmarks/test_bench_serve.py). Linux also
    # hands the listening socket's TCP_NODELAY to every accepted connection.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror})") from None
    sock.listen(1024)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                           lifespan="off"))
    if announce is not None:
        announce(f"listening on http://{shown}:{bound}")
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal to the handler
    # it found: make that one a no-op, so the rows are flushed and the exit is clean (0).
    import signal

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: None)
    try:
        server.run(sockets=[sock])
    finally:
        # every session's rows, whatever one of them does: a session that cannot flush is
        # said in one line and never keeps the sessions after it from theirs
        for sid in list(fleet):
            try:
                fleet.session(sid).flush()
            except Exception as exc:
                LOGGER.error("[session %s] could not flush its rows at shutdown (%s)", sid,
                             _one_line(str(exc)) or type(exc).__name__)
        sock.close()
