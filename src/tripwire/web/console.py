"""The live operator page and the routes it reads, shared by ``tripwire serve`` (at ``/``) and
``tripwire gateway`` (at ``/``, its API under ``/tripwire``):

    GET  /                  the page (``console.html``: one file, no external asset)
    GET  /sessions          the sessions in memory, one page of them: ``state``, ``q`` (a
                            substring of the id), ``sort`` (id, spend, last_active, state),
                            ``order`` (asc, desc), ``offset``, ``limit`` (at most 500)
    GET  /alerts?after=N    the operator events after sequence number N (a bounded ring)

A session's state is one of ``STATES``, decided in ``session_state`` (the page and the
``tripwire_sessions_by_state`` gauge both read it): halted (a guardrail holds it), exhausted (its
task ran out of a cap), paused (its task reached a check-in window: an operator checks in),
warned (an alert was raised, nothing stopped), watching (none of those).

The page itself needs no token (it holds no data); every route it reads needs one, as the rest
of the API: the operator's token reads and acts (reset, raise, check in), the agent's
events-only token (``serve --agent-token-file``) reads only, and its actions are refused (403).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import resources
from typing import Any

from ..budgets.caps import CHECKIN
from ..budgets.outcomes import EXHAUSTED
from ..fleet.fleet import Fleet

__all__ = ["STATES", "EventFeed", "fanout", "session_state", "session_spent", "glance",
           "session_row", "sessions_page",
           "page_html", "console_routes", "MAX_PAGE"]

STATES = ("watching", "warned", "halted", "exhausted", "paused")
SORTS = ("id", "spend", "last_active", "state")
MAX_PAGE = 500  # sessions in one answer of GET /sessions
FEED_SIZE = 1000  # operator events the feed keeps
MAX_ALERTED = 100_000  # sessions whose alert count the feed keeps (each a few dozen bytes)
_FEED_KINDS = frozenset({"alert", "halt", "cut", "trip", "reset", "reset_refused",
                         "refused_turn"})


def session_state(g: Any, alerts: int) -> str:
    """The state of one session's ``Guardrails`` (one of ``STATES``), given the alerts it
    raised since its last reset (``EventFeed.alerts``)."""
    if g.halted:
        return "halted"
    outcome = g.task.outcome
    if outcome is not None and outcome.kind == EXHAUSTED:
        return "paused" if (outcome.counter or "").startswith(CHECKIN) else "exhausted"
    return "warned" if alerts else "watching"


def session_spent(g: Any) -> float:
    """The session's spend in dollars: the figure ``status().spent_usd`` reads, without the
    rest of a status (a fifth of its cost: what a fleet-wide sort or a scrape needs)."""
    return float(g.spent_usd)


def glance(fleet: Fleet, feed: EventFeed | None) -> list[tuple[str, Any, str, float]]:
    """Every session in memory as (id, guardrails, state, spend): what filtering, sorting and
    the state gauge need, read once per session. Listing never restores a session."""
    out = []
    for sid in list(fleet):
        g = fleet.in_memory(sid)  # never restored (Fleet.existing would)
        if g is None:
            continue
        out.append((sid, g, session_state(g, 0 if feed is None else feed.alerts(sid)),
                    session_spent(g)))
    return out


def session_row(session_id: str, g: Any, state: str, now: float,
                alerts: int) -> dict[str, Any]:
    """What the page shows of one session (``now``: ``time.monotonic()``)."""
    s = g.status()
    task = g.task
    outcome = task.outcome
    reason = " ".join(r for r in (s.watchdog_reason, s.cost_reason) if r)
    if not reason and outcome is not None:
        reason = outcome.reason
    cap = task.cap("usd")
    return {
        "session": session_id,
        "state": state,
        "halted_by": list(s.halted_by),
        "reason": reason,
        "alerts": alerts,
        "spent_usd": round(s.spent_usd, 9),
        "max_session_cost_usd": round(s.max_session_cost_usd, 9),
        "task": str(task.task_id),
        "task_usd_used": round(task.used("usd"), 9),
        "task_usd_cap": None if cap is None else round(cap, 9),
        "task_outcome": None if outcome is None else str(outcome),
        "idle_s": round(max(0.0, now - g.last_used), 3),
    }


def _int(params: Any, key: str, default: int, low: int, high: int) -> int:
    from .errors import HttpError

    raw = params.get(key)
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        raise HttpError(f"{key} must be an integer from {low} to {high}, not {raw!r}")
    return int(raw)


def sessions_page(fleet: Fleet, params: Any, feed: EventFeed | None = None) -> dict[str, Any]:
    """One page of the fleet's sessions in memory, filtered and sorted on the server (so a
    fleet of thousands is one small answer), with the count of every state."""
    from .errors import HttpError

    state = params.get("state") or None
    if state is not None and state not in STATES:
        raise HttpError(f"state must be one of {', '.join(STATES)}, not {state!r}")
    sort = params.get("sort") or "last_active"
    if sort not in SORTS:
        raise HttpError(f"sort must be one of {', '.join(SORTS)}, not {sort!r}")
    order = params.get("order") or ("asc" if sort in ("id", "last_active") else "desc")
    if order not in ("asc", "desc"):
        raise HttpError(f"order must be asc or desc, not {order!r}")
    offset = _int(params, "offset", 0, 0, 10**9)
    limit = _int(params, "limit", 50, 1, MAX_PAGE)
    needle = params.get("q") or ""
    now = time.monotonic()
    counts = dict.fromkeys(STATES, 0)
    chosen = []
    for sid, g, st, spent in glance(fleet, feed):
        counts[st] += 1
        if (state is None or st == state) and needle in sid:
            chosen.append((sid, g, st, spent, max(0.0, now - g.last_used)))
    key: Callable[[tuple[str, Any, str, float, float]], Any] = {
        "id": lambda r: r[0],
        "spend": lambda r: (r[3], r[0]),
        "last_active": lambda r: (r[4], r[0]),
        "state": lambda r: (STATES.index(r[2]), r[0]),
    }[sort]
    chosen.sort(key=key, reverse=order == "desc")
    page = [session_row(sid, g, st, now, 0 if feed is None else feed.alerts(sid))
            for sid, g, st, _, _ in chosen[offset:offset + limit]]
    return {"total": len(chosen), "offset": offset, "limit": limit, "counts": counts,
            "sessions": page}


class EventFeed:
    """The operator events the page shows as they happen: a ring of the last ``size``, each
    with a sequence number, so a poll asks for those after the last one it saw. ``on_event``
    is a fleet's operator callback (never waits long: one lock, one append)."""

    def __init__(self, size: int = FEED_SIZE) -> None:
        self._ring: deque[dict[str, Any]] = deque(maxlen=size)
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        # alerts per session since its last reset (a fleet's counters are the fleet's, not
        # a session's): what makes a session "warned"
        self._alerts: dict[str, int] = {}

    def alerts(self, session_id: str) -> int:
        """The alerts session ``session_id`` raised since its last reset."""
        return self._alerts.get(session_id, 0)

    def on_event(self, event: Any) -> None:
        if event.kind not in _FEED_KINDS:
            return
        if event.kind == "alert":
            with self._lock:
                self._alerts[event.session_id] = self._alerts.get(event.session_id, 0) + 1
                if len(self._alerts) > MAX_ALERTED:  # bounded: the longest-known forgotten
                    del self._alerts[next(iter(self._alerts))]
        elif event.kind == "reset":
            with self._lock:
                self._alerts.pop(event.session_id, None)
        alert = event.alert
        item = {"kind": event.kind, "session": event.session_id,
                "guardrail": event.guardrail,
                "signal": None if alert is None else alert.signal,
                "severity": None if alert is None else str(alert.severity),
                "message": event.message,
                "at": datetime.now(timezone.utc).isoformat(timespec="milliseconds")}
        with self._lock:
            item["seq"] = next(self._seq)
            self._ring.append(item)

    def after(self, seq: int, limit: int = 200) -> dict[str, Any]:
        with self._lock:
            items = [e for e in self._ring if e["seq"] > seq]
            last = self._ring[-1]["seq"] if self._ring else 0
        return {"last": last, "events": items[-limit:]}


def fanout(*callbacks: Callable[[Any], object] | None) -> Callable[[Any], None]:
    """One operator callback calling each of ``callbacks`` (None ones left out) in order."""
    chosen = [c for c in callbacks if c is not None]

    def on_event(event: Any) -> None:
        for callback in chosen:
            callback(event)
    return on_event


_PAGE = "console.html"
_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


def page_html(api_base: str = "") -> tuple[str, str]:
    """The page, with the API's base path in it, and its Content-Security-Policy (the inline
    script allowed by its hash, no other origin)."""
    text = resources.files(__package__).joinpath(_PAGE).read_text(encoding="utf-8")
    text = text.replace('data-api=""', f'data-api="{api_base}"', 1)
    script = _SCRIPT.search(text)
    assert script is not None, "console.html has its script inline"
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    csp = (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
           "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
           "frame-ancestors 'none'")
    return text, csp


def console_routes(api: Any, fleet: Fleet, feed: EventFeed | None, prefix: str = "") -> list[Any]:
    """The page at ``/`` (its API under ``prefix``) and the two routes it reads."""
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    html, csp = page_html(prefix)
    api.metrics.feed = feed  # its per-session alerts: the state gauge's "warned"

    async def page(request: Any) -> Any:
        api.metrics.count("page", 200)
        return HTMLResponse(html, headers={"Content-Security-Policy": csp,
                                           "Cache-Control": "no-store",
                                           "X-Content-Type-Options": "nosniff"})

    async def get_sessions(request: Any) -> tuple[Any, int]:
        return await run_in_threadpool(sessions_page, fleet, request.query_params, feed), 200

    async def get_alerts(request: Any) -> tuple[Any, int]:
        after = _int(request.query_params, "after", 0, 0, 10**18)
        if feed is None:
            return {"last": 0, "events": [], "live": False}, 200
        return {**feed.after(after), "live": True}, 200

    return [
        Route("/", page, methods=["GET"]),
        Route(f"{prefix}/sessions", api.route("sessions", get_sessions), methods=["GET"]),
        Route(f"{prefix}/alerts", api.route("alerts", get_alerts), methods=["GET"]),
    ]
