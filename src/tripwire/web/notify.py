"""Notifications: a POST to each operator URL on every halt, task exhaustion and check-in pause,
shared by ``tripwire serve`` and ``tripwire gateway`` (``--notify URL``, repeatable).

The notifier is the fleet's operator callback (``Fleet(on_event=notifier.on_event)``), so it
hears each stop once, where the session decides it, whichever server's path made the decision
(serve's batches, the gateway's exchanges). ``on_event`` only builds a small dict and puts it
on a bounded queue (never waits): a full queue drops the message and counts it. One background
thread drains the queue and posts to every URL with a few attempts and exponential backoff; a
message given up on is counted as dropped, one delivered as sent, each failed attempt
followed by another as a retry
(``tripwire_notifications_sent_total`` / ``tripwire_notifications_dropped_total`` in
``/metrics``). A decision is never delayed by a receiver that is down, slow or failing.

Bodies: ``{"event": "halt"|"exhausted"|"check_in", "session", "task", "guardrail", "reason",
"at"}`` (``at``: ISO 8601 UTC), or with ``fmt="slack"`` a Slack incoming-webhook body
``{"text": "..."}``.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..session.config import NOTIFY_FILE_KEYS
from .operator import Metrics

__all__ = ["Notifier", "check_notify_url", "notifier_for", "attach", "FORMATS"]

LOGGER = logging.getLogger("tripwire")

FORMATS = ("json", "slack")  # cli.usage.add_notify_arguments offers these
SENT, DROPPED, RETRIES = (  # Metrics.extra names: tripwire_<name>_total in /metrics
    "notifications_sent", "notifications_dropped", "notifications_retries")
_CHECK_IN_MARK = "check-in window"  # budgets.caps.exhaustion_reason's words for a pause


def check_notify_url(url: str) -> str:
    """``url`` if it is an http(s) URL with a host, else a ``ConfigError`` (one line)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--notify {url!r}: an http:// or https:// URL with a host")
    return url


def _kind(event: Any) -> str | None:
    """What an operator event notifies: a halt, an exhaustion, a check-in pause, or None."""
    if event.kind == "halt":
        return "halt"
    if event.kind == "cut" and event.guardrail == "budget":
        reason = getattr(event.decision, "reason", "") or ""
        return "check_in" if _CHECK_IN_MARK in reason else "exhausted"
    return None


class Notifier:
    """Posts each notification to ``urls`` from a queue of at most ``queue_size`` messages, each
    tried ``attempts`` times with a backoff of ``backoff`` seconds doubled per attempt."""

    def __init__(self, urls: Sequence[str], fmt: str = "json", *, metrics: Metrics | None = None,
                 queue_size: int = 1000, attempts: int = 4, backoff: float = 0.5,
                 timeout: float = 5.0,
                 task_of: Callable[[str], str | None] | None = None) -> None:
        if fmt not in FORMATS:
            raise ConfigError(f"--notify-format {fmt!r}: one of {', '.join(FORMATS)}")
        if queue_size < 1 or attempts < 1:
            raise ConfigError("a notifier needs a queue of at least 1 and at least 1 attempt")
        self.urls = [check_notify_url(u) for u in urls]
        self.fmt = fmt
        self.metrics = metrics if metrics is not None else Metrics()
        self.metrics.declare(SENT, DROPPED, RETRIES)
        self.attempts, self.backoff, self.timeout = attempts, backoff, timeout
        self.task_of = task_of  # session id -> its task id, looked up off the decision path
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(queue_size)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._closed = False

    # -- the decision side: never waits ---------------------------------------------------------

    def on_event(self, event: Any) -> None:
        """The fleet's operator callback: queue a message for a halt, exhaustion or pause."""
        kind = _kind(event)
        if kind is None or not self.urls or self._closed:
            return
        decision = event.decision
        message = {"event": kind, "session": event.session_id, "task": None,
                   "guardrail": event.guardrail or getattr(decision, "guardrail", None),
                   "reason": getattr(decision, "reason", "") or event.message,
                   "at": datetime.now(timezone.utc).isoformat(timespec="milliseconds")}
        self._ensure_thread()
        try:
            self._queue.put_nowait(message)
        except queue.Full:
            self.metrics.add(DROPPED, len(self.urls))

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._drain, name="tripwire-notify",
                                                daemon=True)
                self._thread.start()

    # -- the background side --------------------------------------------------------------------

    def body(self, message: dict[str, Any]) -> dict[str, Any]:
        if self.fmt == "slack":
            task = f" (task {message['task']})" if message["task"] else ""
            return {"text": f"tripwire {message['event']}: session {message['session']}{task}, "
                            f"{message['guardrail']}: {message['reason']}"}
        return message

    def _drain(self) -> None:
        while True:
            message = self._queue.get()
            if message is None:
                return
            if self.task_of is not None:
                try:
                    message["task"] = self.task_of(message["session"])
                except Exception:  # a task not to be found: the message goes without it
                    message["task"] = None
            data = json.dumps(self.body(message)).encode()
            for url in self.urls:
                self.metrics.add(SENT if self._post(url, data) else DROPPED)

    def _post(self, url: str, data: bytes) -> bool:
        delay = self.backoff
        for attempt in range(1, self.attempts + 1):
            request = urllib.request.Request(url, data, method="POST",
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                    if 200 <= answer.status < 300:
                        return True
            except (urllib.error.URLError, OSError, ValueError) as exc:
                failure = str(getattr(exc, "reason", exc))
            else:
                failure = f"HTTP {answer.status}"
            if attempt == self.attempts:
                LOGGER.warning("tripwire notify: %s gave up after %d attempts (%s)", url,
                               attempt, failure)
                return False
            self.metrics.add(RETRIES)
            time.sleep(delay)
            delay *= 2
        return False

    def close(self, wait: float = 5.0) -> None:
        """Stop taking messages; give the queue up to ``wait`` seconds to drain."""
        self._closed = True
        if self._thread is None:
            return
        try:
            self._queue.put(None, timeout=wait)
        except queue.Full:
            return
        self._thread.join(wait)


def notifier_for(urls: Sequence[str], fmt: str | None = None,
                 section: Any = None) -> Notifier | None:
    """A notifier for the config file's ``[notify]`` (``urls = [...]``, ``format``) and the
    command line's ``urls`` after them, ``fmt`` over the file's format; None without a URL.
    Its task lookup is set by ``attach``."""
    section = {} if section is None else section
    if not isinstance(section, dict) or set(section) - NOTIFY_FILE_KEYS:
        raise ConfigError("[notify] takes urls (a list of http(s) URLs) and format (json or "
                          "slack)")
    listed = section.get("urls", [])
    if not isinstance(listed, list) or not all(isinstance(u, str) for u in listed):
        raise ConfigError("[notify] urls is a list of http(s) URLs")
    every = [*listed, *urls]
    return Notifier(every, fmt or section.get("format", "json")) if every else None


def attach(notifier: Notifier | None, fleet: Any) -> None:
    """Let ``notifier`` name each message's task (looked up on its own thread)."""
    if notifier is None:
        return

    def task_of(session_id: str) -> str | None:
        g = fleet.existing(session_id)
        return None if g is None else str(g.task.task_id)
    notifier.task_of = task_of
