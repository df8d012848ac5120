"""Calling the host's supervisor with a review, at most ``review_timeout_s``, sync or async,
and parsing its answer into a ``SupervisorDecision``. Whatever goes wrong — the supervisor
raises, outlives the timeout or answers something malformed — is one ``ReviewFailed``, in the
log's words; what a failed review means for the task is ``Supervision``'s.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..errors import MalformedDecision
from .decision import SupervisorDecision, parse_decision
from .review import Review

__all__ = ["Supervisor", "ReviewFailed", "ask_supervisor", "ask_supervisor_async"]

#: The host's supervisor: a callable taking a ``Review`` and returning a decision, a mapping or
#: JSON text matching ``DECISION_SCHEMA``, or an awaitable of one.
Supervisor = Callable[
    [Review], SupervisorDecision | Mapping[str, Any] | str | bytes | Awaitable[Any]]


class ReviewFailed(Exception):
    """One failed review: what happened, in the log's words."""


def ask_supervisor(supervisor: Supervisor, review: Review, timeout_s: float,
                   thread_name: str) -> SupervisorDecision:
    """The supervisor's decision, asked on a worker thread (``thread_name``) and waited for at
    most ``timeout_s`` (a supervisor that hangs is abandoned there: a thread cannot be killed).
    An async supervisor runs in its own event loop on that thread."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            result = supervisor(review)
            if inspect.isawaitable(result):
                result = asyncio.run(_awaited(result))
            box["value"] = result
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=run, name=thread_name, daemon=True)
    thread.start()
    if not done.wait(timeout_s):
        raise ReviewFailed(f"timed out after {timeout_s:g} s")
    if "error" in box:
        exc = box["error"]
        raise ReviewFailed(f"raised {type(exc).__name__}: {exc}")
    return _parsed(box["value"])


async def ask_supervisor_async(supervisor: Supervisor, review: Review,
                               timeout_s: float) -> SupervisorDecision:
    """``ask_supervisor`` for an event loop: an async supervisor is awaited, a sync one runs in
    a worker thread; the timeout holds either way."""

    async def run() -> Any:
        if _is_async_callable(supervisor):
            result = supervisor(review)
        else:
            result = await asyncio.to_thread(supervisor, review)
        if inspect.isawaitable(result):
            result = await result
        return result

    try:
        answer = await asyncio.wait_for(run(), timeout_s)
    except asyncio.TimeoutError:
        raise ReviewFailed(f"timed out after {timeout_s:g} s") from None
    except Exception as exc:
        raise ReviewFailed(f"raised {type(exc).__name__}: {exc}") from None
    return _parsed(answer)


def _parsed(answer: Any) -> SupervisorDecision:
    try:
        return parse_decision(answer)
    except MalformedDecision as exc:
        raise ReviewFailed(f"returned a malformed decision: {exc}") from None


def _is_async_callable(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))  # noqa: B004 - an object whose __call__ is async


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value
