"""``tripwire serve``: a fleet's guardrails over HTTP, for harnesses that are not Python (the
sidecar path) and for operators resetting halted sessions. Needs ``tripwire[serve]``
(Starlette on uvicorn).

Routes (JSON in and out; every route but ``/healthz`` needs ``Authorization: Bearer TOKEN``):

    GET  /                                 the live operator page (no token: it holds no data)
    GET  /healthz                          {"ok": true, "sessions": N}   (no token: for probes)
    GET  /sessions                         a page of sessions: state, spend, budget, last use
    GET  /alerts?after=N                   the operator events after N, as they happen
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
missing or wrong token **401**. Events go through ``Fleet.observe_many`` (in order, detection in
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

import logging
import os
import time
from collections.abc import Callable
from typing import Any

from ..base.decision import CONTINUE, Decision, Turn
from ..errors import (
    BatchInterrupted,
    ConfigError,
    InvalidEvent,
    RaiseRefused,
    ResetRefused,
    TaskEnded,
    TripwireError,
)
from ..fleet.fleet import Fleet
from ..interchange.events import Retry, StopAttempt, parse_event
from ..session.dispatch import needs_pricing, observe_event
from ..web.console import EventFeed, console_routes
from ..web.listen import serve_app
from ..web.notify import Notifier
from ..web.operator import MAX_BODY, Api, HttpError, one_line, operator_routes, path_id

__all__ = ["create_app", "read_token", "TOKEN_ENV", "DEFAULT_HOST", "DEFAULT_PORT", "MAX_BODY"]

LOGGER = logging.getLogger("tripwire")

TOKEN_ENV = "TRIPWIRE_SERVE_TOKEN"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8737
MAX_EVENTS = 10_000  # events in one request


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


def _decision(index: int, outcome: Decision | Turn) -> dict[str, Any]:
    if isinstance(outcome, Turn):
        return {"event": index, "action": "continue", "feedback": outcome.feedback,
                "compact": outcome.compact}
    return {"event": index, **outcome.to_dict(),
            "alerts": [{"signal": a.signal, "severity": str(a.severity)} for a in outcome.alerts]}


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
    raise HttpError(f"no task {task_id!r}", 404)


def _raise(fleet: Fleet, task_id: str, body: Any) -> dict[str, Any]:
    from ..budgets.caps import CONSUMED

    raises = body.get("raise") if isinstance(body, dict) and set(body) == {"raise"} else None
    if not isinstance(raises, dict) or not raises:
        raise HttpError('a raise body is {"raise": {"<counter>": <amount>, ...}}')
    for counter, by in raises.items():
        if counter not in CONSUMED:
            raise HttpError(f"cannot raise {counter!r}: one of {', '.join(CONSUMED)}")
        if isinstance(by, bool) or not isinstance(by, int | float):
            raise HttpError(f"a raise of {counter} is a number, not {by!r}")
    task = _task_of(fleet, task_id)
    was = task.outcome
    caps: dict[str, Any] = {}
    try:
        for counter, by in raises.items():
            caps[counter] = task.raise_cap(counter, by, who="serve")
    except RaiseRefused as refused:
        raise HttpError(str(refused), 409, task=refused.task_id, counter=refused.counter,
                          raise_needed=refused.raise_needed, used=refused.used,
                          cap=refused.cap, raised=caps) from None
    except TaskEnded as ended:
        raise HttpError(f"task {task_id} has ended ({ended.outcome}): nothing to raise",
                          409) from None
    except ConfigError as bad:
        raise HttpError(str(bad)) from None
    return {"task": task.task_id, "caps": caps, "remaining": task.remaining(),
            "resumed": str(was) if was is not None and task.outcome is None else None,
            "outcome": None if task.outcome is None else str(task.outcome)}


def _check_in(fleet: Fleet, task_id: str, body: Any) -> dict[str, Any]:
    if body not in (None, {}):
        raise HttpError("a check-in takes no body")
    task = _task_of(fleet, task_id)
    was = task.outcome
    try:
        opened = task.check_in(who="serve")
    except TaskEnded as ended:
        raise HttpError(f"task {task_id} has ended ({ended.outcome})", 409) from None
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
        raise HttpError("no events in the body")
    if len(items) > MAX_EVENTS:
        raise HttpError(f"{len(items)} events in one request (at most {MAX_EVENTS})")
    events = []
    for i, item in enumerate(items):
        kind = item.get("type") if isinstance(item, dict) else None
        if isinstance(kind, str) and kind not in SESSION_TYPES:
            why = _NOT_TAKEN.get(kind)
            raise HttpError(f"event {i}: " + (
                f"a {kind!r} event is not taken here ({why})" if why else
                f"unknown event type {kind!r}") + f" (this route takes "
                f"{', '.join(SESSION_TYPES)})")
        try:
            event = parse_event(item)
        except InvalidEvent as exc:
            raise HttpError(f"event {i}: {exc}") from None
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
            raise HttpError(f"event {i}: {exc}", 400, event=i,
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
        raise HttpError(str(exc)) from None
    except BatchInterrupted as stopped:
        error = stopped.error
        status = 409 if isinstance(error, ResetRefused) else 400
        at = run[stopped.index]
        done = out + [(run[j], o) for j, _, o in stopped.outcomes]
        extra: dict[str, Any] = {"event": at, "decisions": [_decision(i, o) for i, o in done]}
        if isinstance(error, ResetRefused):
            extra["budget_needed_usd"] = round(error.needed_usd, 9)
        raise HttpError(f"event {at}: {error}", status, **extra) from None
    out.extend((run[j], o) for j, _, o in outcomes)
    run.clear()


def _decided(api: Api, fleet: Fleet, session_id: str, body: Any) -> dict[str, Any]:
    """``_events``, its time and each event's decision counted in ``/metrics``."""
    started = time.perf_counter()
    answer = _events(fleet, session_id, body)
    stops = [d["action"] for d in answer["decisions"] if "action" in d]
    api.metrics.decided("events", time.perf_counter() - started,
                        [*stops, *[CONTINUE.action] * (answer["events"] - len(stops))])
    return answer


def create_app(fleet: Fleet, token: str, notifier: Notifier | None = None,
               agent_token: str | None = None, feed: EventFeed | None = None) -> Any:
    """The Starlette application serving ``fleet``; every route but /healthz and the page
    checks ``token``. The operator routes and the page are ``web``'s (the gateway mounts the
    same ones). A ``notifier`` counts into this app's ``/metrics``; ``feed`` (both the fleet's
    ``on_event``, through ``fanout``) is what the page shows as it happens."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.routing import Route

    api = Api(token, notifier.metrics if notifier is not None else None, name="serve",
              agent_token=agent_token)

    async def post_events(request: Any) -> tuple[Any, int]:
        sid = path_id(request)
        body = await api.body_of(request, optional=False)
        return await run_in_threadpool(_decided, api, fleet, sid, body), 200

    async def post_budget(request: Any) -> tuple[Any, int]:
        tid = path_id(request, "task_id")
        body = await api.body_of(request, optional=False)
        return await run_in_threadpool(_raise, fleet, tid, body), 200

    async def post_check_in(request: Any) -> tuple[Any, int]:
        tid = path_id(request, "task_id")
        body = await api.body_of(request, optional=True)
        return await run_in_threadpool(_check_in, fleet, tid, body), 200

    routes = [
        *operator_routes(api, fleet),
        *console_routes(api, fleet, feed),
        Route("/sessions/{session_id}/events", api.route("events", post_events),
              methods=["POST"]),
        Route("/tasks/{task_id}/budget", api.route("task_budget", post_budget),
              methods=["POST"]),
        Route("/tasks/{task_id}/check-in", api.route("task_check_in", post_check_in),
              methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers=api.exception_handlers())


def run(fleet: Fleet, token: str, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
        announce: Callable[[str], object] | None = None,
        notifier: Notifier | None = None, agent_token: str | None = None,
        feed: EventFeed | None = None) -> None:
    """Serve until SIGINT/SIGTERM; then write every row the store has not taken yet. The
    socket is bound before ``announce`` is told its address (``--port 0``: a free port)."""
    app = create_app(fleet, token, notifier, agent_token, feed)
    try:
        serve_app(app, host, port, announce)
    finally:
        if notifier is not None:
            notifier.close()
        # every session's rows, whatever one of them does: a session that cannot flush is
        # said in one line and never keeps the sessions after it from theirs
        for sid in list(fleet):
            try:
                fleet.session(sid).flush()
            except Exception as exc:
                LOGGER.error("[session %s] could not flush its rows at shutdown (%s)", sid,
                             one_line(str(exc)) or type(exc).__name__)
