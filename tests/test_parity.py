"""The pieces of a signal agree across the catalogue, the reference and the native core.

The Python catalogue (``tripwire.signals``) is the one place the signal order — the bit order of
every fired mask — is written; the native core declares its bits and settings in C++, and these
tests fail when either side gains, loses or reorders one.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from tripwire import SIGNALS, Watchdog, signals
from tripwire.engine import reference as _reference
from tripwire.signals.settings import EngineSettings

native = pytest.importorskip("tripwire._native", reason="the native core is not built")

#: Native-only members, and why: the reference has no native state to measure.
NATIVE_ONLY = {"state_bytes"}
#: EngineSettings fields the native Settings struct does not carry, and why: exemptions are
#: decided in the bindings (a Python set of names), not in C++; the JSON keys an answer ignores
#: are handed to the scanner per result (a native key list per tool, made by the bindings);
#: a tool's per-tool rule is handed to the core per call and result (a ToolRule the bindings
#: make from ToolRules.lookup, once per name).
PYTHON_ONLY_SETTINGS = {"exempt_tools", "shell_tools", "known_tools", "ignore_json_keys",
                        "ignore_json_keys_by_tool", "tool_rules"}
#: EngineSettings fields [results] resolves (SPEC §12.1), not a signal module.
RESULTS_SETTINGS = {"answer_volatile", "ignore_json_keys", "ignore_json_keys_by_tool"}


def test_native_signal_bits_are_the_catalogue_order() -> None:
    assert list(native.SIGNAL_BITS.items()) == [(s.id, 1 << i) for i, s in enumerate(SIGNALS)]
    assert [s.bit for s in SIGNALS] == [1 << s.index for s in SIGNALS]
    assert [s.index for s in SIGNALS] == list(range(len(SIGNALS)))


def test_reference_bits_come_from_the_catalogue() -> None:
    bits = [_reference.REPEAT, _reference.CYCLE, _reference.DENSITY, _reference.NAME,
            _reference.FAILURE, _reference.NO_OP, _reference.NO_NEW_STATE, _reference.SILENCE,
            _reference.REPEATED_FAILURE, _reference.RECYCLED, _reference.UNKNOWN_TOOL,
            _reference.REPEATED_TEXT, _reference.EMPTY_RESPONSES, _reference.COMPACTION_STORM,
            _reference.PERSISTENT_WARNINGS, _reference.LOOPING_TEXT]
    assert bits == [s.bit for s in SIGNALS]


def test_catalogue_lists_each_signal_module_once() -> None:
    assert [m.SPEC.id for m in signals.CATALOGUE] == [s.id for s in SIGNALS]
    assert len({s.id for s in SIGNALS}) == len(SIGNALS)
    for module, spec in zip(signals.CATALOGUE, SIGNALS, strict=True):
        assert dataclasses.replace(module.SPEC, index=spec.index) == spec
        assert spec.texts is module.texts and spec.resolve is module.resolve
        assert all(k.why for k in spec.knobs), f"{spec.id}: every default says why"


def test_settings_fields_agree() -> None:
    fields = EngineSettings._fields
    native_fields = tuple(f for f in fields if f not in PYTHON_ONLY_SETTINGS)
    assert native_fields == native.SETTINGS_FIELDS
    assert 4 * len(native_fields) == native.SETTINGS_BYTES  # all 32-bit: no undeclared field
    # every field but the two masks of the whole catalogue (the signals enabled, and those
    # alerting as warn) and [results]' is resolved by exactly one signal module
    default = signals.WatchdogConfig()
    owners: dict[str, str] = {}
    resolved: dict[str, object] = {}
    for spec in SIGNALS:
        out = spec.resolve(lambda knob, s=spec.id: default.value(s, knob), resolved)
        for name in out:
            assert name not in owners, f"{name} resolved by {owners[name]} and {spec.id}"
            owners[name] = spec.id
        resolved.update(out)
    # tool_rules: the config's [tools] (signals/tool_rules.py), not one signal's;
    # warn_signals: what alerts as warn under the config (persistent-warnings counts those)
    assert set(owners) == set(fields) - {"enabled", "tool_rules", "warn_signals"} - RESULTS_SETTINGS
    assert set(signals.ResultsConfig().settings()) == RESULTS_SETTINGS


def _public(obj: object, *, callables_only: bool = False) -> set[str]:
    names = {n for n in dir(obj) if not n.startswith("_")}
    if callables_only:
        names = {n for n in names if callable(getattr(obj, n))}
    return names


def test_engine_modules_export_the_same_api() -> None:
    assert sorted(native.__all__) == sorted(_reference.__all__)
    for name in native.__all__:
        n, r = getattr(native, name), getattr(_reference, name)
        assert type(n) is type(r) or (inspect.isclass(n) and inspect.isclass(r)) or (
            callable(n) and callable(r)), name


def test_engines_have_the_same_public_members() -> None:
    wn, wr = Watchdog(implementation="native"), Watchdog(implementation="python")
    assert _public(wn) - NATIVE_ONLY == _public(wr)
    assert _public(native.TokenEstimator()) == _public(_reference.TokenEstimator())
    assert _public(native.Batch([]), callables_only=True) == \
        _public(_reference.Batch([]), callables_only=True)
    from tripwire.fleet.table import SessionTable, session_table_class

    assert session_table_class("native") is native.SessionTable
    assert _public(native.SessionTable(str)) == _public(SessionTable(str))


def test_withdrawal_is_a_property_of_the_spec() -> None:
    assert {s.id for s in SIGNALS if s.withdrawn_by_words} == signals.WITHDRAWN_BY_WORDS
    assert {"tools-without-text"} == signals.WITHDRAWN_BY_WORDS
