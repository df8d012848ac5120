"""looping-text (issue 39): an agent message that ends in the same stretch of text repeated lap
after lap. Both engines, one event at a time and through a fleet's batch path; the recorded
chant of the shared corpus replayed by the real command; every other recorded message checked.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import need_shared
from hypothesis import given, settings
from hypothesis import strategies as st

from tripwire import Guardrails, GuardrailsConfig, Watchdog
from tripwire.errors import ConfigError
from tripwire.fleet import Fleet
from tripwire.interchange.adapters import read_transcript
from tripwire.interchange.events import Text
from tripwire.signals import WatchdogConfig
from tripwire.signals.looping_text import tail_laps

CHANT = "Wait, I want to add `preserve_dtypes`.\n    `def set_output(self)` -> `(no change)`\n"


def laps_of(text: str, implementation: str, config: WatchdogConfig | None = None
            ) -> tuple[list[tuple[str, int]], tuple[int, int]]:
    wd = Watchdog(config or WatchdogConfig(), implementation=implementation)
    alerts = wd.observe_text(text)
    return [(a.signal, a.count) for a in alerts], wd.looping_text


@pytest.mark.parametrize("what,text,expected", [
    ("seven laps: under the threshold", "I think so. " + CHANT * 7, ([], (7, len(CHANT)))),
    ("eight laps trip, the lap's length reported",
     "I think so. " + CHANT * 8, ([("looping-text", 8)], (8, len(CHANT)))),
    ("a chant cut mid-lap by the output limit still counts its whole laps",
     CHANT * 20 + CHANT[:30], ([("looping-text", 20)], (20, len(CHANT)))),
    ("a short chant is found at a multiple of its period (the first of 16 bytes or more)",
     "the the " * 64, ([("looping-text", 32)], (32, 16))),
    ("a rule of dashes has no letters: not a chant", "Done.\n" + "-" * 400, ([], (1, 0))),
    ("a table's repeated separator row has too few letters",
     "| a | b |\n" + "| --- | --- |\n" * 30, ([], (1, 0))),
    ("non-ASCII text is letters", "准备好了。" + "我再检查一遍这个文件的内容。\n" * 9,
     ([("looping-text", 9)], (9, len("我再检查一遍这个文件的内容。\n".encode())))),
    ("a chant the message leaves again is not read (only the end is)",
     CHANT * 30 + "Now I will edit the file and run the tests.", ([], (1, 0))),
    ("a lap longer than max_period (512 bytes) is not searched for",
     ("x" * 500 + " the long lap.\n") * 10, ([], (1, 0))),
    ("too short to tell", "ok ok ok ok", ([], (0, 0))),
])
def test_how_a_message_ends(implementation: str, what: str, text: str,
                            expected: tuple[list[tuple[str, int]], tuple[int, int]]) -> None:
    assert laps_of(text, implementation) == expected, what


def test_max_period_and_threshold_are_knobs(implementation: str) -> None:
    long_lap = ("x" * 500 + " the long lap.\n") * 10
    config = WatchdogConfig(signals={"looping-text": {"max_period": 1024, "threshold": 10}})
    assert laps_of(long_lap, implementation, config) == (
        [("looping-text", 10)], (10, 515))
    # below its minimum a count is clamped (every knob's rule); above its bound, refused
    assert WatchdogConfig(signals={"looping-text": {"max_period": 8}}
                          ).engine_settings().looping_text_max_period == 16
    with pytest.raises(ConfigError) as e:
        WatchdogConfig(signals={"looping-text": {"max_period": 5000}})
    assert "looping-text.max_period" in str(e.value) and "\n" not in str(e.value)


def test_each_message_on_its_own(implementation: str) -> None:
    """Two chanting messages: two alerts; a plain one between them changes nothing."""
    wd = Watchdog(implementation=implementation)
    fired = []
    for i, text in enumerate([CHANT * 9, "Let me look at the file.", CHANT * 12]):
        fired += [(i, a.signal, a.count) for a in wd.observe_text(text)]
    assert fired == [(0, "looping-text", 9), (2, "looping-text", 12)]


def test_the_batch_path_judges_the_same(implementation: str) -> None:
    rows = [("s", "text", "Looking at it."), ("s", "call", "bash", '{"c": "ls"}'),
            ("s", "text", "I think so. " + CHANT * 8), ("s", "text", CHANT * 3)]
    fleet = Fleet(GuardrailsConfig(mode="warn", unattended=False),
                  implementation=implementation)
    got = [(i, a.signal, a.count) for i, _, outcome in fleet.observe_many(rows)
           for a in getattr(outcome, "alerts", ())]
    assert got == [(2, "looping-text", 8)]


def test_promoted_it_cuts_the_turn(implementation: str) -> None:
    config = GuardrailsConfig(mode="enforce", unattended=False, watchdog=WatchdogConfig(
        signals={"looping-text": {"severity": "critical"}}))
    g = Guardrails(config, implementation=implementation)
    g.start_turn()
    d = g.on_text(CHANT * 8)
    assert [a.signal for a in d.alerts] == ["looping-text"]
    assert d.alerts[0].severity == "critical" and d.alerts[0].scope == "turn"
    assert d.cut_turn and not d.halt_session
    plain = Guardrails(GuardrailsConfig(mode="enforce", unattended=False),
                       implementation=implementation)
    plain.start_turn()
    d = plain.on_text(CHANT * 8)
    assert [a.severity for a in d.alerts] == ["warn"] and not d.cut_turn


def test_the_recorded_chant_replayed(implementation: str) -> None:
    """The shared corpus's chant (a Gemini run on SWE-bench, 1,420 laps of 146 bytes): the real
    command warns at that message and nowhere else."""
    path = need_shared("corpus", "mini-swe-agent-swebench",
                       "scikit-learn__scikit-learn-25102.traj.json")
    done = subprocess.run([sys.executable, "-m", "tripwire", "replay", str(path),
                           "--implementation", implementation],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    alerts = [json.loads(line) for line in done.stdout.splitlines()]
    alerts = [a for a in alerts if a["kind"] == "alert"]
    assert [(a["event"], a["signal"], a["severity"]) for a in alerts] == [
        (28, "looping-text", "warn")]
    assert "146-byte stretch of text repeated 1420 times" in alerts[0]["reason"]


def _recorded_texts() -> list[tuple[str, str]]:
    out = []
    for root in (need_shared("corpus"), need_shared("format-samples")):
        for path in sorted(root.rglob("*")):
            if not path.is_file() or path.suffix in (".md", ".txt", ".py") or \
                    path.name.startswith("LICENSE"):
                continue
            try:
                items = list(read_transcript(path))
            except Exception:  # a data file that is no transcript (labels, notes)
                continue
            out += [(path.name, i.event.text) for i in items
                    if isinstance(i.event, Text) and i.event.text]
    return out


def test_every_recorded_message_ends_in_no_laps_but_the_chant() -> None:
    """Every agent message of the shared corpus and the format samples, on both engines
    alike: one ends in laps (the chant), every other in one lap or too short to tell."""
    texts = _recorded_texts()
    assert len(texts) > 10_000
    engines = {impl: Watchdog(WatchdogConfig(only=frozenset({"looping-text"})),
                              implementation=impl) for impl in ("native", "python")}
    looping = []
    for name, text in texts:
        seen = []
        for wd in engines.values():
            wd.observe_text(text)
            seen.append(wd.looping_text)
        assert seen[0] == seen[1], name
        assert seen[0] == tail_laps(text.encode("utf-8", "surrogatepass"), 512, 8)
        if seen[0][0] > 1:
            looping.append((name, seen[0]))
    assert looping == [("scikit-learn__scikit-learn-25102.traj.json", (1420, 146))]


_block = st.text(st.sampled_from("ab c.\n\u00e9\u4e2dxyz"), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60), _block, st.integers(1, 40), st.text(max_size=20))
def test_engines_agree_on_random_chants(head: str, block: str, laps: int, tail: str) -> None:
    text = head + block * laps + tail
    if not text.strip():
        return
    runs = [laps_of(text, impl) for impl in ("native", "python")]
    assert runs[0] == runs[1]


def test_a_message_of_lone_surrogates_is_judged_alike() -> None:
    text = "\ud800 stuck again on it " * 12
    assert laps_of(text, "native") == laps_of(text, "python")
