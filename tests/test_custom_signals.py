"""Host-defined signals (issue 15 item 8): the protocol, their place after the built-ins, the
same modes, scopes, feedback and escalation, the config entry point and `replay --signals`, on
both engines."""

from __future__ import annotations

import io
import json
import logging
import textwrap

import pytest

from tripwire import GuardrailHalted, Guardrails, GuardrailsConfig, OperatorEvent
from tripwire.cli.main import main
from tripwire.durability.sqlite import SQLiteStore
from tripwire.engine.custom import custom_watchdog
from tripwire.engine.watchdog import watchdog_class
from tripwire.errors import ConfigError
from tripwire.fleet.fleet import Fleet
from tripwire.signals import WatchdogConfig
from tripwire.signals.custom import CustomSignal, SignalAlert


class GrepRun(CustomSignal):
    """Alerts at the third grep in a row (once per run); a turn boundary or reset clears it."""

    id = "grep-run"

    def __init__(self, severity: str = "warn", scope: str = "session",
                 guidance: str | None = None):
        self.severity, self.scope, self.guidance = severity, scope, guidance
        self.run = 0
        self.boundaries = self.resets = 0

    def on_call(self, name, args):
        self.run = self.run + 1 if name == "grep" else 0
        if self.run == 3:
            return SignalAlert(f"grep called {self.run} times in a row", self.guidance,
                               tool="grep", count=self.run)
        return None

    def on_turn_boundary(self):
        self.boundaries += 1
        self.run = 0

    def reset(self):
        self.resets += 1
        self.run = 0


class LoudFailure:
    """Protocol only (no base class): a result hook and a text hook, nothing else."""

    id = "loud-failure"
    severity = "warn"
    scope = "session"

    def on_result(self, name, error, no_op, payload):
        return f"{name} failed: {error}" if error else None

    def on_text(self, text):
        return "the agent said 'done'" if text.strip() == "done" else None


def make(implementation, *signals, mode="warn", events=None, store=None, session_id="c"):
    factories = [(lambda s=s: s) for s in signals]
    return Guardrails(GuardrailsConfig(mode=mode, unattended=False, custom_signals=factories),
                      session_id=session_id, implementation=implementation, store=store,
                      on_event=events.append if events is not None else None)


def test_no_custom_signals_means_the_plain_engine_class(implementation) -> None:
    g = Guardrails(GuardrailsConfig(mode="warn", unattended=False), implementation=implementation)
    assert type(g.watchdog) is watchdog_class(implementation)  # the per-call path is untouched
    custom = make(implementation, GrepRun())
    assert type(custom.watchdog).__mro__[2] is watchdog_class(implementation)


def test_a_warn_signal_alerts_after_the_builtins_on_the_same_event(implementation) -> None:
    g = make(implementation, GrepRun())
    g.start_turn()
    decisions = [g.on_call("grep", {"pattern": "x"}) for _ in range(3)]
    assert [len(d.alerts) for d in decisions] == [0, 0, 1]
    (alert,) = decisions[2].alerts
    assert alert.to_dict() == {"signal": "grep-run", "severity": "warn", "scope": None,
                               "reason": "grep called 3 times in a row",
                               "guidance": "grep called 3 times in a row",  # falls back
                               "event": 3}  # start_turn counted one
    assert (alert.tool, alert.count) == ("grep", 3)
    # five identical calls: repeated-tool-call (built-in) first, then nothing from grep-run
    for _ in range(2):
        d = g.on_call("grep", {"pattern": "x"})
    assert [a.signal for a in d.alerts] == ["repeated-tool-call"]
    g.end_turn()


def test_results_and_text_reach_a_protocol_only_signal(implementation) -> None:
    g = make(implementation, LoudFailure())
    g.start_turn()
    d = g.on_result("kubectl", error="forbidden")
    assert [(a.signal, a.reason) for a in d.alerts] == [("loud-failure", "kubectl failed: "
                                                                         "forbidden")]
    (alert,) = g.on_text("done").alerts
    assert (alert.signal, alert.reason, alert.event) == ("loud-failure", "the agent said 'done'", 2)
    assert g.on_text("not done").alerts == ()


def test_feedback_mode_delivers_the_guidance_to_the_next_turn(implementation) -> None:
    g = make(implementation, GrepRun(guidance="Say what you are looking for first."),
             mode="feedback")
    g.start_turn()
    for _ in range(3):
        g.on_call("grep", {"q": _})
    g.end_turn()
    feedback = g.start_turn().feedback
    assert "- grep-run: Say what you are looking for first." in feedback.splitlines()


def test_a_critical_session_signal_halts_under_enforce_and_survives_a_restart(
        implementation, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TRIPWIRE_STORE_KEY", "k" * 64)
    store = SQLiteStore(tmp_path / "s.sqlite")
    events: list[OperatorEvent] = []
    signal = GrepRun(severity="critical")
    g = make(implementation, signal, mode="enforce", events=events, store=store)
    g.start_turn()
    decisions = [g.on_call("grep", {"q": i}) for i in range(3)]
    assert [d.action for d in decisions] == ["continue", "continue", "halt_session"]
    assert decisions[2].guardrail == "watchdog"
    assert decisions[2].reason.startswith("watchdog halted the session (grep-run): grep called "
                                          "3 times in a row")
    assert g.on_call("ls").action == "halt_session"  # later events get the halt
    g.end_turn()
    with pytest.raises(GuardrailHalted):
        g.start_turn()
    assert g.flush()
    (trip,) = [r.data for r in store.history("c").rows if r.kind == "trip"]
    assert (trip["signal"], trip["halts"], trip["kind"]) == ("grep-run", True, "session")
    # a new process over the same store: still halted
    again = make(implementation, GrepRun(severity="critical"), mode="enforce", store=store)
    with pytest.raises(GuardrailHalted):
        again.start_turn()
    # the operator reset clears the halt and the signal's run (its reset hook)
    again.reset()
    assert again.start_turn() is not None
    store.close()


def test_a_critical_turn_signal_cuts_and_escalates_like_a_builtin(implementation) -> None:
    signal = GrepRun(severity="critical", scope="turn")
    g = make(implementation, signal, mode="enforce")
    actions = []
    for turn in range(3):  # distinct args: no built-in sees a loop
        g.start_turn()
        actions.append([g.on_call("grep", {"q": f"{turn}-{i}"}).action for i in range(3)])
        g.end_turn()
    assert actions == [["continue", "continue", "cut_turn"]] * 2 + \
        [["continue", "continue", "halt_session"]]
    assert "grep-run cut 3 turns in a row" in g.status().watchdog_reason
    assert signal.boundaries >= 3  # every turn boundary reached the signal


def test_bad_signals_are_config_errors(implementation) -> None:
    class Named(CustomSignal):
        def __init__(self, sid, severity="warn", scope="session"):
            self.id, self.severity, self.scope = sid, severity, scope

    for signal, message in [
        (Named("repeated-tool-call"), "is a built-in signal's"),
        (Named(""), "needs a non-empty str id"),
        (Named("x", severity="fatal"), "severity must be 'critical' or 'warn'"),
        (Named("x", severity="critical", scope="forever"), "scope must be 'session' or 'turn'"),
    ]:
        with pytest.raises(ConfigError, match=message):
            make(implementation, signal)
    with pytest.raises(ConfigError, match="configured twice"):
        make(implementation, GrepRun(), GrepRun())




def test_a_faulty_hook_never_reaches_the_agent_loop(implementation, caplog) -> None:
    class Bad(CustomSignal):
        id = "bad"

        def on_call(self, name, args):
            return 42 if name == "ls" else 1 / 0

        def reset(self):
            raise RuntimeError("no")

    g = make(implementation, Bad(), GrepRun())
    g.start_turn()
    with caplog.at_level(logging.ERROR, logger="tripwire"):
        assert g.on_call("ls").alerts == ()
        assert g.on_call("cat").alerts == ()
        g.reset()
        decisions = [g.on_call("grep", {"q": i}) for i in range(3)]
    assert [a.signal for a in decisions[2].alerts] == ["grep-run"]  # the others still run
    (logged,) = [r for r in caplog.records if r.name == "tripwire"]
    assert logged.getMessage() == (
        "custom signal 'bad' returned 42, not None, a reason or a SignalAlert with a non-empty "
        "reason; the observation goes on without it (later faults of this signal are counted, "
        "not logged)")
    assert g.watchdog._custom.faults == {"bad": 6}  # 42, 1/0, the reset, 1/0 three times


def test_fleet_batches_run_custom_signals_too(implementation) -> None:
    factories = [lambda: GrepRun(severity="critical")]
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=False, custom_signals=factories),
                  implementation=implementation)
    out = fleet.observe_many([("a", "turn_start"), *[("a", "call", "grep", f'{{"q": {i}}}')
                                                     for i in range(3)],
                              ("b", "turn_start"), ("b", "call", "grep", "{}")])
    (index, sid, decision), = [o for o in out if getattr(o[2], "action", "") == "halt_session"]
    assert (index, sid, decision.alerts[0].signal) == (3, "a", "grep-run")


def test_the_config_entry_point_and_replay_signals(implementation, tmp_path,
                                                   monkeypatch) -> None:
    (tmp_path / "my_signals.py").write_text(textwrap.dedent('''
        from tripwire.signals.custom import CustomSignal, SignalAlert

        class Ls(CustomSignal):
            id = "ls-twice"
            def __init__(self):
                self.n = 0
            def on_call(self, name, args):
                self.n = self.n + 1 if name == "ls" else 0
                return SignalAlert("ls twice") if self.n == 2 else None

        def factory():
            return Ls()
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "c.toml"
    config.write_text('[signals]\ncustom = ["my_signals:factory"]\n'
                      '[signals.repeated-tool-call]\nthreshold = 2\n')
    events = tmp_path / "e.jsonl"
    events.write_text("".join(json.dumps(e) + "\n" for e in [
        {"type": "turn_start"}, {"type": "call", "name": "ls", "args": {}},
        {"type": "call", "name": "ls", "args": {}}]))

    def replay(*extra):
        out, err = io.StringIO(), io.StringIO()
        code = main(["replay", str(events), "--config", str(config), "--implementation",
                     implementation, *extra], out=out, err=err)
        return code, [json.loads(x) for x in out.getvalue().splitlines()], err.getvalue()

    code, records, _ = replay()
    assert code == 0
    assert [(r["event"], r["signal"], r["scope"]) for r in records if r["kind"] == "alert"] == \
        [(2, "repeated-tool-call", "session"), (2, "ls-twice", None)]
    code, records, _ = replay("--signals", "ls-twice")
    assert [r["signal"] for r in records if r["kind"] == "alert"] == ["ls-twice"]
    code, records, _ = replay("--signals", "repeated-tool-call")
    assert [r["signal"] for r in records if r["kind"] == "alert"] == ["repeated-tool-call"]
    code, records, err = replay("--signals", "ls-thrice")
    assert code == 2 and err.endswith(", empty-responses, compaction-storm, persistent-warnings, "
                                           "looping-text, ls-twice)\n")
    config.write_text('[signals]\ncustom = ["my_signals:nothing"]\n')
    code, _, err = replay()
    assert (code, err) == (2, "tripwire: custom signal 'my_signals:nothing': my_signals has no "
                              "nothing\n")


def test_custom_watchdog_is_usable_directly(implementation) -> None:
    w = custom_watchdog(WatchdogConfig(), [GrepRun], implementation=implementation)
    assert [len(w.observe_call("grep", {"q": i})) for i in range(3)] == [0, 0, 1]
    w.reset()
    assert [len(w.observe_call("grep", {"q": i})) for i in range(2)] == [0, 0]
