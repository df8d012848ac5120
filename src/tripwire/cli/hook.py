"""The hook command: ``tripwire hook claude-code|codex|gemini-cli|cursor|copilot|kiro``
(SPEC §11.4-§11.5).

The harness runs the hook command on each event: one JSON object on stdin; the decision is
JSON on stdout with exit code 0 (no output, or ``{}`` for Gemini CLI and Cursor: no decision;
Kiro reads a denial as exit 2 with its reason on stderr). One module per harness says how its
payloads read and its answer is written (``harnesses/hooks/<harness>.py``, ``ADAPTERS``);
``_session.py`` keeps the session across invocations in the store, shared by all of them.

``--install`` / ``--uninstall`` edit the harness's settings file (``hook_install.py``): every
option checked first, exit 2 on a bad one. On the event path a usage error is exit 0 and no
decision: every harness reads exit 2 as "block".

``tripwire hook serve --socket PATH`` keeps the modules imported in a resident process that the
command hands its events to when ``$TRIPWIRE_HOOK_SOCKET`` names the socket (``hook_server.py``);
the native client (``tripwire-hook``, what ``--install`` writes where it is installed) starts
one on demand otherwise.

Privilege separation (issue 36): ``tripwire hook serve --socket PATH --allow-user USER`` run as
another user than the agent's is the **authority** (it holds the store, the key, the anchor and
decides with its own options, ``authority_request``); ``tripwire hook HARNESS --authority PATH``
(or ``$TRIPWIRE_AUTHORITY``) is its thin client: it forwards the payload and prints the answer,
holds no secret and never opens the store. An authority it cannot reach, one that does not
answer in time or answers garbage is, under enforce (the client's ``--mode``, enforce by
default), a denial of the call with a reason for the model and one line for the operator
(``_thin``); below enforce, no decision and the line.

Fail open below enforce, closed under it (issue 36): bad input (not a JSON hook payload)
prints one line on stderr and exits 0 with no decision; any other error deciding a tool call
(an internal error, a ``MemoryError``, an unreadable config, no decision within the deadline)
is, under enforce, a denial with a reason for the model and the same line for the operator
(``hook_closed``); below enforce, and for events with nothing to deny, no decision. A halt
already recorded in the store denies a tool call whatever failed. The files the agent can write
are read bounded (``base.files``). Codex's last resort: under enforce, the event that halts
a session interrupts its ``codex exec`` process (SIGINT), since no Codex hook output ends a
turn (``--no-interrupt`` turns it off).
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
from collections.abc import Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # argparse is imported for --install and usage errors, not for an event
    import argparse

__all__ = ["main", "HARNESSES"]

#: each harness's adapter module (``harnesses/hooks/``): how its payloads read, its answers
#: are written (``render``; ``reply`` where an answer is more than stdout JSON), its
#: settings block, its doctor's probe
ADAPTERS = {"claude-code": "claude_code", "codex": "codex", "gemini-cli": "gemini_cli",
            "cursor": "cursor", "copilot": "copilot", "kiro": "kiro"}
HARNESSES = tuple(ADAPTERS)
#: The sessions of ``tripwire doctor``'s probes: kept in a scratch store (``probe_store``).
PROBE_PREFIX = "tripwire-doctor-"
#: The doctor's scratch directory for its probes' store (set in the hook's environment).
PROBE_ENV = "TRIPWIRE_DOCTOR"
_filtered = False


def _config(args: argparse.Namespace) -> Any:
    from .hook_config import hook_config

    return hook_config(args.mode, args.config)


def _harness(name: str) -> Any:
    import importlib

    return importlib.import_module(f"..harnesses.hooks.{ADAPTERS[name]}", __package__)


def reply(harness: Any, out: dict[str, Any] | None) -> tuple[str, str, int]:
    """``(stdout, stderr, exit status)`` of an answer: the adapter's own ``reply`` where it has
    one (Kiro: a denial is exit 2 and its reason on stderr), else the object as JSON, or the
    harness's "no decision" (``EMPTY``: ``{}`` for those that read an object every time)."""
    own = getattr(harness, "reply", None)
    if own is not None:
        answer: tuple[str, str, int] = own(out)
        return answer
    if out is None:
        empty = getattr(harness, "EMPTY", "")
        return (empty + "\n" if empty else ""), "", 0
    return json.dumps(out, ensure_ascii=False) + "\n", "", 0


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    from .usage import OneLineParser, wait

    parser = parser or OneLineParser(prog="tripwire hook")
    parser.epilog = ("tripwire hook serve --socket PATH runs a resident server that the command "
                     "hands events to when TRIPWIRE_HOOK_SOCKET names its socket.")
    parser.add_argument("harness", choices=HARNESSES)
    parser.add_argument("--store", metavar="PATH",
                        help="the SQLite store (default: $TRIPWIRE_STORE, else "
                             "$XDG_STATE_HOME/tripwire/hooks.sqlite3)")
    parser.add_argument("--mode", help="watchdog mode (default: enforce, hooks run unattended)")
    parser.add_argument("--config", metavar="FILE", help="TOML or JSON config file")
    parser.add_argument("--wait", metavar="SECONDS", type=wait,
                        help="longest wait for the store's locks (default: 2); under enforce a "
                             "call the store cannot record within it is denied")
    parser.add_argument("--no-interrupt", action="store_true",
                        help="codex: never interrupt the codex exec process of a halted "
                             "session (by default, under enforce, it gets SIGINT)")
    parser.add_argument("--install", action="store_true",
                        help="print the harness's hooks settings block (no event is read); "
                             "every option is checked first (exit 2 on a bad one)")
    parser.add_argument("--write", metavar="SETTINGS",
                        help="with --install: put the block into this settings file, in "
                             "place of tripwire's earlier entries (its directory must exist)")
    parser.add_argument("--uninstall", metavar="SETTINGS",
                        help="remove tripwire's entries for the harness from this settings "
                             "file")
    parser.add_argument("--authority", metavar="SOCKET",
                        help="a thin client of the authority listening on SOCKET (tripwire "
                             "hook serve --allow-user, run as another user): the event is "
                             "decided there, this process never opens a store (default: "
                             "$TRIPWIRE_AUTHORITY)")
    return parser


def _parse(argv: list[str]) -> argparse.Namespace:
    """The options, read by hand on the event path (argparse costs milliseconds to build);
    anything unusual goes to argparse for its usage message."""
    args: Any = SimpleNamespace(harness=None, store=None, mode=None, config=None, install=False,
                                write=None, wait=None, uninstall=None, no_interrupt=False,
                                authority=None)
    values = iter(argv)
    for arg in values:
        if arg in HARNESSES and args.harness is None:
            args.harness = arg
        elif arg in ("--store", "--mode", "--config", "--write", "--wait", "--uninstall",
                     "--authority"):
            value = next(values, None)
            if value is None:
                break
            if arg == "--wait":  # a plain number here; argparse (usage.wait) says what is not
                try:
                    args.wait = float(value)
                except ValueError:
                    break
                if not (math.isfinite(args.wait) and 0 < args.wait <= 60):
                    break
                continue
            setattr(args, arg[2:], value)
        elif arg == "--install":
            args.install = True
        elif arg == "--no-interrupt":
            args.no_interrupt = True
        else:
            break
    else:
        if args.harness is not None:
            return args  # type: ignore[no-any-return]  # a Namespace's attributes
    return build_parser().parse_args(argv)


def _usage(argv: list[str], stderr: TextIO) -> argparse.Namespace | int:
    """The options, or the exit status of a usage error. Installing, a usage error is exit 2
    (nothing written); on the event path it is exit 0 and no decision: every harness reads
    exit 2 as "block this call", so a hook with a bad option would block the agent."""
    import contextlib
    import io

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            args = _parse(argv)
    except SystemExit as exc:
        message = " ".join(said.getvalue().split())
        code = exc.code if isinstance(exc.code, int) else 2
        if code == 0 or any(a in ("--install", "--uninstall", "--write") for a in argv):
            stderr.write(said.getvalue())
            return code
        stderr.write(f"{message or 'tripwire hook: bad options'}; no decision\n")
        return 0
    if args.write and not args.install:
        stderr.write(f"tripwire hook {args.harness}: --write SETTINGS is an option of "
                     "--install (nothing was read or written)\n")
        return 2
    if args.install and args.uninstall:
        stderr.write(f"tripwire hook {args.harness}: --install and --uninstall exclude each "
                     "other\n")
        return 2
    return args


#: Characters of stdin a hook reads at most: a harness's payload (a tool's input and output,
#: which Claude Code and Codex cut long before this) fits many times over; more is never
#: decoded whole (``hook_closed.top_members`` reads its leading members), never held whole.
MAX_STDIN = 16 << 20


def main(argv: list[str], stdin: TextIO | None = None, stdout: TextIO | None = None,
         stderr: TextIO | None = None, *, close: bool = True, origin: int | None = None,
         probes: str | None = None, deadline: Any = None, timer: bool = False,
         owner: int | None = None) -> int:
    """Run one hook invocation. ``close=False`` leaves the store's connections open for the
    process exit to drop (closing the last connection checkpoints SQLite's WAL: milliseconds
    that every event would pay; auto-checkpoints keep the WAL bounded). ``origin``: the
    process the harness started for this event (the resident server's client; default: this
    process), whose ``codex exec`` ancestor a halt interrupts. ``probes``: where doctor's
    probe sessions are kept (a resident server's own directory; default: ``$TRIPWIRE_DOCTOR``
    when it names one). ``deadline``: a ``hook_closed.Deadline`` to arm (a resident server's,
    for the request; default: one of its own, with a timer thread when ``timer``: the
    command's process, which the timer ends). ``owner``: the user whose files the event's
    transcript must be, and whose ``codex exec`` alone a halt interrupts (an authority's
    request: its peer; default: this process's user)."""
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    if argv[:1] == ["serve"]:
        return _serve(argv[1:])
    args = _usage(argv, stderr)
    if isinstance(args, int):
        return args
    if args.install or args.uninstall:
        from .hook_install import install, uninstall

        return (install if args.install else uninstall)(_harness(args.harness), args, stdout,
                                                        stderr)
    text = stdin.read(MAX_STDIN + 1)
    authority = args.authority or os.environ.get(AUTHORITY_ENV, "").strip()
    if authority:
        return _thin(args, authority, text, stdout, stderr)
    served = _served(args, text)
    if served is not None:
        stdout.write(served["stdout"])
        stderr.write(served["stderr"])
        code: int = served["code"]
        return code
    harness = _harness(args.harness)
    empty = reply(harness, None)[0]  # "no decision"
    args.origin, args.interrupt, args.owner = origin or os.getpid(), None, owner
    args.probes = probes or _doctor_dir()
    from .hook_closed import Deadline

    if deadline is None:
        deadline = Deadline()
    deadline.configure(deadline.seconds, args.harness, empty)
    try:  # everything past here answers through the deadline, a failed import included
        deadline.configure(_deadline_seconds(args), args.harness, empty)
        if timer:
            deadline.start()
        # a harness that gives a denial's stderr to the model (Kiro) must not hand it the
        # operator's lines: they are kept aside, and written only with another answer
        aside = io.StringIO() if getattr(harness, "DENY_EXIT", None) else None
        if aside is None:
            out = _run(harness, args, text, close, stderr, deadline)
        else:
            import contextlib

            with contextlib.redirect_stderr(aside):
                out = _run(harness, args, text, close, aside, deadline)
    except Exception as exc:
        # fail open below enforce (SPEC §11.4): one line, no decision; under enforce a call
        # that could not be decided is denied (issue 36: an agent could cause the error)
        answer, line, code = deadline.answer(_one_line(exc))
        if deadline.settle():
            stderr.write(line)
            stdout.write(answer)
            return code
        return 0
    if not deadline.settle():
        return 0  # the deadline answered for it (a resident server's request, too late)
    answer, said, code = reply(harness, out)
    if aside is not None and code != harness.DENY_EXIT:
        said = aside.getvalue() + said
    stdout.write(answer)
    stderr.write(said)
    if args.interrupt is not None:
        _interrupt(args.interrupt, stdout, stderr)
    return code


AUTHORITY_ENV = "TRIPWIRE_AUTHORITY"  # hook_server's, not imported for it on the event path
#: Set by the native client when it could not reach the authority itself: the reason, so the
#: Python command it runs for the answer renders the failure without trying again.
AUTHORITY_DOWN_ENV = "TRIPWIRE_AUTHORITY_DOWN"
#: Seconds a thin client waits for the authority's answer: past the authority's own deadline
#: for an event (its --wait plus hook_closed.SLACK, 5 s by default), within the 10 s the
#: installed block gives the hook.
AUTHORITY_TIMEOUT = 8.0


def _thin(args: argparse.Namespace, authority: str, text: str, stdout: TextIO,
          stderr: TextIO) -> int:
    """A thin client's event: the authority's answer, or the failure's (never the store)."""
    reason = os.environ.get(AUTHORITY_DOWN_ENV, "").strip()
    if not reason:
        from .hook_server import Request, ask

        try:
            code, out, err = ask(authority, Request([args.harness], "", {}, text),
                                 AUTHORITY_TIMEOUT)
        except (OSError, ValueError) as exc:
            what = "did not answer in time" if isinstance(exc, TimeoutError) else \
                f"cannot be reached ({_one_line(exc)})" if isinstance(exc, OSError) else \
                f"answered no hook answer ({_one_line(exc)})"
            reason = f"the authority at {authority} {what}"
        else:
            stdout.write(out)
            stderr.write(err)
            return code
    return _authority_down(args, reason, text, stdout, stderr)


def _authority_down(args: argparse.Namespace, reason: str, text: str, stdout: TextIO,
                    stderr: TextIO) -> int:
    """No answer from the authority: under enforce (the client's ``--mode``, enforce by
    default) a call is denied, with a reason for the model and one line for the operator;
    otherwise no decision and the line."""
    from .hook_closed import Deadline

    harness = _harness(args.harness)
    deadline = Deadline(harness=args.harness, empty=reply(harness, None)[0])
    try:
        payload, _ = _payload(text)
        name, event = harness.parse(payload)
    except Exception as exc:  # bad input: no event to deny, as ever
        stderr.write(f"tripwire hook {args.harness}: {reason}; {_one_line(exc)}; no "
                     "decision\n")
        stdout.write(deadline.empty)
        return 0
    _arm(deadline, harness, event, name, (args.mode or "enforce").strip().lower() == "enforce")
    answer, line, code = deadline.answer(reason)
    stderr.write(line)
    stdout.write(answer)
    return code


def authority_request(own: argparse.Namespace, request: Any, stdout: TextIO, stderr: TextIO,
                      origin: int | None, owner: int | None) -> int:
    """One event an authority took from a thin client: only its harness is the client's; the
    store, config, mode, wait and interrupt are the authority's own options (``own``); the
    transcript is read only when it is the client's user's file."""
    harness = next((a for a in request.argv if a in HARNESSES), "")  # the rest is ignored
    if not harness:
        stderr.write(f"tripwire hook: the authority takes a harness ({', '.join(HARNESSES)}), "
                     "not this request; no decision\n")
        return 0
    argv = [harness, "--store", own.store]
    for option in ("mode", "config"):
        if getattr(own, option):
            argv += [f"--{option}", getattr(own, option)]
    if own.wait is not None:
        argv += ["--wait", repr(own.wait)]
    if own.no_interrupt:
        argv += ["--no-interrupt"]
    import contextlib

    with contextlib.redirect_stderr(stderr):
        return main(argv, io.StringIO(request.stdin), stdout, stderr, close=False,
                    origin=origin, owner=owner, probes=own.probes)


def _doctor_dir() -> str | None:
    """``$TRIPWIRE_DOCTOR`` when it names a directory: the doctor's scratch for its probes."""
    value = os.environ.get(PROBE_ENV, "")
    return value if os.path.isabs(value) and os.path.isdir(value) else None


def probe_store(store: str, scratch: str) -> str:
    """The store a probe of ``tripwire doctor`` is kept in: ``probe.sqlite3`` in ``scratch``,
    after checking that the real store would take the event (it opens, sealed with the key in
    use; or, not made yet, it can be): the probe leaves the real store as it found it, and a
    store the hook could not use is still the probe's problem (``StoreError``)."""
    from ..errors import StoreError

    if os.path.lexists(store):
        from ..durability.open import open_existing

        open_existing(store).close()
    else:
        parent = os.path.dirname(os.path.abspath(store))
        while not os.path.isdir(parent) and os.path.dirname(parent) != parent:
            parent = os.path.dirname(parent)
        if not os.access(parent, os.W_OK | os.X_OK):
            raise StoreError(f"{store}: cannot be made ({parent} is not writable)")
    return os.path.join(scratch, "probe.sqlite3")


def _interrupt(pid: int, stdout: TextIO, stderr: TextIO) -> None:
    """The last resort for a harness no hook output stops (Codex): SIGINT to its ``codex
    exec`` process, after the denial is written (the turn is aborted, codex exits 1)."""
    import signal

    stdout.flush()
    try:
        os.kill(pid, signal.SIGINT)
    except OSError as exc:
        stderr.write(f"tripwire hook codex: the session is halted; interrupting codex exec "
                     f"(pid {pid}) failed: {_one_line(exc)}\n")
        return
    stderr.write(f"tripwire hook codex: the session is halted: codex exec (pid {pid}) "
                 "interrupted (SIGINT)\n")


def _served(args: argparse.Namespace, text: str) -> dict[str, Any] | None:
    """The resident server's answer when ``$TRIPWIRE_HOOK_SOCKET`` names one
    (``hook_server``)."""
    path = os.environ.get("TRIPWIRE_HOOK_SOCKET", "").strip()
    if not path:
        return None
    from .hook_server import REQUEST_ENV, Request, call

    env = {k: os.environ.get(k, "") for k in REQUEST_ENV}
    return call(path, Request(served_argv(args, os.getcwd(), env), os.getcwd(), env, text))


def served_argv(args: argparse.Namespace, cwd: str, env: Mapping[str, str]) -> list[str]:
    """The arguments the server runs an event with: the store and config as absolute paths,
    resolved as the client would resolve them (against its directory; the default store from
    its variables)."""
    def absolute(path: str) -> str:
        return os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))

    argv = [args.harness, "--store", absolute(args.store or default_store(env))]
    if args.mode:
        argv += ["--mode", args.mode]
    if args.config:
        argv += ["--config", absolute(args.config)]
    if args.wait is not None:
        argv += ["--wait", repr(args.wait)]
    if args.no_interrupt:
        argv += ["--no-interrupt"]
    return argv


def served_request(request: Any, stdout: TextIO, stderr: TextIO, origin: int | None,
                   probes: str | None = None) -> int:
    """One event the resident server took (a ``hook_server.Request``): its arguments resolved
    as its client would (``served_argv``), then the command, the store kept open."""
    args = _usage(request.argv, stderr)
    if isinstance(args, int):
        return args
    if args.install or args.uninstall:
        stderr.write("tripwire hook: --install and --uninstall run in the command itself, not "
                     "through the resident server\n")
        return 2
    argv = served_argv(args, request.cwd or os.getcwd(), request.env)
    import contextlib

    with contextlib.redirect_stderr(stderr):  # the logger's lines are the event's, as ever
        return main(argv, io.StringIO(request.stdin), stdout, stderr, close=False,
                    origin=origin, probes=probes)


def _serve(argv: list[str]) -> int:
    from .usage import OneLineParser

    parser = OneLineParser(prog="tripwire hook serve", description=(
        "Answer hook invocations over a Unix socket (set TRIPWIRE_HOOK_SOCKET to it in the "
        "harness's environment), so each event skips Python's imports."))
    parser.add_argument("--socket", required=True, metavar="PATH",
                        help="the Unix socket to listen on (made with mode 0600; a stale one "
                             "is replaced)")
    parser.add_argument("--idle-timeout", type=float, metavar="SECONDS",
                        help="exit after this long without a request (default: never)")
    parser.add_argument("--allow-user", metavar="USER[,USER]",
                        help="serve as the authority of these users' thin clients (tripwire "
                             "hook HARNESS --authority PATH): the socket is open to all, "
                             "SO_PEERCRED refuses every other user, and the store, config and "
                             "mode are this server's own (the options below)")
    parser.add_argument("--store", metavar="PATH",
                        help="with --allow-user: the authority's SQLite store (default: "
                             "$TRIPWIRE_STORE, else $XDG_STATE_HOME/tripwire/hooks.sqlite3)")
    parser.add_argument("--mode", help="with --allow-user: the watchdog mode (default: "
                                       "enforce)")
    parser.add_argument("--config", metavar="FILE",
                        help="with --allow-user: TOML or JSON config file")
    from .usage import wait

    parser.add_argument("--wait", metavar="SECONDS", type=wait,
                        help="with --allow-user: longest wait for the store's locks")
    parser.add_argument("--no-interrupt", action="store_true",
                        help="with --allow-user: never interrupt a halted codex exec")
    args = parser.parse_args(argv)
    from .hook_server import serve

    if args.allow_user is None:
        for option in ("store", "mode", "config", "wait"):
            if getattr(args, option) is not None:
                parser.error(f"--{option} is an option of --allow-user (a same-user server "
                             "takes each event's own)")
        return serve(args.socket, served_request, args.idle_timeout)
    allow = _users(args.allow_user)
    if isinstance(allow, str):
        parser.error(f"--allow-user {args.allow_user}: {allow}")
        return 2  # parser.error exits
    from .hook_install import authority_problem

    args.store = os.path.abspath(os.path.expanduser(args.store or default_store()))
    if args.config:
        args.config = os.path.abspath(args.config)
    problem = authority_problem(args)
    if problem is not None:
        parser.error(problem)
    import functools
    import tempfile

    # doctor's probe sessions, from any client, are kept apart from the real store
    args.probes = tempfile.mkdtemp(prefix="tripwire-authority-probes-")
    return serve(args.socket, functools.partial(authority_request, args), args.idle_timeout,
                 allow=allow)


def _users(names: str) -> frozenset[int] | str:
    """The uids of ``USER[,USER]`` (names or numbers), or what is wrong with them."""
    import pwd

    uids = set()
    for name in (n.strip() for n in names.split(",")):
        if not name:
            return "an empty user name"
        try:
            uids.add(int(name) if name.isdigit() else pwd.getpwnam(name).pw_uid)
        except KeyError:
            return f"no such user {name!r}"
    return frozenset(uids)


def default_store(env: Mapping[str, str] | None = None) -> str:
    """``$TRIPWIRE_STORE``, else ``$XDG_STATE_HOME/tripwire/hooks.sqlite3`` (XDG's default
    state directory is ``~/.local/state``); ``env``: the variables to read (this process's)."""
    env = os.environ if env is None else env
    store = env.get("TRIPWIRE_STORE", "").strip()
    if store:
        return store
    home = env.get("HOME", "").strip() or os.path.expanduser("~")
    base = env.get("XDG_STATE_HOME", "").strip() or os.path.join(home, ".local", "state")
    return os.path.join(base, "tripwire", "hooks.sqlite3")


def _deadline_seconds(args: argparse.Namespace) -> float:
    """How long an invocation may take before its deadline answers for it."""
    from ..harnesses.hooks._session import WAIT
    from .hook_closed import SLACK

    return (args.wait or WAIT) + SLACK


def _payload(text: str) -> tuple[dict[str, Any], bool]:
    """The payload, and whether it was decoded whole: one over ``MAX_STDIN`` characters, or
    too large to decode in the memory there is, is read as its leading members only."""
    from .hook_closed import top_members

    if len(text) <= MAX_STDIN:
        try:
            payload = json.loads(text)
        except MemoryError:
            return top_members(text), False
        except ValueError:
            raise ValueError("stdin is not a JSON hook payload") from None
        if not isinstance(payload, dict):
            raise ValueError("stdin is not a JSON object")
        return payload, True
    return top_members(text), False


def _run(harness: Any, args: argparse.Namespace, text: str, close: bool = True,
         stderr: TextIO | None = None, deadline: Any = None) -> dict[str, Any] | None:
    payload, whole = _payload(text)
    name, event = harness.parse(payload)
    store = args.store or default_store()
    try:
        config = _config(args)
    except Exception:  # a config the agent broke: the command's own mode says what it means
        _arm(deadline, harness, event, name, (args.mode or "enforce").strip().lower() ==
             "enforce")
        raise
    _arm(deadline, harness, event, name, _enforced(config))
    if not whole:
        verdict = _recorded_halt(store, event, args.wait) if event.kind == "call" else None
        if verdict is None:
            raise ValueError(f"stdin is over {MAX_STDIN} characters (or too large to decode): "
                             "not a payload tripwire can observe")
        if stderr is not None:
            stderr.write(f"tripwire hook {harness.HARNESS}: stdin is over {MAX_STDIN} "
                         "characters; the store records a halt, so the call is denied\n")
        out: dict[str, Any] | None = harness.render(event, name, verdict)
        return out
    try:
        verdict, problem = _apply(harness, args, store, event, config, close)
    except Exception as exc:
        from ..errors import StoreError

        if event.kind != "call":
            raise
        verdict = _recorded_halt(store, event, args.wait)  # a recorded halt still denies
        if verdict is None:
            if not isinstance(exc, StoreError) or not _enforced(config):
                raise
            verdict, problem = _unrecorded(str(exc)), None
            if stderr is not None:
                stderr.write(f"tripwire hook {harness.HARNESS}: {_one_line(exc)}; the call is "
                             "denied: under enforce a call the store cannot record does not "
                             "run\n")
        elif stderr is not None:
            stderr.write(f"tripwire hook {harness.HARNESS}: {_one_line(exc)}; the store "
                         "records a halt, so the call is denied\n")
    else:
        if problem is not None:
            # the decision holds in this process only: the store did not take its rows
            if event.kind != "call" or not _enforced(config):
                raise _Unrecorded(problem)
            if verdict.deny is None:
                verdict = _unrecorded(problem)
            if stderr is not None:
                stderr.write(f"tripwire hook {harness.HARNESS}: {_one_line(problem)}; the call "
                             "is denied: under enforce a call the store cannot record does "
                             "not run\n")
    out = harness.render(event, name, verdict)
    return out


def _arm(deadline: Any, harness: Any, event: Any, name: str, enforce: bool) -> None:
    """Tell the invocation's deadline what its event's fallback is: under enforce a call's
    denial (``hook_closed``), else no decision."""
    if deadline is None or event.kind != "call" or not enforce:
        return
    from ..harnesses.hooks._model import Verdict
    from .hook_closed import undecided

    def deny(reason: str) -> tuple[str, str, int]:
        return reply(harness, harness.render(event, name, Verdict(deny=undecided(reason))))

    deadline.arm(deny)


class _Unrecorded(Exception):
    """The store did not take this event's rows (fail open below enforce: one line)."""


def _enforced(config: Any) -> bool:
    from ..base.modes import Mode

    return bool(config.resolve().mode == Mode.ENFORCE)


def _unrecorded(problem: str) -> Any:
    """The denial of a call the store cannot record, for the model."""
    from ..harnesses.hooks._model import Verdict
    from .hook_closed import undecided

    return Verdict(deny=undecided(_one_line(problem), store=True))


def _apply(harness: Any, args: argparse.Namespace, store: str, event: Any, config: Any,
           close: bool = True) -> tuple[Any, str | None]:
    """The event's verdict, and why its rows were not all recorded (None: they were)."""
    from ..base.log import LOGGER, ONCE
    from ..durability.chain import DEFAULT_KEY_NOTICE
    from ..harnesses.hooks._session import WAIT, HookSession
    from ..harnesses.hooks._transcript import NotRead, transcript_usage

    global _filtered
    if not _filtered:  # said once at --install, not on every event of every session
        _filtered = True
        LOGGER.addFilter(lambda record: DEFAULT_KEY_NOTICE not in record.getMessage())

    if args.probes and event.session.startswith(PROBE_PREFIX):
        store = probe_store(store, args.probes)
    os.makedirs(os.path.dirname(os.path.abspath(store)), exist_ok=True)
    with HookSession(store, event.session, config, close=close,
                     wait=args.wait or WAIT, parent=event.parent) as session:
        try:
            usage, session.state.transcript = transcript_usage(
                harness.HARNESS, event.transcript_path, session.state.transcript,
                session.state.transcript_memo, getattr(args, "owner", None))
        except NotRead as unread:  # the agent's to write: the payloads are still watched
            usage = []
            LOGGER.warning("the transcript cannot be read (%s): the session is watched from "
                           "its hook payloads alone, and its spend is not counted", unread,
                           extra=ONCE)
        verdict = session.apply(event, usage)
        if verdict.halt is not None and event.kind == "call" and not args.no_interrupt and \
                getattr(harness, "INTERRUPTS", False) and _enforced(config) and \
                not os.environ.get(PROBE_ENV) and \
                not event.session.startswith(PROBE_PREFIX):  # doctor's synthetic session
            args.interrupt = session.interrupt_once(_own(harness.exec_ancestor(args.origin),
                                                        args.owner))
    return verdict, session.problem


def _own(pid: int | None, owner: int | None) -> int | None:
    """``pid`` when it is ``owner``'s process (an authority signals no other user's), else
    None; any ``pid`` when there is no ``owner``."""
    if pid is None or owner is None:
        return pid
    try:
        return pid if os.stat(f"/proc/{pid}").st_uid == owner else None
    except OSError:
        return None


def _recorded_halt(store: str, event: Any, wait: float | None = None) -> Any:
    """The denial of a call of a session halted in the store, read with as little as can
    fail; None when the store shows no halt (or cannot be read either)."""
    from ..base.log import LOGGER

    LOGGER.disabled = True  # this read's own failure is the fail-open line the caller writes
    try:
        from ..durability.fold import fold_history
        from ..durability.sqlite import SQLiteStore
        from ..harnesses.hooks._model import Verdict
        from ..harnesses.hooks._session import WAIT

        with SQLiteStore(store, read_only=True, timeout=wait or WAIT) as s:
            folded = fold_history(s.history(event.session))
        if not folded.halted_by:
            return None
        return Verdict(deny="[watchdog] This session was halted for a runaway pattern and "
                            "refuses further tool calls.", halt=folded.reason)
    except Exception:
        return None
    finally:
        LOGGER.disabled = False


def _one_line(exc: BaseException | str) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
