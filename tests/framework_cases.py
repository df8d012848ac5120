"""The behaviour every framework integration owes, written once and run against each real
framework (issue 37): each ``tests/test_integration_<framework>.py`` defines a ``Driver`` (one
agent run of that framework with its own scripted fake model) and imports these tests, which
pytest collects there.

- a loop of identical calls is refused at the 5th: the tool's side effect happened exactly 4
  times, the run ended with the framework's own stop, and the next run is refused before any
  model call;
- a healthy varied run is untouched;
- spend and steps land in the task (usage priced from the catalogue: the frameworks report
  tokens);
- a halt survives a restart with a store;
- feedback reaches the model the way the framework feeds text back;
all on both engines (the ``implementation`` fixture).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tripwire import Guardrails, GuardrailsConfig
from tripwire.base.decision import Decision
from tripwire.budgets import Task
from tripwire.durability.sqlite import SQLiteStore
from tripwire.interchange.events import Usage
from tripwire.interchange.prices import estimate

#: every scripted model response's usage, as a provider reports it (no cost: priced)
MODEL, PROVIDER, INPUT_TOKENS, OUTPUT_TOKENS = "gpt-4o", "openai", 1200, 40
FILES = ["src/a.py", "src/b.py", "src/c.py", "src/d.py", "src/e.py", "src/f.py"]
ANSWER = "The bug is in src/f.py: fixed."
REPEATED = "read_file was called 5 times in a row with equivalent arguments"
FED_BACK = "You called read_file 5 times in a row"


@dataclass(frozen=True)
class Reply:
    """One scripted model response: a ``read_file(path)`` call (with ``text`` beside it), or,
    without a path, the final answer ``text``."""

    path: str | None = None
    text: str = ""


@dataclass
class Script:
    """What the fake model answers, request by request, and what it was shown."""

    replies: Iterator[Reply]
    requests: int = 0
    seen: list[str] = field(default_factory=list)  # each request's input, as text

    def next(self, shown: str = "") -> Reply:
        self.seen.append(shown)
        self.requests += 1
        return next(self.replies)


@dataclass
class Outcome:
    """How one run ended: its answer, or the decision that stopped it (read from the
    framework's own stop: its exception, or its termination result) and that stop itself."""

    answer: str | None = None
    stopped: Decision | None = None
    stop: Any = None


class Driver:
    """One framework's agent run, with its scripted fake model and a ``read_file`` tool whose
    side effect is ``executed``."""

    #: the framework's own stop (the exception a run ends with, or its result's type)
    stop_type: type

    def __init__(self) -> None:
        self.executed: list[str] = []

    def read_file(self, path: str) -> str:
        self.executed.append(path)
        return f"contents of {path}"

    def run(self, guardrails: Guardrails, script: Script, prompt: str = "fix the bug",
            ) -> Outcome:
        raise NotImplementedError


def looping() -> Script:
    return Script(iter(itertools.repeat(Reply("src/a.py"))))


def healthy() -> Script:
    return Script(iter([*(Reply(p, f"Reading {p}.") for p in FILES), Reply(text=ANSWER)]))


def guardrails(implementation: str, mode: str = "enforce", **kw: Any) -> Guardrails:
    return Guardrails(GuardrailsConfig(mode=mode, unattended=True),
                      session_id=kw.pop("session_id", "framework"),
                      implementation=implementation, **kw)


def assert_looping_stopped(driver: Driver, outcome: Outcome) -> None:
    assert outcome.answer is None
    assert isinstance(outcome.stop, driver.stop_type)
    decision = outcome.stopped
    assert decision is not None and decision.action == "halt_session"
    assert decision.guardrail == "watchdog"
    assert [a.signal for a in decision.alerts] == ["repeated-tool-call"]
    assert REPEATED in decision.reason
    assert driver.executed == ["src/a.py"] * 4  # the 5th identical call never ran


def assert_refused(driver: Driver, outcome: Outcome, script: Script) -> None:
    assert outcome.answer is None
    assert isinstance(outcome.stop, driver.stop_type)
    assert outcome.stopped is not None and outcome.stopped.action == "refuse_turn"
    assert script.requests == 0  # refused before any model call
    assert driver.executed == ["src/a.py"] * 4


# -- the tests (collected in each framework's module, which provides ``driver``) ------------


def test_a_loop_of_identical_calls_is_refused_at_the_fifth(driver: Driver,
                                                           implementation: str) -> None:
    g = guardrails(implementation)
    assert_looping_stopped(driver, driver.run(g, looping()))
    assert g.halted
    again = looping()
    assert_refused(driver, driver.run(g, again, "try again"), again)
    assert g.status().counters["refused_turns"] == 1


def test_a_healthy_varied_run_is_untouched(driver: Driver, implementation: str) -> None:
    g = guardrails(implementation)
    script = healthy()
    outcome = driver.run(g, script)
    assert (outcome.answer, outcome.stopped) == (ANSWER, None)
    assert driver.executed == FILES
    assert script.requests == len(FILES) + 1
    assert not g.halted and not g.in_turn  # the run's end closed its turn
    assert g.status().counters == {"alerts": {}, "trips": {}, "refused_turns": 0,
                                   "callback_errors": 0}


def test_spend_and_steps_land_in_the_task(driver: Driver, implementation: str) -> None:
    task = Task("fix the bug", task_id="ticket-1")
    g = guardrails(implementation, task=task)
    driver.run(g, healthy())
    responses = len(FILES) + 1
    assert task.steps == responses  # one step per model response
    assert task.tool_calls == len(FILES)
    assert task.tokens == responses * (INPUT_TOKENS + OUTPUT_TOKENS)
    price = estimate(Usage(model=MODEL, provider=PROVIDER, input_tokens=INPUT_TOKENS,
                           output_tokens=OUTPUT_TOKENS))
    assert price.estimated and price.cost_usd
    assert task.used("usd") == pytest.approx(responses * price.cost_usd)
    assert g.status().spent_usd == pytest.approx(responses * price.cost_usd)


def test_a_halt_survives_a_restart_with_a_store(driver: Driver, implementation: str,
                                                tmp_path: Path) -> None:
    db = tmp_path / "tripwire.db"
    first = guardrails(implementation, session_id="ticket-9", store=SQLiteStore(db))
    assert_looping_stopped(driver, driver.run(first, looping()))
    first.flush()
    del first  # the process is gone; a new one restores the session from the store
    restored = guardrails(implementation, session_id="ticket-9", store=SQLiteStore(db))
    assert restored.halted
    script = looping()
    assert_refused(driver, driver.run(restored, script, "carry on"), script)


def test_feedback_reaches_the_model(driver: Driver, implementation: str) -> None:
    """In ``feedback`` mode nothing is refused: the 5th identical call runs, and the model's
    next request carries the watchdog's note."""
    g = guardrails(implementation, mode="feedback", feedback_at_once=True)
    script = Script(iter([*(Reply("src/a.py") for _ in range(5)), Reply(text=ANSWER)]))
    outcome = driver.run(g, script)
    assert (outcome.answer, outcome.stopped) == (ANSWER, None)
    assert driver.executed == ["src/a.py"] * 5
    assert [FED_BACK in shown for shown in script.seen] == [False] * 5 + [True]

