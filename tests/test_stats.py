"""Statistics mode of the engine (issue 11): per session and signal, the peak of the quantity the
signal's threshold is compared with. Exact hand-made cases on both engines, the native core
against the reference on random traces, and the statistic's meaning checked against the
detectors themselves (a signal without stand-downs trips at threshold T iff its peak >= T)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_differential import _replay, configs, events

from tripwire import Watchdog, WatchdogConfig
from tripwire.signals import SIGNAL_IDS

REPEAT, CYCLE, DENSITY, NAME, FAILURE, NO_OP, STALE, SILENCE, SAME_ERROR, RECYCLED = range(10)


def _stats(implementation: str, trace: list[tuple], config: WatchdogConfig | None = None):
    wd = Watchdog(config, implementation=implementation)
    wd.enable_stats()
    alerts = _replay(wd, trace)
    return wd.stats, alerts


def call(name: str, args: str = "{}") -> tuple:
    return ("call", name, args)


def result(error=None, no_op=False, payload="ok", name="t") -> tuple:
    return ("result", name, error, no_op, payload)


def test_stats_are_off_until_enabled(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    wd.observe_call("a", "{}")
    assert wd.stats is None
    wd.enable_stats()
    assert wd.stats == (0,) * 16  # only what comes after enabling is measured


def test_repeat_run_and_path_respellings(implementation: str) -> None:
    trace = [call("read", '{"path":"main.go"}'), call("read", '{"path":"./main.go"}'),
             call("read", '{"path":"/w/main.go"}'), call("grep", '{"pattern":"x"}'),
             call("read", '{"path":"a.go"}')]
    stats, alerts = _stats(implementation, trace)
    assert stats[REPEAT] == 3
    assert stats[NAME] == 3
    assert stats[SILENCE] == 5
    assert stats[DENSITY] == 2  # ./main.go cleans to main.go; /w/main.go is another key
    assert stats[CYCLE] == 0
    assert alerts == []


def test_cycle_laps_count_complete_laps_of_the_block(implementation: str) -> None:
    ab = [call("edit", '{"path":"a"}'), call("test", '{"cmd":"t"}')]
    stats, alerts = _stats(implementation, ab * 4 + ab[:1])  # 4 laps and a half
    assert stats[CYCLE] == 4
    assert stats[DENSITY] == 5  # edit: 5 of the 9 calls
    assert [a[0] for a in alerts] == ["alternating-tool-cycle"]
    assert alerts[0][5] == 5  # tripped at the 3rd lap's last call (event 5)


def test_a_block_of_one_repeated_call_is_not_a_cycle(implementation: str) -> None:
    stats, _ = _stats(implementation, [call("ls")] * 9)
    assert stats[CYCLE] == 0
    assert stats[REPEAT] == 9
    assert stats[DENSITY] == 9


def test_three_call_block_and_a_reset_clears_the_laps(implementation: str) -> None:
    abc = [call("a"), call("b"), call("c")]
    stats, _ = _stats(implementation, abc * 2 + [("reset",)] + abc + [call("a"), call("b")])
    assert stats[CYCLE] == 2  # two laps before the reset; after it 1 lap and 2/3
    assert stats[REPEAT] == 1


def test_density_counts_the_busiest_window(implementation: str) -> None:
    # x seven times among twelve calls, then x drifts out of the window
    trace = [call("x"), call("y1"), call("x"), call("y2"), call("x"), call("y3"), call("x"),
             call("y4"), call("x"), call("x"), call("y5"), call("x")] + [call(f"z{i}") for i in range(12)]
    stats, alerts = _stats(implementation, trace)
    assert stats[DENSITY] == 7
    assert all(a[0] != "dominant-tool-call" for a in alerts)  # 7 < 8
    # one more x: the last 12 calls hold 8 of them
    stats8, alerts8 = _stats(implementation, trace[:11] + [call("x")] * 3)
    assert stats8[DENSITY] == 8
    assert [(a[0], a[5]) for a in alerts8 if a[0] == "dominant-tool-call"] == [
        ("dominant-tool-call", 13)]


def test_result_streaks(implementation: str) -> None:
    trace = [result("boom"), call("a"), result("boom"), result("boom"), result(None),
             result(no_op=True), result(no_op=True), result("boom"), result(no_op=True),
             result(payload="P"), result(payload="P"), result(payload="P"), ("turn_end",),
             result(payload="P"), result(payload="P")]
    stats, alerts = _stats(implementation, trace)
    assert stats[FAILURE] == 3  # calls between failures do not break the streak
    assert stats[NO_OP] == 3  # a failure neither counts nor resets it
    assert stats[STALE] == 2  # P seen twice more in the first turn; the turn end forgets it
    assert stats[SAME_ERROR] == 3  # the same "boom" three times before the success
    # the peaks count the failure streak's run; its alert stood down for the one error (§12.3)
    assert [(a[0], a[5]) for a in alerts] == [("repeated-failure", 3), ("no-op-streak", 8)]


def test_silence_run_is_cleared_by_words_only(implementation: str) -> None:
    trace = [call(f"t{i}") for i in range(5)] + [("text", "  \n")] + [call("u")] * 2 + \
        [("text", "Found it.")] + [call("v")]
    stats, _ = _stats(implementation, trace)
    assert stats[SILENCE] == 7
    assert stats[NAME] == 2


# --------------------------------------------------------------------------------------------
# Differential and meaning


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events(), configs())
def test_native_and_reference_stats_agree(trace: list[tuple], config: WatchdogConfig) -> None:
    fast, fast_alerts = _stats("native", trace, config)
    spec, spec_alerts = _stats("python", trace, config)
    assert fast == spec
    assert fast_alerts == spec_alerts


#: Signals with no stand-down or exemption: the threshold is compared with exactly this
#: quantity. (repeated-tool-call is exempt while its run polls changing output, SPEC §10.24,
#: and tool-failure-streak stands down for repeated-failure's identical failures, §12.3: their
#: peaks bound their trips from above, tested with the stand-downs below.)
EXACT = {"no-op-streak": NO_OP, "no-new-state": STALE, "tools-without-text": SILENCE,
         "repeated-failure": SAME_ERROR}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events(), st.sampled_from(sorted(EXACT)), st.integers(2, 8))
def test_a_signal_without_stand_downs_trips_iff_its_peak_reaches_the_threshold(
    trace: list[tuple], signal: str, threshold: int
) -> None:
    config = WatchdogConfig(signals={signal: {"threshold": threshold}})
    stats, alerts = _stats("python", trace, config)
    tripped = any(a[0] == signal for a in alerts)
    assert tripped == (stats[EXACT[signal]] >= threshold)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events(), st.integers(2, 8))
def test_signals_with_stand_downs_trip_only_at_or_past_their_peak(
    trace: list[tuple], threshold: int
) -> None:
    config = WatchdogConfig(signals={
        "repeated-tool-call": {"threshold": threshold},
        "repeated-tool-name": {"threshold": threshold},
        "dominant-tool-call": {"threshold": threshold},
        "alternating-tool-cycle": {"cycles": min(threshold, 4)},
        "tool-failure-streak": {"threshold": threshold},
    })
    stats, alerts = _stats("python", trace, config)
    fired = {a[0] for a in alerts}
    if "tool-failure-streak" in fired:
        assert stats[FAILURE] >= threshold
    if "repeated-tool-call" in fired:
        assert stats[REPEAT] >= threshold
    if "repeated-tool-name" in fired:
        assert stats[NAME] >= threshold
    if "dominant-tool-call" in fired:
        assert stats[DENSITY] >= threshold
    if "alternating-tool-cycle" in fired:
        assert stats[CYCLE] >= min(threshold, 4)


def test_same_error_peak_is_the_most_failures_of_one_signature(implementation: str) -> None:
    # A (twice, then again after B, respelled by a timestamp) and B: A reaches 3; a no-op does
    # not clear the count, a productive success does; another tool's same error is its own pair
    trace = [result("E at 10:00:01"), result("F"), result("E at 11:12:13"), result(no_op=True),
             result("E at 09:59:59"), result("E at 01:02:03", name="u"), result(),
             result("E at 10:00:01"), result("E at 10:00:02")]
    stats, alerts = _stats(implementation, trace)
    assert stats[SAME_ERROR] == 3
    assert stats[FAILURE] == 3  # the no-op broke the failure streak after the third failure
    assert [(a[0], a[5]) for a in alerts if a[0] == "repeated-failure"] == [
        ("repeated-failure", 4)]


def test_signal_ids_follow_the_stats_order() -> None:
    assert SIGNAL_IDS[CYCLE] == "alternating-tool-cycle"
    assert SIGNAL_IDS[SILENCE] == "tools-without-text"
    assert SIGNAL_IDS[SAME_ERROR] == "repeated-failure"
    assert SIGNAL_IDS[RECYCLED] == "recycled-calls"
    assert SIGNAL_IDS[13] == "compaction-storm"
    assert SIGNAL_IDS[15] == "looping-text"
    assert len(SIGNAL_IDS) == 16


@pytest.mark.parametrize("laps", [2, 3, 5])
def test_cycle_peak_is_exactly_the_laps_that_trip(implementation: str, laps: int) -> None:
    block = [call("a", '{"n":1}'), call("b", '{"n":2}'), call("c", '{"n":3}'), call("d")]
    stats, _ = _stats(implementation, block * laps)
    assert stats[CYCLE] == laps
    cfg = WatchdogConfig(signals={"alternating-tool-cycle": {"cycles": laps}})
    _, alerts = _stats(implementation, block * laps, cfg)
    assert [a[0] for a in alerts if a[0] == "alternating-tool-cycle"] == ["alternating-tool-cycle"]
    cfg = WatchdogConfig(signals={"alternating-tool-cycle": {"cycles": laps + 1}})
    _, alerts = _stats(implementation, block * laps, cfg)
    assert all(a[0] != "alternating-tool-cycle" for a in alerts)


def _rows(trace: list[tuple], sid: str) -> list[tuple]:
    rows = []
    for e in trace:
        if e[0] == "call":
            rows.append((sid, "call", e[1], e[2]))
        elif e[0] == "result":
            rows.append((sid, "result", e[1], e[4], e[2], e[3]))
        elif e[0] == "text":
            rows.append((sid, "text", e[1]))
        else:
            rows.append((sid, e[0]))
    return rows


def _one_at_a_time(g, row: tuple) -> None:
    kind, f = row[1], row[2:]
    if kind == "call":
        g.on_call(f[0], f[1])
    elif kind == "result":
        g.on_result(f[0], payload=f[1], error=f[2], no_op=f[3])
    elif kind == "text":
        g.on_text(f[0])
    elif kind == "turn_end":
        g.end_turn()
    else:
        g.reset()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(events(), min_size=1, max_size=3), st.sampled_from(["native", "python"]))
def test_stats_over_the_batch_path_equal_one_event_at_a_time(
    traces: list[list[tuple]], implementation: str
) -> None:
    from tripwire import GuardrailsConfig
    from tripwire.fleet.fleet import Fleet

    config = GuardrailsConfig(mode="warn", unattended=False)
    batch, single = (Fleet(config, implementation=implementation) for _ in range(2))
    per_session = []
    for i, trace in enumerate(traces):
        sid = f"s{i}"
        for fleet in (batch, single):
            fleet.session(sid)._watchdog.enable_stats()
        per_session.append(_rows(trace, sid))
    # the sessions' rows interleaved, round robin, each session's in its own order
    rows = [r for group in itertools.zip_longest(*per_session) for r in group if r is not None]
    batch.observe_many(rows)
    for row in rows:
        _one_at_a_time(single.session(row[0]), row)
    for i in range(len(traces)):
        sid = f"s{i}"
        assert batch.session(sid)._watchdog.stats == single.session(sid)._watchdog.stats
