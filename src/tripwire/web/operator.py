"""The operator surface over a ``Fleet``, shared by ``tripwire serve`` and ``tripwire gateway``
(Starlette, imported when an application is built):

    GET  /healthz                          {"ok": true, "sessions": N}   (no token: for probes)
    GET  /metrics                          Prometheus text: alerts, trips, refused turns, HTTP
    GET  /sessions/{id}/guardrails         what is armed, what tripped and why, budget needed
    POST /sessions/{id}/guardrails/reset   body optional: {"guardrail", "additional_budget_usd"}

``Api`` is the plumbing every route of either server goes through: the bearer token (RFC 9110:
the scheme case-insensitive, the token compared in constant time), a body read to at most
``MAX_BODY`` bytes (a declared length refused before reading: 413), typed refusals as JSON
``{"error": "<one line>"}`` with their status, a fault of tripwire's own as a logged 500, and
every answer counted by route and status for ``/metrics``.
"""

from __future__ import annotations

import bisect
import hmac
import json
import logging
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ..base.money import parse_dollars
from ..base.validate import check_session_id
from ..errors import InvalidEvent, InvalidReset, ResetRefused, TripwireError
from ..fleet.fleet import Fleet
from .errors import HttpError

__all__ = ["HttpError", "Metrics", "Api", "operator_routes", "one_line", "MAX_BODY",
           "session_status", "session_reset"]

LOGGER = logging.getLogger("tripwire")

MAX_BODY = 1 << 20  # bytes of one request body (serve's; the gateway sets its own)
_RESET_KEYS = frozenset({"guardrail", "additional_budget_usd"})


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def known(fleet: Fleet, session_id: str) -> Any:
    """The session's guardrails; 404 for a session the fleet does not know (neither in memory
    nor in its store), which a status or a reset must not create (``tripwire status|reset``
    refuse it with exit 2 the same way)."""
    g = fleet.existing(session_id)
    if g is None:
        raise HttpError(f"no session {session_id!r}", 404)
    return g


def session_status(fleet: Fleet, session_id: str) -> dict[str, Any]:
    s = known(fleet, session_id).status()
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


def session_reset(fleet: Fleet, session_id: str, body: Any) -> dict[str, Any]:
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise HttpError(f"a reset body is a JSON object, not {type(body).__name__}")
    unknown = sorted(set(body) - _RESET_KEYS)
    if unknown:
        raise HttpError(f"unknown reset field(s) {', '.join(unknown)} (known: guardrail, "
                        "additional_budget_usd)")
    guardrail = body.get("guardrail", "all")
    budget = body.get("additional_budget_usd", 0.0)
    if not isinstance(guardrail, str):
        raise HttpError("guardrail must be a string: watchdog, cost_ceiling or all")
    if isinstance(budget, bool) or not isinstance(budget, int | float):
        raise HttpError("additional_budget_usd must be a number of US dollars")
    g = known(fleet, session_id)
    try:
        outcome = g.reset(guardrail, parse_dollars(budget, "additional_budget_usd",
                                                   error=InvalidReset))
    except ResetRefused as refused:
        raise HttpError(refused.reason, 409, budget_needed_usd=round(refused.needed_usd, 9),
                        spent_usd=round(refused.spent_usd, 9),
                        ceiling_usd=round(refused.ceiling_usd, 9)) from None
    except InvalidReset as invalid:
        raise HttpError(str(invalid)) from None
    return {"session": session_id, "cleared": list(outcome.cleared),
            "still_halted_by": list(outcome.still_halted_by),
            "max_session_cost_usd": outcome.max_session_cost_usd,
            "message": outcome.message}


#: the decision-latency histogram's upper bounds, in seconds (a decision takes microseconds to
#: a few milliseconds; the top buckets catch a store that stalls)
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                   0.25, 0.5, 1.0, 2.5)


def _label(value: object) -> str:
    """A label value in the exposition format: backslash, quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: object) -> str:
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in labels.items()) + "}"


class Metrics:
    """HTTP request counts by route and status, decision latency and decisions (the fleet's own
    counters are the rest), and a server's own counters (``extra``: name -> value, e.g. the
    gateway's upstream faults). ``render`` writes the Prometheus text exposition format
    (docs/fleet.md has the table; docs/dependencies.md why it is written here, not by
    prometheus-client)."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, int]] = Counter()
        self.events = 0
        self.extra: Counter[str] = Counter()
        self.decisions: Counter[str] = Counter()
        # per route: a count per bucket (not cumulative), the sum and the count of seconds
        self.latency: dict[str, tuple[list[int], list[float]]] = {}
        self.feed: Any = None  # the page's EventFeed (web.console): each session's alerts
        self.lock = threading.Lock()

    def count(self, route: str, status: int, events: int = 0) -> None:
        with self.lock:
            self.requests[(route, status)] += 1
            self.events += events

    def add(self, name: str, n: int = 1) -> None:
        with self.lock:
            self.extra[name] += n

    def declare(self, *names: str) -> None:
        """Export the counters ``names`` from the start, at 0 (a rate needs the first sample)."""
        with self.lock:
            for name in names:
                self.extra[name] += 0

    def decided(self, route: str, seconds: float, actions: Iterable[str] = ()) -> None:
        """One request's decisions took ``seconds``; ``actions``: each decision's action."""
        with self.lock:
            buckets, total = self.latency.setdefault(
                route, ([0] * (len(LATENCY_BUCKETS) + 1), [0.0]))
            buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
            total[0] += seconds
            self.decisions.update(actions)

    def render(self, fleet: Fleet) -> str:
        from .console import STATES, glance

        snap = fleet.counters.snapshot()
        states = dict.fromkeys(STATES, 0)
        spent = 0.0
        for _, _, state, usd in glance(fleet, self.feed):
            states[state] += 1
            spent += usd
        out: list[str] = []

        def family(name: str, kind: str, text: str) -> None:
            out.extend((f"# HELP {name} {text}", f"# TYPE {name} {kind}"))

        family("tripwire_sessions", "gauge", "Sessions in memory.")
        out.append(f"tripwire_sessions {len(fleet)}")
        family("tripwire_sessions_by_state", "gauge",
               "Sessions in memory by state (watching, warned, halted, exhausted, paused).")
        out += [f"tripwire_sessions_by_state{_labels(state=s)} {n}" for s, n in states.items()]
        family("tripwire_spent_usd", "gauge", "US dollars spent by the sessions in memory.")
        out.append(f"tripwire_spent_usd {round(spent, 9)!r}")
        family("tripwire_alerts_total", "counter", "Alerts raised, by signal and severity.")
        for key, n in snap["alerts"].items():
            signal, severity = key.split("/", 1)
            out.append(f"tripwire_alerts_total{_labels(signal=signal, severity=severity)} {n}")
        family("tripwire_trips_total", "counter", "Guardrail trips, by guardrail.")
        for guardrail, n in snap["trips"].items():
            out.append(f"tripwire_trips_total{_labels(guardrail=guardrail)} {n}")
        family("tripwire_refused_turns_total", "counter", "Turns refused at their start.")
        out.append(f"tripwire_refused_turns_total {snap['refused_turns']}")
        family("tripwire_callback_errors_total", "counter",
               "Exceptions raised by the operator callback.")
        out.append(f"tripwire_callback_errors_total {snap['callback_errors']}")
        with self.lock:
            family("tripwire_http_events_total", "counter", "Events received over HTTP.")
            out.append(f"tripwire_http_events_total {self.events}")
            family("tripwire_http_requests_total", "counter", "HTTP answers, by route and code.")
            for (route, code), n in sorted(self.requests.items()):
                out.append(f"tripwire_http_requests_total{_labels(route=route, code=code)} {n}")
            family("tripwire_decisions_total", "counter",
                   "Decisions on events received over HTTP, by decision.")
            for action, n in sorted(self.decisions.items()):
                out.append(f"tripwire_decisions_total{_labels(decision=action)} {n}")
            family("tripwire_decision_seconds", "histogram",
                   "Seconds to decide one request's events, by route.")
            for route, (buckets, total) in sorted(self.latency.items()):
                running = 0
                for bound, n in zip((*LATENCY_BUCKETS, "+Inf"), buckets, strict=True):
                    running += n
                    out.append(f"tripwire_decision_seconds_bucket{_labels(route=route, le=bound)}"
                               f" {running}")
                out.append(f"tripwire_decision_seconds_sum{_labels(route=route)} {total[0]!r}")
                out.append(f"tripwire_decision_seconds_count{_labels(route=route)} {running}")
            for name, n in sorted(self.extra.items()):
                family(f"tripwire_{name}_total", "counter", EXTRA_HELP.get(name, name + "."))
                out.append(f"tripwire_{name}_total {n}")
        return "\n".join(out) + "\n"


#: the HELP text of a server's own counters (``Metrics.add``'s names)
EXTRA_HELP = {
    "gateway_upstream_faults": "Upstream requests of the gateway that failed or timed out.",
    "notifications_sent": "Notifications delivered to a --notify URL.",
    "notifications_dropped": "Notifications given up on, or dropped past the queue's bound.",
    "notifications_retries": "Notification attempts that failed and were tried again.",
}


Handler = Callable[[Any], Awaitable[tuple[Any, int]]]


# what an agent's token may do: send its events, read a status, the sessions, the alerts and
# the metrics (the page, read-only)
AGENT_ROUTES = frozenset({"events", "guardrails", "metrics", "sessions", "alerts"})


class Api:
    """The plumbing of a server's routes: its token, its metrics, its body bound."""

    def __init__(self, token: str, metrics: Metrics | None = None, max_body: int = MAX_BODY,
                 name: str = "serve", agent_token: str | None = None):
        from ..errors import ConfigError

        if not token:
            raise ConfigError("the bearer token is empty")
        if agent_token is not None and (not agent_token or agent_token == token):
            raise ConfigError("the agent token must be non-empty and differ from the operator's")
        self.expected = token.encode()
        # an agent's token (serve --agent-token-file): its events and a status, never a reset,
        # a raise or a check-in, so the agent's own credential cannot clear its halt (403)
        self.expected_agent = agent_token.encode() if agent_token else None
        self.metrics = metrics or Metrics()
        self.max_body = max_body
        self.name = name

    def credential(self, request: Any) -> str | None:
        """"operator", "agent" or None: who the bearer token says the caller is (RFC 9110: the
        scheme case-insensitive; tokens compared in constant time)."""
        scheme, _, given = request.headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        raw = given.strip().encode("utf-8", "replace")
        if hmac.compare_digest(raw, self.expected):
            return "operator"
        if self.expected_agent is not None and hmac.compare_digest(raw, self.expected_agent):
            return "agent"
        return None

    def authorized(self, request: Any) -> bool:
        return self.credential(request) == "operator"

    async def raw_body(self, request: Any, limit: int | None = None) -> bytes:
        """The body, never more than ``limit`` (``max_body``) bytes held: a declared length is
        refused before reading, a streamed body as soon as it passes the bound (413)."""
        limit = self.max_body if limit is None else limit
        declared = request.headers.get("content-length", "").strip()
        if declared and (not declared.isdigit() or int(declared) > limit):
            raise HttpError(f"the body is {declared} bytes (at most {limit})", 413)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise HttpError(f"the body is over {limit} bytes", 413)
            chunks.append(chunk)
        return b"".join(chunks)

    async def body_of(self, request: Any, optional: bool) -> Any:
        raw = await self.raw_body(request)
        if not raw.strip():
            if optional:
                return None
            raise HttpError("the body is empty: send JSON")
        try:
            return json.loads(raw)
        except RecursionError:
            raise HttpError("the body is not JSON tripwire reads (nested too deeply)") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise HttpError(f"the body is not JSON ({one_line(str(exc))})") from None

    def route(self, name: str, handler: Handler, *, auth: bool = True) -> Callable[..., Any]:
        from starlette.responses import JSONResponse, PlainTextResponse, Response

        metrics = self.metrics

        async def endpoint(request: Any) -> Response:
            who = self.credential(request) if auth else "operator"
            if who is None:
                metrics.count(name, 401)
                return JSONResponse({"error": "missing or wrong bearer token"}, 401,
                                    headers={"WWW-Authenticate": "Bearer"})
            if who == "agent" and name not in AGENT_ROUTES:
                metrics.count(name, 403)
                return JSONResponse({"error": f"the agent token may not use {name}: it needs "
                                              "the operator's token"}, 403)
            try:
                payload, status = await handler(request)
            except HttpError as bad:
                metrics.count(name, bad.status)
                return JSONResponse({"error": one_line(bad.reason), **bad.extra}, bad.status)
            except TripwireError as exc:  # any other typed refusal: still one line, never a trace
                metrics.count(name, 400)
                return JSONResponse({"error": one_line(str(exc))}, 400)
            except Exception as exc:  # a fault of tripwire's own: counted, logged, one line
                metrics.count(name, 500)
                LOGGER.exception("tripwire %s: %s %s failed", self.name, request.method,
                                 request.url.path)
                reason = one_line(str(exc)) or type(exc).__name__
                return JSONResponse({"error": f"internal error: {reason}"}, 500)
            events = payload.get("events", 0) if isinstance(payload, dict) else 0
            metrics.count(name, status, events if isinstance(events, int) else 0)
            if isinstance(payload, str):
                return PlainTextResponse(payload, status,
                                         media_type="text/plain; version=0.0.4")
            return JSONResponse(payload, status)
        return endpoint

    def exception_handlers(self) -> dict[int, Any]:
        """Starlette's 404 and 405, as every other answer: JSON with a one-line error."""
        from starlette.responses import JSONResponse

        metrics = self.metrics

        async def no_route(request: Any, exc: Exception) -> Any:
            status = getattr(exc, "status_code", 404)
            metrics.count("unknown", status)
            what = "no such route" if status == 404 else "method not allowed"
            return JSONResponse({"error": f"{what}: {request.method} {request.url.path}"},
                                status, headers=getattr(exc, "headers", None))
        return {404: no_route, 405: no_route}


def path_id(request: Any, key: str = "session_id") -> str:
    try:
        return check_session_id(str(request.path_params[key]))
    except InvalidEvent as exc:
        raise HttpError(str(exc)) from None


def operator_routes(api: Api, fleet: Fleet, prefix: str = "") -> list[Any]:
    """The operator routes over ``fleet`` (the module docstring), under ``prefix``."""
    from starlette.concurrency import run_in_threadpool
    from starlette.routing import Route

    async def healthz(request: Any) -> tuple[Any, int]:
        return {"ok": True, "sessions": len(fleet)}, 200

    async def get_metrics(request: Any) -> tuple[Any, int]:
        return api.metrics.render(fleet), 200

    async def get_guardrails(request: Any) -> tuple[Any, int]:
        sid = path_id(request)
        return await run_in_threadpool(session_status, fleet, sid), 200

    async def post_reset(request: Any) -> tuple[Any, int]:
        sid = path_id(request)
        body = await api.body_of(request, optional=True)
        return await run_in_threadpool(session_reset, fleet, sid, body), 200

    return [
        Route(f"{prefix}/healthz", api.route("healthz", healthz, auth=False), methods=["GET"]),
        Route(f"{prefix}/metrics", api.route("metrics", get_metrics), methods=["GET"]),
        Route(f"{prefix}/sessions/{{session_id}}/guardrails",
              api.route("guardrails", get_guardrails), methods=["GET"]),
        Route(f"{prefix}/sessions/{{session_id}}/guardrails/reset",
              api.route("reset", post_reset), methods=["POST"]),
    ]
