"""What the gateway tests share: a scripted fake model server on 127.0.0.1 speaking each API
(whole bodies and event streams, or a fault), and the gateway itself served on 127.0.0.1 in a
thread (uvicorn on a free port), over a ``Fleet`` of the test's engine."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import uvicorn

from tripwire.fleet.fleet import Fleet
from tripwire.gateway.app import Gateway, create_app
from tripwire.gateway.upstreams import Credentials, Upstream
from tripwire.session.guardrails import GuardrailsConfig

USAGE = {"input_tokens": 100, "output_tokens": 10}


def sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        body = data if isinstance(data, str) else json.dumps(data)
        out.append(f"{head}data: {body}\n\n")
    return "".join(out).encode()


# -- the scripted model's answers, per API ------------------------------------------------------

def anthropic_reply(request: dict, n: int, call: dict | None, text: str = "done") -> tuple[str, bytes]:
    """A Messages response: ``call`` ({"name", "input"}) as a tool_use, else ``text``."""
    usage = {"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 5,
             "cache_read_input_tokens": 20}
    if call is not None:
        content = [{"type": "text", "text": "running it"},
                   {"type": "tool_use", "id": f"toolu_{n:04d}", "name": call["name"],
                    "input": call["input"]}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": text}]
        stop = "end_turn"
    message = {"id": f"msg_{n}", "type": "message", "role": "assistant",
               "model": request.get("model", "claude-sonnet-4-5"), "content": content,
               "stop_reason": stop, "stop_sequence": None, "usage": usage}
    if not request.get("stream"):
        return "application/json", json.dumps(message).encode()
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start",
                                                               "message": start}),
                                            ("ping", {"type": "ping"})]
    for i, block in enumerate(content):
        if block["type"] == "tool_use":
            first = {**block, "input": {}}
            text_json = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": text_json[:5]},
                      {"type": "input_json_delta", "partial_json": text_json[5:]}]
        else:
            first = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"][:3]},
                      {"type": "text_delta", "text": block["text"][3:]}]
        events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                               "content_block": first}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": i,
                                            "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events += [("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": 10}}),
               ("message_stop", {"type": "message_stop"})]
    return "text/event-stream", sse(events)


def chat_reply(request: dict, n: int, call: dict | None, text: str = "done") -> tuple[str, bytes]:
    usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110,
             "prompt_tokens_details": {"cached_tokens": 20}}
    model = request.get("model", "gpt-4o")
    if call is not None:
        calls = [{"id": f"call_{n}", "type": "function",
                  "function": {"name": call["name"], "arguments": json.dumps(call["input"])}}]
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": text}, "stop"
    base = {"id": f"chatcmpl-{n}", "created": 1, "model": model}
    if not request.get("stream"):
        return "application/json", json.dumps({
            **base, "object": "chat.completion", "usage": usage,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]}).encode()
    chunk = {**base, "object": "chat.completion.chunk"}
    events: list[tuple[str | None, Any]] = [(None, {**chunk, "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})]
    if call is not None:
        args = calls[0]["function"]["arguments"]
        events += [(None, {**chunk, "choices": [{"index": 0, "finish_reason": None, "delta": {
            "tool_calls": [{"index": 0, "id": f"call_{n}", "type": "function",
                            "function": {"name": call["name"], "arguments": ""}}]}}]}),
                   (None, {**chunk, "choices": [{"index": 0, "finish_reason": None, "delta": {
                       "tool_calls": [{"index": 0, "function": {"arguments": args[:4]}}]}}]}),
                   (None, {**chunk, "choices": [{"index": 0, "finish_reason": None, "delta": {
                       "tool_calls": [{"index": 0, "function": {"arguments": args[4:]}}]}}]})]
    else:
        events += [(None, {**chunk, "choices": [{"index": 0, "finish_reason": None,
                                                 "delta": {"content": t}}]})
                   for t in (text[:2], text[2:])]
    events.append((None, {**chunk, "choices": [{"index": 0, "delta": {},
                                                "finish_reason": finish}]}))
    if (request.get("stream_options") or {}).get("include_usage"):
        events.append((None, {**chunk, "choices": [], "usage": usage}))
    events.append((None, "[DONE]"))
    return "text/event-stream", sse(events)


def responses_reply(request: dict, n: int, call: dict | None,
                    text: str = "done") -> tuple[str, bytes]:
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 20},
             "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 110}
    if call is not None:
        item = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                "name": call["name"], "arguments": json.dumps(call["input"]),
                "status": "completed"}
    else:
        item = {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
    response = {"id": f"resp_{n}", "object": "response", "status": "completed",
                "model": request.get("model", "gpt-5"), "output": [item], "usage": usage}
    if not request.get("stream"):
        return "application/json", json.dumps(response).encode()
    events: list[tuple[str | None, Any]] = [
        ("response.created", {"type": "response.created",
                              "response": {**response, "output": [], "status": "in_progress"}}),
        ("response.output_item.added", {"type": "response.output_item.added",
                                        "output_index": 0, "item": {**item, "arguments": ""}
                                        if call else {**item, "content": []}})]
    if call is not None:
        events.append(("response.function_call_arguments.delta", {
            "type": "response.function_call_arguments.delta", "output_index": 0,
            "item_id": item["id"], "delta": item["arguments"]}))
    else:
        events.append(("response.output_text.delta", {
            "type": "response.output_text.delta", "output_index": 0, "content_index": 0,
            "item_id": item["id"], "delta": text}))
    events += [("response.output_item.done", {"type": "response.output_item.done",
                                              "output_index": 0, "item": item}),
               ("response.completed", {"type": "response.completed", "response": response})]
    return "text/event-stream", sse(events)


def gemini_reply(request: dict, n: int, call: dict | None, text: str = "done",
                 stream: bool = False) -> tuple[str, bytes]:
    part = {"functionCall": {"name": call["name"], "args": call["input"]}} if call else {
        "text": text}
    body = {"candidates": [{"content": {"role": "model", "parts": [part]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10,
                              "totalTokenCount": 110}, "modelVersion": "gemini-2.5-pro"}
    if stream:
        return "text/event-stream", sse([(None, body)])
    return "application/json", json.dumps(body).encode()


REPLIES = {"anthropic": anthropic_reply, "openai_chat": chat_reply,
           "openai_responses": responses_reply, "gemini": gemini_reply}
PATHS = {"anthropic": "/v1/messages", "openai_chat": "/v1/chat/completions",
         "openai_responses": "/v1/responses"}


class FakeModel:
    """A scripted model on 127.0.0.1: every POST goes to ``respond(model, path, request)`` ->
    ``(status, content type, body)`` (or ``(content type, body)``: 200). ``requests`` holds
    each request's path, headers and JSON body."""

    def __init__(self, respond: Callable[..., Any]):
        self.requests: list[dict[str, Any]] = []
        self.respond = respond
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                data = json.dumps({"data": [{"id": "m"}], "object": "list"}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                outer.requests.append({"path": self.path, "headers": dict(self.headers),
                                       "body": body})
                answer = outer.respond(outer, self.path, body)
                status, media, data = answer if len(answer) == 3 else (200, *answer)
                self.send_response(status)
                self.send_header("content-type", media)
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", f"req_{len(outer.requests)}")
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def looping(api: str, call: dict, loop: int = 30) -> Callable[..., Any]:
    """A model that answers every request with ``call`` (``loop`` times), then with text."""
    def respond(model: FakeModel, path: str, request: dict) -> Any:
        n = len(model.requests)
        if api == "gemini":
            return gemini_reply(request, n, call if n <= loop else None,
                                stream="streamGenerateContent" in path)
        return REPLIES[api](request, n, call if n <= loop else None)
    return respond


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` on uvicorn on 127.0.0.1 in a thread (lifespan on), for the block: its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on",
                                           log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the gateway did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def make_gateway(upstream: str, implementation: str, *, store: Any = None,
                 mode: str = "enforce", credentials: Credentials | None = None,
                 key_env: str | None = None, families: tuple[str, ...] = (
                     "anthropic", "openai", "gemini"), **config: Any) -> Gateway:
    fleet = Fleet(GuardrailsConfig(mode=mode, unattended=True, **config), store=store,
                  implementation=implementation, feedback_at_once=True)
    return Gateway(fleet, {f: Upstream(f, upstream, key_env) for f in families}, credentials,
                   store_label="s.db")


@contextmanager
def gateway_for(upstream: str, implementation: str, operator_token: str | None = None,
                **kwargs: Any) -> Iterator[tuple[str, Gateway]]:
    gateway = make_gateway(upstream, implementation, **kwargs)
    with serving(create_app(gateway, operator_token)) as url:
        yield url, gateway
