"""How an observed value becomes bytes and flags: tool names, args, payloads, errors, agent
text, no-op claims, call ids. Both engines normalize inputs through these functions (the
native one only for types its fast path does not take), so they cannot disagree about what an
input *is*."""

from __future__ import annotations

import json
from typing import Any

from ..errors import InvalidEvent
from .validate import check_no_op, check_text

#: Call ids remembered per session for results named by id; a harness that never starts a
#: turn (which forgets them) still stays bounded.
MAX_CALL_IDS = 512


def remember_call_id(ids: dict[Any, str], ident: Any, name: str) -> None:
    """Record a call id's tool name, as ``Guardrails.on_call`` does (inlined there)."""
    if len(ids) >= MAX_CALL_IDS:
        ids.clear()
    ids[ident] = name


def name_str(name: Any) -> str:
    """A tool name as str: None is the unnamed tool, anything else but str is an error."""
    if isinstance(name, str):
        return str(name)
    if name is None:
        return ""
    if isinstance(name, (bytes, bytearray)):
        return bytes(name).decode("utf-8", "replace")
    raise InvalidEvent(f"tool name must be a str, not {type(name).__name__}")


#: Nesting the standard encoder is trusted with; deeper values take the iterative encoder, so a
#: 10,000-level dict is observed like any other call instead of raising RecursionError.
_RECURSIVE_DEPTH = 200


def safe_repr(value: Any) -> str:
    """repr() that cannot raise: an object whose __repr__ fails is named by its type."""
    try:
        return repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__name__}>"


def _to_json(value: Any, *, sort_keys: bool) -> bytes:
    # Values JSON cannot express are rendered with repr() so the call is still observed
    # (the reference bridge does the same with a placeholder); NaN stays NaN, which makes the
    # args non-JSON and so compared as raw bytes.
    if _nests_deeper(value, _RECURSIVE_DEPTH):
        text = _iterative_json(value, sort_keys)
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                              sort_keys=sort_keys, default=safe_repr)
        except (TypeError, ValueError, RecursionError):
            text = safe_repr(value)
    return text.encode("utf-8", "surrogatepass")


def json_text(value: Any) -> str:
    """A decoded value as compact JSON text in the caller's key order (for quoting)."""
    return _to_json(value, sort_keys=False).decode("utf-8", "surrogatepass")


def _nests_deeper(value: Any, limit: int) -> bool:
    """Whether containers nest more than ``limit`` levels (an iterative walk: no recursion)."""
    if not isinstance(value, (dict, list, tuple)):
        return False
    stack = [(value, 1)]
    seen: set[int] = set()
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if id(item) in seen:
            continue
        seen.add(id(item))
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list, tuple)))
    return False


def _scalar_json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=safe_repr)
    except (TypeError, ValueError):
        return json.dumps(safe_repr(value), ensure_ascii=False)


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)
    return safe_repr(key)


def _iterative_json(value: Any, sort_keys: bool) -> str:
    """Compact JSON of any depth with an explicit stack (the shape json.dumps writes); a
    container met again on its own path is written as the string "<circular>"."""
    out: list[str] = []
    on_path: set[int] = set()
    # work items: ("v", value) writes a value; ("s", text) writes text; ("x", id) leaves a path
    work: list[tuple[str, Any]] = [("v", value)]
    while work:
        op, item = work.pop()
        if op == "s":
            out.append(item)
            continue
        if op == "x":
            on_path.discard(item)
            continue
        if isinstance(item, (dict, list, tuple)):
            if id(item) in on_path:
                out.append('"<circular>"')
                continue
            on_path.add(id(item))
            if isinstance(item, dict):
                members = [(_key_text(k), v) for k, v in item.items()]
                if sort_keys:
                    members.sort(key=lambda kv: kv[0])
                pushed: list[tuple[str, Any]] = [("s", "{")]
                for i, (k, v) in enumerate(members):
                    pushed.append(("s", ("," if i else "") + json.dumps(k, ensure_ascii=False)
                                   + ":"))
                    pushed.append(("v", v))
                pushed += [("s", "}"), ("x", id(item))]
            else:
                pushed = [("s", "[")]
                for i, v in enumerate(item):
                    if i:
                        pushed.append(("s", ","))
                    pushed.append(("v", v))
                pushed += [("s", "]"), ("x", id(item))]
            work.extend(reversed(pushed))
        else:
            out.append(_scalar_json(item))
    return "".join(out)


def args_bytes(args: Any) -> bytes:
    """Call args as the bytes to canonicalize.

    ``str`` is encoded as UTF-8 (lone surrogates pass through and make it non-JSON), buffers are
    taken as they are, ``None`` is the empty args, and decoded values (dict, list, numbers) are
    serialized to JSON first.
    """
    if isinstance(args, str):
        return args.encode("utf-8", "surrogatepass")
    if isinstance(args, (bytes, bytearray, memoryview)):
        return bytes(args)
    if args is None:
        return b""
    return _to_json(args, sort_keys=False)


def payload_bytes(payload: Any) -> bytes | None:
    """A tool result's payload as bytes, or None when it has none (it cannot be fingerprinted).

    An empty string is a payload (SPEC §10.7). A decoded JSON value is digested as its compact
    JSON text, keys in their given order (SPEC §10.21), so ``{"b":2,"a":1}`` and the string
    ``'{"b":2,"a":1}'`` are one payload.
    """
    if payload is None:
        return None
    if isinstance(payload, str):
        return payload.encode("utf-8", "surrogatepass")
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    return _to_json(payload, sort_keys=False)


def error_failed(error: Any) -> bool:
    """A result is a failure when its error is true or a non-empty text (or any other truthy
    value, such as a structured error object); False, None and "" are successes."""
    if error is None or error is False:
        return False
    if isinstance(error, str):
        return error != ""
    try:
        return bool(error)
    except Exception:
        return True


def text_has_words(text: Any) -> bool:
    """Agent text counts when it holds a non-whitespace character (SPEC §10.11); it must be
    a str (``validate.check_text``)."""
    if type(text) is not str:
        text = check_text(text)
    return bool(text) and not text.isspace()


def no_op_flag(no_op: Any, failed: bool) -> bool:
    """A result is a no-op when it says ``no_op: True`` and did not fail (SPEC §10.7); the
    claim must be a bool (``validate.check_no_op``)."""
    if no_op is not True and no_op is not False:
        no_op = check_no_op(no_op)
    return no_op and not failed
