"""The supervisor's "done" is checked, not trusted (SPEC §13): the host's acceptance check runs
before a ``stop_complete`` is accepted; a failed check is a redirect carrying its evidence and
the third in a row is ``blocked(acceptance_failed)``; the review carries the host's
``changes``; a review the host cannot assemble is ``blocked(evidence_unavailable)``. Exact
outcomes, both engines."""

from __future__ import annotations

from typing import Any

import pytest
from test_supervisor import Scripted, make

from tripwire.errors import ConfigError, TaskEnded
from tripwire.supervisor.decision import SupervisorDecision
from tripwire.supervisor.supervision import Supervision

DONE = SupervisorDecision.stop_complete("the worker says the tests pass", "claimed")


def claim_done(s: Supervision) -> None:
    s.on_call("bash", {"command": "pytest"}, id="t")
    s.on_result(id="t", payload="1 failed")
    s.on_text("All tests pass now.")
    s.on_stop_attempt(False)


def with_check(implementation: str, sup: Any, check: Any, changes: Any = None
               ) -> tuple[Supervision, Any]:
    s, task = make(implementation, sup)
    return Supervision(sup, s.guardrails, acceptance=check, changes=changes), task


def test_a_passing_check_accepts_the_stop_complete(implementation: str) -> None:
    s, task = with_check(implementation, Scripted(DONE), lambda t: (True, "12 passed"))
    s.start_turn()
    claim_done(s)
    with pytest.raises(TaskEnded) as ended:
        s.start_turn()
    outcome = ended.value.outcome
    assert (outcome.kind, outcome.verified, outcome.evidence) == (
        "answered", True, {"supervisor": "the worker says the tests pass",
                           "acceptance": "12 passed"})
    assert s.acceptance == ("pytest tests/test_parser.py exits 0",)  # the task's criteria


def test_a_failed_check_is_a_redirect_and_the_third_is_blocked(implementation: str) -> None:
    checks: list[str] = []

    def check(task: Any) -> tuple[bool, str]:
        checks.append(task.task_id)
        return False, "pytest: 1 failed (test_parser.py::test_empty)"

    s, task = with_check(implementation, Scripted(DONE), check)
    s.start_turn()
    for n in (1, 2):
        claim_done(s)
        turn = s.start_turn()  # not ended: redirected with the check's evidence
        assert task.outcome is None and s.failed_acceptance == n
        assert "- supervisor: The task is not complete: its acceptance check failed " \
               "(pytest: 1 failed (test_parser.py::test_empty))." in turn.feedback
    claim_done(s)
    with pytest.raises(TaskEnded) as ended:
        s.start_turn()
    outcome = ended.value.outcome
    assert (outcome.kind, outcome.reason, outcome.evidence) == (
        "blocked", "acceptance_failed", "pytest: 1 failed (test_parser.py::test_empty)")
    assert [d for _, d in s.decisions] == ["acceptance_failed"] * 3
    assert len(checks) == 3


def test_a_pass_resets_the_count(implementation: str) -> None:
    answers = iter([(False, "1 failed"), (False, "1 failed"), (True, "ok")])
    s, task = with_check(implementation, Scripted(DONE), lambda t: next(answers))
    s.start_turn()
    for _ in range(2):
        claim_done(s)
        s.start_turn()
    claim_done(s)
    with pytest.raises(TaskEnded) as ended:
        s.start_turn()
    assert ended.value.outcome.kind == "answered" and s.failed_acceptance == 0


def test_the_review_carries_the_hosts_changes(implementation: str) -> None:
    sup = Scripted(SupervisorDecision.continue_("progress"))
    seen: list[int] = []

    def changes(task: Any) -> list[str]:
        seen.append(task.revision)
        return ["src/parser.py", "tests/test_parser.py"]

    s, _ = with_check(implementation, sup, None, changes)
    s.start_turn()
    claim_done(s)
    s.start_turn()
    assert sup.reviews[0].changes == ["src/parser.py", "tests/test_parser.py"]
    assert sup.reviews[0].to_dict()["changes"] == ["src/parser.py", "tests/test_parser.py"]
    assert seen == [0]


@pytest.mark.parametrize("broken", ["changes", "check"])
def test_a_review_the_host_cannot_assemble_is_blocked(implementation: str,
                                                       broken: str) -> None:
    def fails(task: Any) -> Any:
        raise OSError("git is not installed")

    s, task = with_check(implementation, Scripted(DONE),
                         fails if broken == "check" else (lambda t: (True, "ok")),
                         fails if broken == "changes" else None)
    s.start_turn()
    claim_done(s)
    with pytest.raises(TaskEnded) as ended:
        s.start_turn()
    outcome = ended.value.outcome
    assert (outcome.kind, outcome.reason) == ("blocked", "evidence_unavailable")
    assert "OSError: git is not installed" in outcome.evidence


def test_changes_must_be_callable(implementation: str) -> None:
    s, _ = make(implementation, Scripted(DONE))
    with pytest.raises(ConfigError, match="changes must be a callable"):
        Supervision(Scripted(DONE), s.guardrails, changes=["a.py"])
