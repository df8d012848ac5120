"""``tripwire gateway``: the model-API proxy (``tripwire.gateway``; needs ``tripwire[gateway]``:
Starlette, uvicorn, aiohttp). Its options, its start and its stop; docs/gateway.md has the rest.

    tripwire gateway --upstream https://api.anthropic.com --upstream-key-env ANTHROPIC_API_KEY
    tripwire gateway --upstream anthropic=https://api.anthropic.com \\
        --upstream openai=https://api.openai.com --upstream-key-env anthropic=ANTHROPIC_API_KEY \\
        --upstream-key-env openai=OPENAI_API_KEY --store tripwire.db --token-file agents.txt

A bare ``--upstream URL`` serves every API family from that URL; ``FAMILY=URL`` (``anthropic``,
``openai``, ``gemini``) names one, and the families named are the only ones served. The mode
defaults to ``enforce``: a gateway is a daemon nobody watches (unattended), whatever its stdin.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, TextIO

from ..errors import ConfigError
from . import usage

__all__ = ["add_parser", "run", "DEFAULT_LISTEN", "OPERATOR_TOKEN_ENV"]

DEFAULT_LISTEN = "127.0.0.1:8787"
OPERATOR_TOKEN_ENV = "TRIPWIRE_GATEWAY_OPERATOR_TOKEN"
_FAMILIES = ("anthropic", "openai", "gemini")


def add_parser(verbs: Any) -> None:
    p = verbs.add_parser(
        "gateway", help="a model-API proxy that stops a runaway before its call runs "
                        "(tripwire[gateway])",
        description="Relay the Anthropic Messages, OpenAI Chat Completions / Responses and "
                    "Gemini APIs to their upstreams, each response through a session's "
                    "guardrails: a denied call never reaches the harness, a halted session's "
                    "requests are refused. docs/gateway.md.")
    p.add_argument("--upstream", action="append", required=True, metavar="[FAMILY=]URL",
                   help="the provider's base URL (repeatable: anthropic=, openai=, gemini=)")
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                   help=f"address to listen on (default: {DEFAULT_LISTEN}; port 0: any free)")
    p.add_argument("--store", metavar="STORE",
                   help="the durable store (a SQLite file or a postgresql:// URL)")
    p.add_argument("--mode", choices=("off", "warn", "feedback", "enforce"), default="enforce",
                   help="the guardrails' mode (default: enforce)")
    p.add_argument("--config", metavar="FILE", help="a tripwire config file (TOML or JSON)")
    p.add_argument("--upstream-key-env", action="append", default=[], metavar="[FAMILY=]NAME",
                   help="the environment variable holding the provider key (repeatable)")
    p.add_argument("--token-file", metavar="PATH",
                   help="per-agent gateway tokens, 'NAME TOKEN' per line: a client must "
                        "present one where its API key goes")
    p.add_argument("--pass-client-key", action="store_true",
                   help="send the client's own key upstream (instead of the gateway's)")
    p.add_argument("--operator-token-file", metavar="PATH",
                   help=f"the operator routes' bearer token (default: ${OPERATOR_TOKEN_ENV}; "
                        "none: only /tripwire/healthz)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="the upstream's time to answer (default: 600)")
    usage.add_notify_arguments(p)


def _pairs(values: list[str], what: str) -> dict[str, str]:
    """``[FAMILY=]VALUE`` options: a bare value for every family."""
    out: dict[str, str] = {}
    for value in values:
        family, sep, rest = value.partition("=")
        if sep and family in _FAMILIES and "://" not in family:
            if not rest:
                raise ConfigError(f"{what} {value!r}: nothing after '='")
            out[family] = rest
        elif "*" in out:
            raise ConfigError(f"{what}: more than one value for every family")
        else:
            out["*"] = value
    if "*" in out:
        every = out.pop("*")
        for family in _FAMILIES:
            out.setdefault(family, every)
    return out


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"--listen {value!r}: HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


def build(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """The gateway and its fleet from the options (the store opened)."""
    from ..durability.open import open_store
    from ..fleet.fleet import Fleet
    from ..gateway.app import Gateway
    from ..gateway.upstreams import Credentials, Upstream, read_tokens, redact_url
    from ..session.guardrails import GuardrailsConfig
    from ..web.console import EventFeed, fanout
    from ..web.notify import attach, notifier_for

    urls = _pairs(args.upstream, "--upstream")
    keys = _pairs(args.upstream_key_env, "--upstream-key-env")
    for family, url in urls.items():
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"--upstream {family}={url!r}: an http:// or https:// URL")
    unknown = sorted(set(keys) - set(urls))
    if unknown:
        raise ConfigError(f"--upstream-key-env for {', '.join(unknown)}: no such upstream")
    upstreams = {f: Upstream(f, url, keys.get(f)) for f, url in urls.items()}
    if not args.pass_client_key:
        for upstream in upstreams.values():
            upstream.key()  # set, or a one-line error now rather than at the first request
    credentials = Credentials(read_tokens(args.token_file) if args.token_file else {},
                              args.pass_client_key)
    explicit = {"mode": args.mode, "unattended": True}
    config = (GuardrailsConfig.from_file(args.config, **explicit) if args.config
              else GuardrailsConfig(**explicit))
    store = open_store(args.store, check=True) if args.store else None
    notifier = notifier_for(args.notify, args.notify_format, config.file.get("notify"))
    feed = EventFeed()  # what the operator page shows as it happens
    fleet = Fleet(config, store=store, feedback_at_once=True,
                  on_event=fanout(feed.on_event, notifier.on_event if notifier else None))
    attach(notifier, fleet)
    gateway = Gateway(fleet, upstreams, credentials,
                      store_label=redact_url(args.store) if args.store else "STORE",
                      timeout=args.timeout, feed=feed)
    return gateway, store, notifier


def operator_token(path: str | None) -> str | None:
    if path is not None:
        try:
            with open(path, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the token file ({exc.strerror})") from None
        if not token:
            raise ConfigError(f"{path}: the token file is empty")
        return token
    return os.environ.get(OPERATOR_TOKEN_ENV, "").strip() or None


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        import aiohttp  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise ConfigError("tripwire gateway needs Starlette, uvicorn and aiohttp: "
                          "pip install 'tripwire[gateway]'") from None
    from ..gateway.app import create_app
    from ..web.listen import serve_app

    host, port = _listen(args.listen)
    token = operator_token(args.operator_token_file)
    gateway, store, notifier = build(args)
    app = create_app(gateway, token, notifier.metrics if notifier is not None else None)

    def announce(line: str) -> None:
        out.write(f"tripwire gateway: {line}\n")
        out.flush()

    try:
        serve_app(app, host, port, announce, lifespan="on")
    finally:
        if notifier is not None:
            notifier.close()
        if store is not None:
            store.close()
    return 0
