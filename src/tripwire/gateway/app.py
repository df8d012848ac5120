"""The gateway's HTTP application: the model APIs' routes, relayed to their upstreams through
a session's guardrails (``exchange.Exchange``), and the operator routes (``web.operator``)
under ``/tripwire``.

Routes:

    POST /v1/messages                      Anthropic Messages (streaming and not)
    POST /v1/messages/count_tokens         passed through (no model call, nothing observed)
    POST /v1/chat/completions              OpenAI Chat Completions (streaming and not)
    POST /v1/responses                     OpenAI Responses (streaming and not)
    POST /v1beta/models/{model}:generateContent | :streamGenerateContent   Gemini
    GET  /v1/models, /v1/models/{id}       passed through (a listing: no model call)
    /tripwire/healthz, /tripwire/metrics, /tripwire/sessions/{id}/guardrails[/reset]
                                           the operator routes (the operator's token)
    GET  /  (/tripwire/sessions, /tripwire/alerts)   the live operator page and what it reads
                                           (``web.console``; with an operator token only)

Any other route is **404**, never passed through: the gateway is the one path to the provider,
and a route it cannot read (legacy completions, batches, files) would be a way around it.

Faults: an upstream's 4xx/5xx are passed to the harness as they came (a 5xx or 429 counted as
the session's retry); a refused connection is 502 and a timeout 504, in the API's error format
(counted as retries too); a non-streamed upstream body that is not JSON cannot be checked:
502 under ``enforce``, passed through otherwise. Under ``enforce`` a fault of tripwire's own
on a request is a 500 in the API's error format and the request is not forwarded; in the
other modes the request goes through unwatched and the fault is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

import orjson

from ..base.modes import Mode
from ..fleet.fleet import Fleet
from ..interchange.wire import anthropic, gemini, openai_chat, openai_responses
from ..interchange.wire.sse import Frames
from ..web.console import EventFeed, console_routes
from ..web.operator import Api, HttpError, Metrics, operator_routes
from .exchange import Answer, Exchange, Refusal, Unwatched
from .identity import Roles, fingerprint, harness_session
from .upstreams import Credentials, Upstream, forward_headers, presented_key

if TYPE_CHECKING:
    from starlette.responses import Response

__all__ = ["Gateway", "create_app", "MAX_BODY", "WIRE", "HALT_STATUS"]

LOGGER = logging.getLogger("tripwire")

#: bytes of one request body (a long conversation with images is megabytes)
MAX_BODY = 32 << 20

#: each API's wire module and family
WIRE = {"anthropic": (anthropic, "anthropic"), "openai_chat": (openai_chat, "openai"),
        "openai_responses": (openai_responses, "openai"), "gemini": (gemini, "gemini")}

#: the status and error type of a halted session's refusal, per family: a client error the
#: harness does not retry and shows its user (Claude Code: "API Error: 400 ..."; Codex: the
#: error line of ``codex exec``; both checked with the real binaries)
HALT_STATUS = {"anthropic": (400, "invalid_request_error"),
               "openai": (400, "invalid_request_error"), "gemini": (400, "FAILED_PRECONDITION")}
_ERRORS = {  # (family, what) -> error type in the family's vocabulary
    ("anthropic", 401): "authentication_error", ("openai", 401): "invalid_api_key",
    ("gemini", 401): "UNAUTHENTICATED", ("anthropic", 400): "invalid_request_error",
    ("openai", 400): "invalid_request_error", ("gemini", 400): "INVALID_ARGUMENT",
    ("anthropic", 413): "request_too_large", ("openai", 413): "request_too_large",
    ("gemini", 413): "INVALID_ARGUMENT", ("anthropic", 500): "api_error",
    ("openai", 500): "server_error", ("gemini", 500): "INTERNAL",
    ("anthropic", 502): "api_error", ("openai", 502): "server_error",
    ("gemini", 502): "UNAVAILABLE", ("anthropic", 504): "api_error",
    ("openai", 504): "server_error", ("gemini", 504): "DEADLINE_EXCEEDED",
    ("anthropic", 404): "not_found_error", ("openai", 404): "not_found",
    ("gemini", 404): "NOT_FOUND"}
#: upstream response headers the harness gets back (request ids, rate limits, retry advice)
_KEPT = ("request-id", "x-request-id", "retry-after", "anthropic-organization-id",
         "openai-processing-ms", "openai-model", "openai-version", "x-goog-request-id")
_KEPT_PREFIXES = ("anthropic-ratelimit-", "x-ratelimit-")


class Gateway:
    """The gateway's state: the fleet of sessions, the upstreams, the credentials, who is the
    main agent of each session (``identity.Roles``)."""

    def __init__(self, fleet: Fleet, upstreams: dict[str, Upstream],
                 credentials: Credentials | None = None, *, store_label: str = "STORE",
                 timeout: float = 600.0, max_body: int = MAX_BODY,
                 feed: EventFeed | None = None):
        self.fleet = fleet
        self.feed = feed  # the operator page's live events (the fleet's on_event feeds it)
        self.upstreams = upstreams
        self.credentials = credentials or Credentials()
        self.store_label = store_label
        self.timeout = timeout
        self.max_body = max_body
        self.roles = Roles()
        self.enforce = fleet.settings.mode == Mode.ENFORCE
        self.offload = fleet.store is not None  # store writes (fsync) off the event loop
        self.client: Any = None

    def resume_line(self, session_id: str, reason: str) -> str:
        return (f"tripwire: {reason} To resume: tripwire reset {self.store_label} "
                f"--session {session_id}")

    def halt_message(self, g: Any, refusal: Any = None) -> str:
        """A halted session's (or exhausted task's) refusal as the harness's user reads it."""
        reason = (refusal or g.refusal()).reason
        return (f"tripwire halted session {g.session_id}: {reason} To resume: "
                f"tripwire reset {self.store_label} --session {g.session_id}")

    def upstream_url(self, family: str, path: str, query: str) -> str:
        base = self.upstreams[family].url.rstrip("/")
        for version in ("/v1", "/v1beta"):  # a base URL that already ends in the version
            if base.endswith(version) and path.startswith(version + "/"):
                path = path[len(version):]
        return base + path + (f"?{query}" if query else "")

    async def start(self) -> None:
        # aiohttp, not httpx, for the upstream: a quarter of httpx's time per request, and its
        # pool does not scan every connection per request (docs/dependencies.md, "gateway")
        import aiohttp

        self.client = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0,
                                          sock_read=self.timeout),
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30.0),
            cookie_jar=aiohttp.DummyCookieJar(), skip_auto_headers=("User-Agent",))

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.close()
        for sid in list(self.fleet):
            try:
                self.fleet.session(sid).flush()
            except Exception as exc:  # one session's store trouble never stops the rest
                LOGGER.error("[session %s] could not flush its rows at shutdown (%s)", sid, exc)


def _error(family: str, status: int, message: str, kind: str | None = None) -> Response:
    from starlette.responses import Response

    module = WIRE["gemini" if family == "gemini" else "anthropic" if family == "anthropic"
                  else "openai_chat"][0]
    kind = kind or _ERRORS.get((family, status), "api_error")
    body = module.error(kind, message, status) if module is gemini else module.error(kind, message)
    return Response(body, status, media_type="application/json")


def _kept_headers(headers: Any) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() in _KEPT or
            k.lower().startswith(_KEPT_PREFIXES)}


def create_app(gateway: Gateway, operator_token: str | None = None,
               metrics: Metrics | None = None) -> Any:
    """The Starlette application of ``gateway``; the operator routes need ``operator_token``
    (without one only ``/tripwire/healthz`` is served). ``metrics``: a notifier's, so its
    counts show in ``/tripwire/metrics``."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    class Relayed(StreamingResponse):
        """A stream sent straight on ASGI: the head at once, then a task that waits for the
        client's disconnect and cancels the body (the relay's ``finally`` settles it).
        Starlette's own path (ASGI spec < 2.4, as uvicorn reports) first starts an anyio task
        group and sends the head a loop tick later, which cost the first byte ~0.3-0.6 ms."""

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
            body = asyncio.current_task()
            assert body is not None
            gone = False

            async def watch() -> None:
                nonlocal gone
                while (await receive())["type"] != "http.disconnect":
                    pass
                gone = True
                body.cancel()

            watcher = asyncio.ensure_future(watch())
            try:
                async for chunk in self.body_iterator:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except asyncio.CancelledError:
                if not gone:
                    raise
                body.uncancel()  # the client left: the stream is over, not an error
            finally:
                watcher.cancel()

    metrics = metrics if metrics is not None else Metrics()
    metrics.declare("gateway_upstream_faults")
    api = Api(operator_token or "\0no operator token\0", metrics, name="gateway")
    if operator_token:
        operator = [*operator_routes(api, gateway.fleet, prefix="/tripwire"),
                    *console_routes(api, gateway.fleet, gateway.feed, prefix="/tripwire")]
    else:
        operator = [r for r in operator_routes(api, gateway.fleet, prefix="/tripwire")
                    if r.path == "/tripwire/healthz"]
    body_api = Api("unused", metrics, name="gateway")  # its body bound: the gateway's

    async def offload(fn: Any, *args: Any) -> Any:
        if gateway.offload:
            return await run_in_threadpool(fn, *args)
        return fn(*args)

    async def relay(request: Request, name: str, model: str | None = None,
                    stream: bool = False) -> Response:
        module, family = WIRE[name]
        upstream = gateway.upstreams.get(family)
        if upstream is None:
            metrics.count(name, 404)
            return _error(family, 404, f"this gateway has no upstream for the {family} API")
        presented = presented_key(family, request.headers, request.query_params.get("key"))
        try:
            agent = gateway.credentials.agent(presented)
        except PermissionError as exc:
            metrics.count(name, 401)
            return _error(family, 401, f"tripwire gateway: {exc}")
        try:
            raw = await body_api.raw_body(request, gateway.max_body)
        except HttpError as bad:
            metrics.count(name, bad.status)
            return _error(family, bad.status, f"tripwire gateway: {bad.reason}")
        try:
            body = orjson.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("the body is not a JSON object")
            wire_request = (module.read_request(body, model, stream) if module is gemini
                            else module.read_request(body))
        except (ValueError, TypeError) as exc:
            metrics.count(name, 400)
            return _error(family, 400, f"tripwire gateway: the request is not a {name} "
                                       f"request tripwire reads ({exc})")
        try:
            sid = harness_session(request.headers, body)
            harness = sid is not None
            sid = sid or request.headers.get("x-tripwire-session") or agent or fingerprint(
                family, wire_request)
            role = gateway.roles.classify(sid, wire_request, harness)
            exchange = Exchange(gateway, role, wire_request)
            started = time.perf_counter()
            outcome = await offload(exchange.before)
            metrics.decided(name, time.perf_counter() - started)
        except Exception as exc:
            if gateway.enforce:
                return fault(name, family, exc, request)
            LOGGER.exception("tripwire gateway: %s %s passed through unwatched",
                             request.method, request.url.path)
            return await forward(request, name, family, upstream, presented, raw, Unwatched())
        if isinstance(outcome, Refusal):
            status, kind = HALT_STATUS[family]
            metrics.count(name, status)
            return _error(family, status, outcome.message, kind)
        if isinstance(outcome, Answer):
            metrics.count(name, 200)
            media, data = module.answer(wire_request, outcome.text)
            return Response(data, 200, media_type=media)
        content = raw
        if exchange.feedback or (module is openai_chat and wire_request.stream and
                                 not isinstance(body.get("stream_options"), dict)):
            if exchange.feedback:
                module.inject(body, exchange.feedback)
            if module is openai_chat and wire_request.stream:
                body.setdefault("stream_options", {"include_usage": True})
            content = orjson.dumps(body)
        return await forward(request, name, family, upstream, presented, content, exchange)

    def fault(name: str, family: str, exc: Exception, request: Request) -> Response:
        LOGGER.exception("tripwire gateway: %s %s failed", request.method, request.url.path)
        metrics.count(name, 500)
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return _error(family, 500, f"tripwire gateway: internal error ({reason}); the request "
                                   "was not forwarded")

    async def forward(request: Request, name: str, family: str, upstream: Upstream,
                      presented: str | None, content: bytes, exchange: Any) -> Response:
        import aiohttp

        url = gateway.upstream_url(family, request.url.path, request.url.query)
        headers = forward_headers(request.headers, upstream, gateway.credentials, presented)
        try:
            reply = await gateway.client.post(url, headers=headers, data=content,
                                              allow_redirects=False)
            if reply.status >= 400 or not reply.content_type.startswith("text/event-stream"):
                try:
                    data = await reply.read()
                finally:
                    reply.release()
        except TimeoutError:  # aiohttp's timeouts are TimeoutErrors
            await offload(exchange.retry, "upstream timeout")
            metrics.count(name, 504)
            metrics.add("gateway_upstream_faults")
            return _error(family, 504, "tripwire gateway: the upstream did not answer in time")
        except aiohttp.ClientError as exc:
            await offload(exchange.retry, "upstream unreachable")
            metrics.count(name, 502)
            metrics.add("gateway_upstream_faults")
            return _error(family, 502, f"tripwire gateway: the upstream is unreachable "
                                       f"({type(exc).__name__})")
        status = reply.status
        kept = _kept_headers(reply.headers)
        media = reply.headers.get("content-type", "application/json")
        if status >= 400:
            if status >= 500 or status == 429:
                await offload(exchange.retry, f"upstream {status}")
                metrics.add("gateway_upstream_faults")
            metrics.count(name, status)
            return Response(data, status, headers=kept, media_type=media)
        module = WIRE[name][0]
        if media.startswith("text/event-stream"):
            metrics.count(name, status)
            return Relayed(relay_stream(module, reply, exchange), status,
                                     headers=kept, media_type=media)
        try:
            out = await offload(read_whole, module, data, exchange)
        except Exception as exc:
            if not gateway.enforce:
                LOGGER.warning("tripwire gateway: an upstream response tripwire cannot read "
                               "(%s) passed through unwatched", type(exc).__name__)
                metrics.count(name, status)
                return Response(data, status, headers=kept, media_type=media)
            metrics.count(name, 502)
            metrics.add("gateway_upstream_faults")
            return _error(family, 502, "tripwire gateway: the upstream's response is not one "
                                       f"tripwire reads ({type(exc).__name__}); withheld")
        metrics.count(name, status)
        return Response(out, status, headers=kept, media_type=media)

    def read_whole(module: Any, data: bytes, exchange: Exchange) -> bytes:
        body = orjson.loads(data)
        if not isinstance(body, dict):
            raise ValueError("not a JSON object")
        events = module.read_response(body, exchange.request.names)
        guidance = exchange.observe_all(events)
        exchange.done()
        if guidance is None:
            return data  # unchanged: the upstream's own bytes
        return orjson.dumps(module.cut_response(body, guidance))

    async def relay_stream(module: Any, reply: Any, exchange: Exchange) -> Any:
        frames = Frames()
        args = (exchange.decide, exchange.observe, exchange.request.names)
        reader = module.Stream(*args, exchange.request.model) if module is gemini \
            else module.Stream(*args)
        complete = False
        try:
            async for chunk in reply.content.iter_any():
                out = b"".join(reader.feed(f) for f in frames.feed(chunk))
                if out:
                    yield out
            last = frames.rest()
            if last is not None:
                out = reader.feed(last)
                if out:
                    yield out
            complete = True
        finally:
            # the end, a client gone mid-stream (cancelled), or an upstream that broke: the
            # usage seen is charged and the turn settled either way; the connection is kept
            # only after a whole stream
            if complete:
                reply.release()
            else:
                reply.close()
            try:
                reader.finish()
                exchange.done()
            except Exception:
                LOGGER.exception("tripwire gateway: settling a stream failed")

    async def passthrough(request: Request, family: str) -> Response:
        upstream = gateway.upstreams.get(family)
        if upstream is None:
            return _error(family, 404, f"this gateway has no upstream for the {family} API")
        presented = presented_key(family, request.headers)
        try:
            gateway.credentials.agent(presented)
        except PermissionError as exc:
            return _error(family, 401, f"tripwire gateway: {exc}")
        import aiohttp

        try:
            raw = await body_api.raw_body(request, gateway.max_body)
        except HttpError as bad:
            return _error(family, bad.status, f"tripwire gateway: {bad.reason}")
        url = gateway.upstream_url(family, request.url.path, request.url.query)
        headers = forward_headers(request.headers, upstream, gateway.credentials, presented)
        try:
            async with gateway.client.request(request.method, url, headers=headers,
                                              data=raw or None, allow_redirects=False) as reply:
                data = await reply.read()
        except TimeoutError:
            return _error(family, 504, "tripwire gateway: the upstream did not answer in time")
        except aiohttp.ClientError as exc:
            return _error(family, 502, f"tripwire gateway: the upstream is unreachable "
                                       f"({type(exc).__name__})")
        metrics.count("passthrough", reply.status)
        return Response(data, reply.status, headers=_kept_headers(reply.headers),
                        media_type=reply.headers.get("content-type"))

    async def messages(request: Request) -> Response:
        return await relay(request, "anthropic")

    async def chat(request: Request) -> Response:
        return await relay(request, "openai_chat")

    async def responses(request: Request) -> Response:
        return await relay(request, "openai_responses")

    async def gemini_route(request: Request) -> Response:
        model, _, action = str(request.path_params["rest"]).rpartition(":")
        if action not in ("generateContent", "streamGenerateContent"):
            if action == "countTokens":
                return await passthrough(request, "gemini")
            return _error("gemini", 404, f"no such route: {request.url.path}")
        return await relay(request, "gemini", model or None, action == "streamGenerateContent")

    async def count_tokens(request: Request) -> Response:
        return await passthrough(request, "anthropic")

    async def models(request: Request) -> Response:
        family = "anthropic" if request.headers.get("anthropic-version") else "openai"
        return await passthrough(request, family)

    routes = [
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/v1beta/models/{rest:path}", gemini_route, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model:path}", models, methods=["GET"]),
        *operator,
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        await gateway.start()
        try:
            yield
        finally:
            await gateway.stop()

    app = Starlette(routes=routes, exception_handlers=api.exception_handlers(),
                    lifespan=lifespan)
    app.state.metrics = metrics
    return app
