"""The engine's text ring (the recent calls' name and args, for cycle and density texts):
what it holds and that what it holds stays visible to the garbage collector.

The native engine keeps the ring in one tuple whose slots it replaces in place; a collection
untracks a tuple holding only str and None, so a ring must be tracked again when a call's
args can be part of a reference cycle, or such a cycle would never be collected."""

from __future__ import annotations

import gc
import json
import weakref

from tripwire import Watchdog


class Args(dict):  # a dict args (weak-referenceable) that a cycle can run through
    pass


def test_a_cycle_through_call_args_held_by_the_ring_is_collected(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    for i in range(3):
        wd.observe_call("read_file", json.dumps({"path": f"a{i}.py"}))
    gc.collect()  # a ring holding only str and None may be untracked here
    args = Args(path="b.py")
    args["self"] = args  # a cycle, reachable from the ring only
    wd.observe_call("read_file", args)
    dead = weakref.ref(args)
    del args
    gc.collect()
    assert dead() is not None  # the ring still holds it
    assert wd.recent_call(0)[1] is dead()
    for i in range(40):  # more calls than the ring holds: it drops the args
        wd.observe_call("grep", json.dumps({"pattern": f"p{i}"}))
    gc.collect()
    assert dead() is None


def test_a_cycle_from_the_watchdog_through_its_ring_is_collected(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    gc.collect()
    args = Args(path="c.py")
    args["watchdog"] = wd  # watchdog -> ring -> args -> watchdog
    wd.observe_call("read_file", args)
    dead = weakref.ref(args)  # (a native watchdog takes no weak reference: its args do)
    del wd, args
    gc.collect()
    assert dead() is None


def test_the_ring_returns_the_objects_it_was_given(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    calls = [("read_file", json.dumps({"path": f"m{i}.py"})) for i in range(30)]
    for name, args in calls:
        wd.observe_call(name, args)
    for age in range(12):  # the default ring: the density window (12) and 4 x 3 cycle calls
        name, args = wd.recent_call(age)
        assert name is calls[-1 - age][0] and args is calls[-1 - age][1]
