"""A session's lock (``Guardrails.lock``) and the class ``Guardrails(...)`` returns, on both
engines: the reference's ``threading.RLock``, and the native core's lock held in the session's
own object (``_guardrails.pxi``), which must behave the same way."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from tripwire import Guardrails, GuardrailsConfig
from tripwire.fleet.fleet import Fleet
from tripwire.session.guardrails import guardrails_class

CALL = ("read_file", '{"path": "src/a.py"}')


def guardrails(implementation: str) -> Guardrails:
    return Guardrails(GuardrailsConfig(mode="warn", unattended=False),
                      implementation=implementation)


def from_another_thread(fn: Callable[[], object]) -> object:
    out: list[object] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(10)
    assert not t.is_alive()
    return out[0]


def test_guardrails_is_the_engines_class(implementation: str) -> None:
    g = guardrails(implementation)
    expected = {"native": "NativeGuardrails", "python": "PythonGuardrails"}[implementation]
    assert type(g).__name__ == expected and type(g) is guardrails_class(implementation)
    assert isinstance(g, Guardrails) and g.watchdog is not None
    assert g.watchdog.implementation == implementation


def test_the_lock_is_reentrant_and_excludes_other_threads(implementation: str) -> None:
    g = guardrails(implementation)
    assert g.lock.acquire() is True
    assert g.lock.acquire() is True  # re-entrant
    assert from_another_thread(lambda: g.lock.acquire(blocking=False)) is False
    assert from_another_thread(lambda: g.lock.acquire(timeout=0.05)) is False
    g.lock.release()  # held once still
    assert from_another_thread(lambda: g.lock.acquire(blocking=False)) is False
    g.lock.release()

    def take_and_give() -> bool:
        taken = g.lock.acquire(blocking=False)
        g.lock.release()
        return taken

    assert from_another_thread(take_and_give) is True


def test_releasing_a_lock_not_held_raises(implementation: str) -> None:
    g = guardrails(implementation)
    with pytest.raises(RuntimeError):
        g.lock.release()
    with g.lock:

        def release() -> str:
            try:
                g.lock.release()
            except RuntimeError:
                return "refused"
            return "released"

        assert from_another_thread(release) == "refused"  # held by this thread, not that one
    assert from_another_thread(lambda: g.lock.acquire(blocking=False)) is True


def test_an_observation_waits_for_the_thread_holding_the_lock(implementation: str) -> None:
    g = guardrails(implementation)
    g.start_turn()
    started, done = threading.Event(), threading.Event()
    decisions = []

    def observe() -> None:
        started.set()
        decisions.append(g.on_call(*CALL))
        decisions.append(g.on_result("read_file", payload="x"))
        decisions.append(g.on_text("Reading it."))
        done.set()

    with g.lock:
        t = threading.Thread(target=observe)
        t.start()
        assert started.wait(10)
        assert not done.wait(0.2)  # blocked: nothing observed while the lock is held
        assert g.watchdog is not None and g.watchdog.events == 1  # start_turn's event only
    t.join(10)
    assert done.is_set() and [d.proceed for d in decisions] == [True, True, True]
    assert g.watchdog.events == 4


def test_many_threads_on_one_session_lose_no_observation(implementation: str) -> None:
    g = guardrails(implementation)
    g.start_turn()

    def work(t: int) -> None:
        for i in range(200):
            with g.lock:  # held across a call and its result, as a batch holds it
                g.on_call("read_file", {"path": f"{t}/{i}.py"})
                if i % 50 == 0:
                    time.sleep(0.001)  # hand the GIL over while holding the lock
                g.on_result("read_file", payload=f"{t} {i}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert g.watchdog is not None and g.watchdog.events == 1 + 4 * 200 * 2


def test_fleet_on_call_notes_when_the_session_was_used(implementation: str) -> None:
    f = Fleet(GuardrailsConfig(mode="warn", unattended=False), implementation=implementation)
    before = time.monotonic()
    assert f.on_call("s1", *CALL).proceed
    g = f.session("s1")
    used = g.last_used
    assert before <= used <= time.monotonic()
    assert f.evict_idle(3600) == 0 and "s1" in f  # used just now
    assert f.on_call("s1", *CALL).proceed and g.last_used >= used
    assert g.watchdog is not None and g.watchdog.events == 2


def test_the_observations_are_the_engine_cores(implementation: str) -> None:
    """on_call, on_result and on_text are the engine's core's (the concrete class's first
    base: ``_reference_guardrails`` or ``_guardrails.pxi``, twins); ``Guardrails`` only
    declares them, so neither engine can run the other's by inheritance."""
    cls = guardrails_class(implementation)
    core = cls.__mro__[1]
    assert core.__name__ == "GuardrailsCore" and cls.__mro__[2] is Guardrails
    assert core.__module__ == {"native": "tripwire._native",
                               "python": "tripwire.session.core"}[implementation]
    for name in ("on_call", "on_result", "on_text"):
        assert name in vars(core) and name not in vars(Guardrails)


def test_a_subclass_of_guardrails_itself_has_no_core() -> None:
    class Bare(Guardrails):
        pass

    with pytest.raises(TypeError, match="Bare: subclass PythonGuardrails or NativeGuardrails"):
        Bare(GuardrailsConfig(mode="warn", unattended=False))
