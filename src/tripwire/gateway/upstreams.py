"""The API families a gateway speaks, the upstream each goes to, and the credentials: which
header carries a key in each family, the key the gateway holds (``--upstream-key-env``), the
per-agent gateway tokens, and what is forwarded of a client's headers.

Keys are never logged, stored or echoed: an error names the environment variable, never its
value; a gateway token is compared by its BLAKE3 digest, and only the agent's name is kept.
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import blake3

from ..errors import ConfigError

__all__ = ["FAMILIES", "Upstream", "Credentials", "read_tokens", "forward_headers",
           "redact_url", "KEY_HEADERS"]

#: the API families, in the order ``--upstream URL`` (no family named) applies to them
FAMILIES = ("anthropic", "openai", "gemini")

#: where each family's client puts its key (the first that is present is read)
KEY_HEADERS = {"anthropic": ("x-api-key", "authorization"),
               "openai": ("authorization", "api-key"),
               "gemini": ("x-goog-api-key", "authorization")}

#: headers never forwarded upstream: hop-by-hop, the gateway's own, the client's credentials
#: (replaced by the gateway's unless passed through), and the encoding (the gateway reads the
#: body, so it asks for identity)
_DROPPED = frozenset({"host", "content-length", "connection", "keep-alive", "te", "trailer",
                      "transfer-encoding", "upgrade", "proxy-authorization", "accept-encoding",
                      "x-tripwire-session", "x-api-key", "authorization", "api-key",
                      "x-goog-api-key"})


@dataclass(frozen=True)
class Upstream:
    """One family's upstream: its base URL (``https://api.anthropic.com``; a path prefix is
    kept) and the environment variable holding its key (None: no key of the gateway's)."""

    family: str
    url: str
    key_env: str | None = None

    def key(self) -> str | None:
        if self.key_env is None:
            return None
        value = os.environ.get(self.key_env, "").strip()
        if not value:
            raise ConfigError(f"${self.key_env} (--upstream-key-env) is not set")
        return value

    def auth_headers(self, key: str) -> dict[str, str]:
        if self.family == "anthropic":
            return {"x-api-key": key}
        if self.family == "gemini":
            return {"x-goog-api-key": key}
        return {"authorization": f"Bearer {key}"}


def redact_url(url: str) -> str:
    """A URL as it may be shown: a password in it replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def read_tokens(path: str) -> dict[bytes, str]:
    """Per-agent gateway tokens: a file of ``NAME TOKEN`` lines (``#`` comments), as digests
    to agent names."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the token file ({exc.strerror})") from None
    tokens: dict[bytes, str] = {}
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, token = line.partition(" ")
        token = token.strip()
        if not token or " " in token:
            raise ConfigError(f"{path}:{number}: a token line is 'NAME TOKEN'")
        digest = blake3.blake3(token.encode()).digest()
        if digest in tokens:
            raise ConfigError(f"{path}:{number}: a token given twice")
        tokens[digest] = name
    if not tokens:
        raise ConfigError(f"{path}: no tokens in the token file")
    return tokens


def presented_key(family: str, headers: Any, query_key: str | None = None) -> str | None:
    """The credential a client presented (a ``Bearer`` scheme removed)."""
    for name in KEY_HEADERS[family]:
        value = headers.get(name)
        if value:
            scheme, _, rest = value.strip().partition(" ")
            return str(rest.strip() if scheme.lower() == "bearer" and rest else value.strip())
    return query_key


@dataclass
class Credentials:
    """Who may call the gateway and with which key it calls upstream. ``tokens``: per-agent
    gateway tokens (digest -> agent name; empty: any client); ``pass_client_key``: the client's
    own credential goes upstream (else the upstream's ``key_env``)."""

    tokens: dict[bytes, str] = field(default_factory=dict)
    pass_client_key: bool = False

    def agent(self, presented: str | None) -> str | None:
        """The agent a presented token names; None when tokens are not required. Raises
        ``PermissionError`` for a missing or unknown token."""
        if not self.tokens:
            return None
        if not presented:
            raise PermissionError("missing gateway token")
        digest = blake3.blake3(presented.encode("utf-8", "replace")).digest()
        for known, name in self.tokens.items():
            if hmac.compare_digest(known, digest):
                return name
        raise PermissionError("unknown gateway token")


def forward_headers(headers: Any, upstream: Upstream, credentials: Credentials,
                    presented: str | None) -> dict[str, str]:
    """The client's headers as they go upstream: the dropped ones out, the gateway's key in
    (or the client's own, passed through)."""
    out = {k: v for k, v in headers.items() if k.lower() not in _DROPPED}
    out["accept-encoding"] = "identity"
    if credentials.pass_client_key:
        for name in KEY_HEADERS[upstream.family]:
            if headers.get(name):
                out[name] = headers[name]
    else:
        key = upstream.key()
        if key is not None:
            out.update(upstream.auth_headers(key))
    return out
