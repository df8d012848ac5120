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
        self.broken = 0  # streams the reader left before their end
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
                                       "body": body, "raw": raw})
                answer = outer.respond(outer, self.path, body)
                status, media, data = answer if len(answer) == 3 else (200, *answer)
                self.send_response(status)
                self.send_header("content-type", media)
                self.send_header("request-id", f"req_{len(outer.requests)}")
                if isinstance(data, bytes):
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                # (pause seconds, bytes) pieces, chunked: a stream that takes its time
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                try:
                    for pause, piece in data:
                        time.sleep(pause)
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    outer.broken += 1

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
                     "anthropic", "openai", "gemini"), timeout: float = 60.0,
                 max_body: int | None = None, **config: Any) -> Gateway:
    fleet = Fleet(GuardrailsConfig(mode=mode, unattended=True, **config), store=store,
                  implementation=implementation, feedback_at_once=True)
    extra = {"max_body": max_body} if max_body else {}
    return Gateway(fleet, {f: Upstream(f, upstream, key_env) for f in families}, credentials,
                   store_label="s.db", timeout=timeout, **extra)


@contextmanager
def gateway_for(upstream: str, implementation: str, operator_token: str | None = None,
                **kwargs: Any) -> Iterator[tuple[str, Gateway]]:
    gateway = make_gateway(upstream, implementation, **kwargs)
    with serving(create_app(gateway, operator_token)) as url:
        yield url, gateway


class Harness:
    """A harness's side of one conversation through the gateway, per API: the user's prompt,
    then each response's tool call executed (its result sent back) until the response has no
    call. ``turn()`` returns the responses of one turn (status, parsed body or stream text)."""

    def __init__(self, client: Any, api: str, *, stream: bool, session: str | None = "s1",
                 tools: tuple[str, ...] = ("Bash",), headers: dict | None = None):
        self.client, self.api, self.stream = client, api, stream
        self.headers = {**({"x-tripwire-session": session} if session else {}),
                        **(headers or {})}
        self.tools = tools
        self.history: list[Any] = []
        self.results: list[str] = []

    def body(self) -> dict:
        if self.api == "anthropic":
            return {"model": "claude-sonnet-4-5", "stream": self.stream, "max_tokens": 100,
                    "tools": [{"name": t, "input_schema": {}} for t in self.tools],
                    "messages": self.history}
        if self.api == "openai_chat":
            return {"model": "gpt-4o", "stream": self.stream, "messages": self.history,
                    "tools": [{"type": "function", "function": {"name": t}} for t in self.tools]}
        if self.api == "openai_responses":
            return {"model": "gpt-5", "stream": self.stream, "input": self.history,
                    "tools": [{"type": "function", "name": t} for t in self.tools]}
        return {"contents": self.history,
                "tools": [{"functionDeclarations": [{"name": t} for t in self.tools]}]}

    def path(self) -> str:
        if self.api == "gemini":
            action = "streamGenerateContent?alt=sse" if self.stream else "generateContent"
            return f"/v1beta/models/gemini-2.5-pro:{action}"
        return PATHS[self.api]

    def prompt(self, text: str) -> None:
        if self.api == "openai_responses":
            self.history.append({"type": "message", "role": "user", "content": text})
        elif self.api == "gemini":
            self.history.append({"role": "user", "parts": [{"text": text}]})
        else:
            self.history.append({"role": "user", "content": text})

    def send(self) -> tuple[int, Any]:
        r = self.client.post(self.path(), json=self.body(), headers=self.headers)
        if r.status_code != 200:
            return r.status_code, r.json()
        return 200, (parse_stream(self.api, r.text) if self.stream else r.json())

    def calls_of(self, reply: Any) -> list[dict]:
        """The tool calls a (parsed) response asks for: {"id", "name", "input"}."""
        if self.api == "anthropic":
            return [{"id": b["id"], "name": b["name"], "input": b["input"]}
                    for b in reply["content"] if b["type"] == "tool_use"]
        if self.api == "openai_chat":
            message = reply["choices"][0]["message"]
            return [{"id": c["id"], "name": c["function"]["name"],
                     "input": json.loads(c["function"]["arguments"])}
                    for c in message.get("tool_calls") or ()]
        if self.api == "openai_responses":
            return [{"id": i["call_id"], "name": i["name"], "input": json.loads(i["arguments"])}
                    for i in reply["output"] if i["type"] == "function_call"]
        parts = reply["candidates"][0]["content"]["parts"]
        return [{"id": None, "name": p["functionCall"]["name"], "input": p["functionCall"]["args"]}
                for p in parts if "functionCall" in p]

    def text_of(self, reply: Any) -> str:
        if self.api == "anthropic":
            return "".join(b.get("text", "") for b in reply["content"] if b["type"] == "text")
        if self.api == "openai_chat":
            return reply["choices"][0]["message"].get("content") or ""
        if self.api == "openai_responses":
            return "".join(c["text"] for i in reply["output"] if i["type"] == "message"
                           for c in i["content"])
        return "".join(p.get("text", "") for p in reply["candidates"][0]["content"]["parts"])

    def record(self, reply: Any, calls: list[dict], result: str) -> None:
        """The response into the history, and each call's result after it."""
        if self.api == "anthropic":
            self.history.append({"role": "assistant", "content": reply["content"]})
            self.history.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c["id"], "content": result}
                for c in calls]})
        elif self.api == "openai_chat":
            self.history.append(reply["choices"][0]["message"])
            self.history += [{"role": "tool", "tool_call_id": c["id"], "content": result}
                             for c in calls]
        elif self.api == "openai_responses":
            self.history += reply["output"]
            self.history += [{"type": "function_call_output", "call_id": c["id"],
                              "output": result} for c in calls]
        else:
            self.history.append(reply["candidates"][0]["content"])
            self.history.append({"role": "user", "parts": [
                {"functionResponse": {"name": c["name"], "response": {"output": result}}}
                for c in calls]})

    def turn(self, text: str, result: str = "ok", limit: int = 20) -> list[tuple[int, Any]]:
        self.prompt(text)
        return self.run(result, limit)

    def run(self, result: str = "ok", limit: int = 20) -> list[tuple[int, Any]]:
        """Requests until a response has no call (or ``limit``), each call answered."""
        replies = []
        for _ in range(limit):
            status, reply = self.send()
            replies.append((status, reply))
            if status != 200:
                break
            calls = self.calls_of(reply)
            if not calls:
                if self.api == "openai_responses":
                    self.history += reply["output"]
                elif self.api == "anthropic":
                    self.history.append({"role": "assistant", "content": reply["content"]})
                elif self.api == "openai_chat":
                    self.history.append(reply["choices"][0]["message"])
                else:
                    self.history.append(reply["candidates"][0]["content"])
                break
            self.record(reply, calls, result)
            self.results.append(result)
        return replies


def parse_stream(api: str, text: str) -> Any:
    """A streamed response rebuilt as the whole body it stands for (as an SDK does)."""
    frames = [f for f in text.split("\n\n") if f.strip()]
    datas = []
    for f in frames:
        for line in f.splitlines():
            if line.startswith("data:"):
                datas.append(line[5:].strip())
    if api == "anthropic":
        content: dict[int, dict] = {}
        message: dict = {}
        partial: dict[int, str] = {}
        for d in datas:
            e = json.loads(d)
            if e["type"] == "message_start":
                message = e["message"]
            elif e["type"] == "content_block_start":
                content[e["index"]] = dict(e["content_block"])
            elif e["type"] == "content_block_delta":
                delta = e["delta"]
                if delta["type"] == "text_delta":
                    content[e["index"]]["text"] += delta["text"]
                elif delta["type"] == "input_json_delta":
                    partial[e["index"]] = partial.get(e["index"], "") + delta["partial_json"]
            elif e["type"] == "message_delta":
                message["stop_reason"] = e["delta"]["stop_reason"]
        for i, p in partial.items():
            content[i]["input"] = json.loads(p) if p else {}
        return {**message, "content": [content[i] for i in sorted(content)]}
    if api == "openai_chat":
        text_parts, calls, finish = [], {}, None
        for d in datas:
            if d == "[DONE]":
                continue
            e = json.loads(d)
            for choice in e.get("choices") or ():
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    text_parts.append(delta["content"])
                for part in delta.get("tool_calls") or ():
                    c = calls.setdefault(part["index"], {"id": None, "type": "function",
                                                         "function": {"name": "", "arguments": ""}})
                    if part.get("id"):
                        c["id"] = part["id"]
                    f = part.get("function") or {}
                    c["function"]["name"] += f.get("name") or ""
                    c["function"]["arguments"] += f.get("arguments") or ""
                finish = choice.get("finish_reason") or finish
        message = {"role": "assistant", "content": "".join(text_parts) or None}
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        return {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    if api == "openai_responses":
        done = [json.loads(d) for d in datas]
        completed = next(e for e in done if e["type"] == "response.completed")
        items = [e["item"] for e in done if e["type"] == "response.output_item.done"]
        assert [i["type"] for i in items] == [i["type"] for i in completed["response"]["output"]]
        return {**completed["response"], "output": items}
    parts = [p for d in datas for p in json.loads(d)["candidates"][0]["content"]["parts"]]
    return {"candidates": [{"content": {"role": "model", "parts": parts}}]}
