"""The progress supervisor (SPEC §7.4): triggers, the review, the four decisions, charging and
caps, failure, staleness — exact decisions at exact points, on both engines.

The seed's list: redirection reaches the correct run; exhausted budgets still stop it;
malformed / timed-out / raising supervisors; stale guidance after user steering; repeated
disagreement between supervisor and worker."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from tripwire import Guardrails, GuardrailsConfig
from tripwire.budgets.task import Task
from tripwire.engine import select as _engine
from tripwire.errors import ConfigError, GuardrailHalted, MalformedDecision, TaskEnded
from tripwire.policy.feedback import CLOSING, HEADER
from tripwire.policy.reporting import OperatorEvent
from tripwire.supervisor.decision import Check, SupervisorDecision
from tripwire.supervisor.model import Completion, ModelSupervisor
from tripwire.supervisor.review import Review, error_signature
from tripwire.supervisor.supervision import Supervision, SupervisorConfig

MISSING = "ModuleNotFoundError: No module named 'parsimonious'"
PIP = Check("bash", "succeeds", args_contains="pip install")


def make(implementation: str, supervisor: Any, *, mode: str = "feedback",
         budget: dict[str, Any] | None = None, config: SupervisorConfig | None = None,
         session: str = "s", on_event: Any = None) -> tuple[Supervision, Task]:
    task = Task("make tests/test_parser.py pass", budget or {"reviews": 10},
                acceptance=["pytest tests/test_parser.py exits 0"])
    g = Guardrails(GuardrailsConfig(mode=mode), session_id=session, task=task,
                   implementation=implementation)
    return Supervision(supervisor, g, config=config, on_event=on_event), task


def fail_tests(s: Supervision, n: int, first: int = 0, command: str = "pytest -x") -> None:
    """``n`` runs of the test with the missing-dependency error (ids t<first>...)."""
    for i in range(first, first + n):
        s.on_call("bash", {"command": command}, id=f"t{i}")
        s.on_result(id=f"t{i}", error=MISSING)


class Scripted:
    """A supervisor answering from a list, recording the reviews it saw."""

    def __init__(self, *answers: Any):
        self.answers = list(answers)
        self.reviews: list[Review] = []

    def __call__(self, review: Review) -> Any:
        self.reviews.append(review)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer


CONTINUE = SupervisorDecision.continue_("the test output changes")
REDIRECT = SupervisorDecision.redirect(
    "The last three test runs failed before any test ran: install the missing dependency "
    "(pip install parsimonious), then run the test again.", PIP, "same error three times")


# --------------------------------------------------------------------------------------------
# Triggers: when a review is asked for, and only at a turn start


def test_a_failure_streak_asks_for_a_review_at_the_next_turn_start(implementation: str) -> None:
    sup = Scripted(CONTINUE)
    s, task = make(implementation, sup)
    s.start_turn()
    fail_tests(s, 2)
    assert s.pending_triggers == ()
    fail_tests(s, 1, first=2)  # the third failure, one error thrice: repeated-failure (§12.3)
    assert s.pending_triggers == ("failure",)
    fail_tests(s, 1, first=3)
    s.end_turn()
    assert sup.reviews == []  # never in the middle of a turn, never on tripwire's own clock
    s.start_turn()
    assert len(sup.reviews) == 1
    review = sup.reviews[0]
    assert review.triggers == ("failure",) and review.alerts == ("repeated-failure",)
    assert (review.number, review.run, review.task, review.revision) == (1, "s", task.task_id, 0)
    assert task.used("reviews") == 1 and s.pending_triggers == ()
    s.start_turn()  # answered: no new trigger, no review
    assert len(sup.reviews) == 1


def test_critical_alerts_trigger_under_feedback_not_warn(implementation: str) -> None:
    for mode, expected in (("warn", ()), ("feedback", ("critical",))):
        s, _ = make(implementation, Scripted(CONTINUE), mode=mode,
                    config=SupervisorConfig(on_failure=False))
        s.start_turn()
        for i in range(5):  # the 5th identical call: repeated-tool-call (critical)
            d = s.on_call("read_file", {"path": "a.py"}, id=f"r{i}")
            s.on_result(id=f"r{i}", payload="same text")
        assert [a.signal for a in d.alerts] == ["repeated-tool-call"]
        assert s.pending_triggers == expected, mode


def test_every_n_steps_and_stop_attempts(implementation: str) -> None:
    sup = Scripted(CONTINUE)
    s, task = make(implementation, sup, config=SupervisorConfig(review_every_steps=3))
    s.start_turn()
    s.on_usage(model="m", input_tokens=10, output_tokens=5)
    s.on_usage(model="m", input_tokens=10, output_tokens=5)
    assert s.pending_triggers == ()
    s.on_usage(model="m", input_tokens=10, output_tokens=5)
    assert s.pending_triggers == ("steps",)
    assert task.used("steps") == 3
    s.start_turn()
    assert [r.triggers for r in sup.reviews] == [("steps",)]
    s.on_stop_attempt(False)
    assert s.pending_triggers == ("stop_attempt",)
    s.start_turn()
    assert [r.triggers for r in sup.reviews] == [("steps",), ("stop_attempt",)]
    assert sup.reviews[1].stop_attempts == 1 and task.used("stop_rejections") == 1
    off, _ = make(implementation, sup, config=SupervisorConfig(on_stop_attempt=False))
    off.on_stop_attempt(False)
    assert off.pending_triggers == ()


# --------------------------------------------------------------------------------------------
# The review


def test_the_review_carries_the_recent_calls_and_the_long_term_record(
        implementation: str) -> None:
    sup = Scripted(CONTINUE)
    s, task = make(implementation, sup, config=SupervisorConfig(review_every_steps=1))
    s.start_turn()
    # an alternating two-step cycle, 30 calls long: 20 of them fit the recent window, the
    # record still counts all 30
    for i in range(15):
        s.on_call("edit_file", {"path": "./src/../src/parser.py", "text": "v1"}, id=f"e{i}")
        s.on_result(id=f"e{i}", payload="ok")
        # respelled: key order and path spelling differ, the canonical key does not
        s.on_call("bash", {"command": "pytest", "cwd": "/repo/"} if i % 2 else
                  {"cwd": "/repo", "command": "pytest"}, id=f"b{i}")
        s.on_result(id=f"b{i}", error=f"FAILED at 2026-12-03T14:{i:02d}:07Z in /tmp/pytest-{i}/x "
                    f"(pid {4000 + i})")
    s.on_call("read_file", {"path": "big.log"}, id="big")
    s.on_result(id="big", payload="é" * 3000)  # 6,000 bytes
    s.step()
    s.start_turn()
    review = sup.reviews[0]
    assert len(review.recent) == 20
    assert [c.tool for c in review.recent[-3:]] == ["edit_file", "bash", "read_file"]
    last = review.recent[-1]
    assert (last.status, last.result_bytes, last.truncated) == ("ok", 6000, True)
    assert last.result is not None and len(last.result.encode()) == 2048
    engine = _engine.load(implementation)
    edit = f"{engine.canonical_key('edit_file', {'path': 'src/parser.py', 'text': 'v1'}):016x}"
    bash = f"{engine.canonical_key('bash', {'command': 'pytest', 'cwd': '/repo'}):016x}"
    record = {r.key: r for r in review.record}
    assert record[edit].count == 15 and record[bash].count == 15
    assert (record[edit].first_event, record[edit].last_event) == (0, 56)
    assert (record[bash].first_event, record[bash].last_event) == (2, 58)
    assert record[edit].last_error_signature is None
    # the errors differ only by a timestamp, a temporary path and a number: one signature
    assert record[bash].last_error_signature == error_signature(
        "FAILED at 2026-01-01T00:00:00Z in /tmp/pytest-99/x (pid 1)")
    assert review.recent[-2].status == "error"
    assert review.objective == "make tests/test_parser.py pass"
    assert review.acceptance == ("pytest tests/test_parser.py exits 0",)
    assert review.remaining["reviews"] == 9 and review.used["reviews"] == 1
    assert review.caps["reviews"] == 10 and "steps" not in review.remaining
    data = json.loads(review.to_json())
    assert data["long_term_record"][0]["count"] == 15 and data["run"] == "s"


def test_error_signatures() -> None:
    assert error_signature(None) is None and error_signature("") is None
    assert error_signature(False) is None
    a = error_signature("Timeout after 30s contacting 10.0.0.7 (request 0x7fa3c2)")
    assert a == error_signature("Timeout after 45s contacting 10.0.0.9 (request 0xdeadbeef)")
    assert a != error_signature("Connection refused contacting 10.0.0.7")
    # the temporary component goes, the file under it stays (SPEC §12.1)
    assert error_signature("disk full: /var/tmp/build-a81f/out.o") == \
        error_signature("disk full: /var/tmp/build-c03d/out.o") != \
        error_signature("disk full: /var/tmp/build-c03d/other.o")
    assert error_signature(True) == error_signature("  ") != error_signature("x")
    assert error_signature({"code": 1}) == error_signature({"code": 2})


# --------------------------------------------------------------------------------------------
# The four decisions


def test_redirect_delivers_guidance_and_its_check_is_judged(implementation: str) -> None:
    sup = Scripted(REDIRECT, CONTINUE)
    s, task = make(implementation, sup)
    s.start_turn()
    fail_tests(s, 3)
    turn = s.start_turn()
    lines = turn.feedback.split("\n")
    assert lines[0] == HEADER and lines[-1] == CLOSING
    assert lines[-2] == (
        "- supervisor: The last three test runs failed before any test ran: install the "
        "missing dependency (pip install parsimonious), then run the test again. Checkpoint: "
        "a call of bash with 'pip install' in its arguments succeeds.")
    assert lines[1].startswith("- repeated-failure: ")  # the watchdog's note stays
    # the worker follows it: the check holds
    s.on_call("bash", {"command": "pip install parsimonious"}, id="p")
    s.on_result(id="p", payload="Successfully installed parsimonious-0.10.0")
    fail_tests(s, 3, first=3, command="pytest -x tests/test_parser.py")
    s.start_turn()
    prior = sup.reviews[1].guidance
    assert len(prior) == 1 and (prior[0].review, prior[0].followed, prior[0].held) == \
        (1, True, True)
    assert sup.reviews[1].failed_redirects == 0
    assert s.decisions == [(1, "redirect"), (2, "continue")]


def test_stop_complete_and_stop_blocked_end_the_task(implementation: str) -> None:
    done = SupervisorDecision.stop_complete("pytest tests/test_parser.py: 12 passed", "passed")
    s, task = make(implementation, Scripted(done))
    s.start_turn()
    s.on_call("bash", {"command": "pytest tests/test_parser.py"}, id="t")
    s.on_result(id="t", payload="12 passed")
    s.on_text("All tests pass now.")
    s.on_stop_attempt(False)
    with pytest.raises(TaskEnded) as ended:
        s.start_turn()
    outcome = ended.value.outcome
    assert (outcome.kind, outcome.evidence, outcome.answer, outcome.verified) == (
        "answered", "pytest tests/test_parser.py: 12 passed", "All tests pass now.", True)
    assert task.outcome is outcome
    with pytest.raises(TaskEnded):  # later turns are refused
        s.start_turn()

    blocked = SupervisorDecision.stop_blocked("the package index is unreachable", "3 timeouts")
    s, task = make(implementation, Scripted(blocked))
    s.start_turn()
    fail_tests(s, 3)
    with pytest.raises(TaskEnded) as ended:
        s.start_turn()
    assert (ended.value.outcome.kind, ended.value.outcome.reason) == (
        "blocked", "the package index is unreachable")


def test_redirect_reaches_the_right_run(implementation: str) -> None:
    """One supervisor for two sessions: the guidance goes to the run reviewed, only."""
    seen: list[str] = []

    def supervisor(review: Review) -> SupervisorDecision:
        seen.append(review.run)
        return SupervisorDecision.redirect(f"Guidance for {review.run}.", PIP, "loop")

    a, task_a = make(implementation, supervisor, session="a")
    b, task_b = make(implementation, supervisor, session="b")
    for s in (a, b):
        s.start_turn()
    fail_tests(a, 3)
    fail_tests(b, 2)  # no trigger in b
    turn_a, turn_b = a.start_turn(), b.start_turn()
    assert seen == ["a"]
    assert "- supervisor: Guidance for a." in turn_a.feedback
    assert turn_b.feedback == ""
    assert (task_a.used("reviews"), task_b.used("reviews")) == (1, 0)

    # in one fleet, each session under its own (implicit) task
    from tripwire.fleet.fleet import Fleet
    fleet = Fleet(GuardrailsConfig(mode="feedback"), implementation=implementation)
    seen.clear()
    fa = Supervision(supervisor, fleet.session("a"))
    fb = Supervision(supervisor, fleet.session("b"))
    for s in (fa, fb):
        s.start_turn()
    fail_tests(fb, 3)
    assert fa.start_turn().feedback == "" and seen == []
    assert "- supervisor: Guidance for b." in fb.start_turn().feedback and seen == ["b"]
    assert (fleet.session("a").task.used("reviews"), fleet.session("b").task.used("reviews")) \
        == (0, 1)

    # both in flight at once, answered in the other order: each decision to its own run
    released = {"a": asyncio.Event(), "b": asyncio.Event()}

    async def slow(review: Review) -> SupervisorDecision:
        if review.run == "a":
            await released["a"].wait()   # a's answer comes after b's
        else:
            released["a"].set()
        return SupervisorDecision.redirect(f"Async guidance for {review.run}.", PIP, "loop")

    async def both() -> tuple[Any, Any]:
        a2, _ = make(implementation, slow, session="a")
        b2, _ = make(implementation, slow, session="b")
        for s in (a2, b2):
            s.start_turn()
            fail_tests(s, 3)
        return await asyncio.gather(a2.astart_turn(), b2.astart_turn())

    ta, tb = asyncio.run(both())
    assert "Async guidance for a." in ta.feedback and "for b." not in ta.feedback
    assert "Async guidance for b." in tb.feedback and "for a." not in tb.feedback


# --------------------------------------------------------------------------------------------
# Charged and capped


def test_an_exhausted_budget_stops_a_task_the_supervisor_wants_to_continue(
        implementation: str) -> None:
    sup = Scripted(CONTINUE)
    s, task = make(implementation, sup, mode="enforce", budget={"steps": 4, "reviews": 10},
                   config=SupervisorConfig(review_every_steps=1))
    s.start_turn()
    for _ in range(3):
        s.on_usage(model="m", input_tokens=100, output_tokens=10)
        s.start_turn()
    assert len(sup.reviews) == 3 and task.outcome is None
    d = s.on_usage(model="m", input_tokens=100, output_tokens=10)  # the 4th step: exhausted
    assert d.cut_turn and d.guardrail == "budget"
    with pytest.raises(TaskEnded) as ended:
        s.start_turn()
    assert (ended.value.outcome.kind, ended.value.outcome.counter) == ("exhausted", "steps")
    assert len(sup.reviews) == 3  # no review can continue an exhausted task


def test_the_reviews_cap_and_the_supervisors_own_usage(implementation: str) -> None:
    sup = Scripted(CONTINUE)
    s, task = make(implementation, sup, budget={"reviews": 2},
                   config=SupervisorConfig(review_every_steps=1))
    for _ in range(2):
        s.step()
        s.start_turn()
    s.step()
    with pytest.raises(TaskEnded) as ended:
        s.start_turn()  # the 3rd review would pass the cap: charged first, never called
    assert (ended.value.outcome.kind, ended.value.outcome.counter) == ("exhausted", "reviews")
    assert len(sup.reviews) == 2

    # its usage is one model request of the task: a step, its tokens, its dollars
    from tripwire.supervisor.decision import ReviewUsage
    costly = SupervisorDecision.stop_complete("12 passed", "the test passes", usage=ReviewUsage(
        "judge", input_tokens=900, output_tokens=200, cost_usd=0.03))
    s, task = make(implementation, Scripted(costly), budget={"tokens": 1000, "reviews": 5})
    s.start_turn()
    s.on_stop_attempt(False)
    with pytest.raises(TaskEnded) as ended:
        s.start_turn()
    # the review's own tokens exhausted the task: stop_complete cannot make it answered
    assert (ended.value.outcome.kind, ended.value.outcome.counter) == ("exhausted", "tokens")
    assert (task.used("steps"), task.used("tokens"), task.used("usd")) == (1, 1100, 0.03)
    assert s.decisions == [(1, "exhausted")]


def test_three_failed_redirects_end_the_task_blocked(implementation: str) -> None:
    """Repeated disagreement: the worker claims it is done, the stop hook refuses, the
    supervisor redirects, the worker never does what the redirects ask."""
    sup = Scripted(REDIRECT)
    s, task = make(implementation, sup)
    s.start_turn()
    for turn in range(3):
        fail_tests(s, 1, first=turn)
        s.on_stop_attempt(False)
        s.start_turn()
        assert (len(sup.reviews), s.failed_redirects) == (turn + 1, turn)
    fail_tests(s, 1, first=3)
    s.on_stop_attempt(False)
    with pytest.raises(TaskEnded) as ended:
        s.start_turn()  # the trigger after the third failed redirect: no fourth review
    assert (ended.value.outcome.kind, ended.value.outcome.reason) == (
        "blocked", "redirects_exhausted")
    assert len(sup.reviews) == 3 and task.used("reviews") == 3
    assert [r.failed_redirects for r in sup.reviews] == [0, 1, 2]
    assert [(g.followed, g.held) for g in sup.reviews[2].guidance] == [(False, False)] * 2


def test_a_check_that_holds_resets_the_count(implementation: str) -> None:
    sup = Scripted(REDIRECT)
    s, _ = make(implementation, sup)
    s.start_turn()
    for turn in range(2):
        fail_tests(s, 1, first=turn)
        s.on_stop_attempt(False)
        s.start_turn()
    assert s.failed_redirects == 1
    s.on_call("bash", {"command": "pip install parsimonious"}, id="p")  # followed, and held
    s.on_result(id="p", payload="Successfully installed")
    s.on_stop_attempt(False)
    s.start_turn()
    assert s.failed_redirects == 0
    for turn in range(2):
        s.on_call("bash", {"command": "pip install"}, id=f"p{turn}")  # followed, not held
        s.on_result(id=f"p{turn}", error="network unreachable")
        s.on_stop_attempt(False)
        s.start_turn()
    assert s.failed_redirects == 2 and len(sup.reviews) == 5
    # each review judges the redirect before it: A ignored, B held, C and D followed in vain
    assert [(g.review, g.followed, g.held) for g in sup.reviews[4].guidance] == [
        (1, False, False), (2, True, True), (3, True, False), (4, True, False)]


# --------------------------------------------------------------------------------------------
# Failure is explicit, never permission


def events() -> tuple[list[OperatorEvent], Any]:
    got: list[OperatorEvent] = []
    return got, got.append


def test_an_exception_counts_a_review_and_is_retried_at_once(implementation: str) -> None:
    got, on_event = events()
    sup = Scripted(RuntimeError("judge model overloaded"), REDIRECT)
    s, task = make(implementation, sup, on_event=on_event)
    s.start_turn()
    fail_tests(s, 3)
    turn = s.start_turn()
    assert "- supervisor: The last three test runs" in turn.feedback
    assert task.used("reviews") == 2 and s.decisions == [(1, "failed"), (2, "redirect")]
    failed = [e for e in got if e.kind == "supervisor_failed"]
    assert [e.message for e in failed] == [
        "[session s] supervisor_failed: review 1 raised RuntimeError: judge model overloaded "
        "(1 in a row)"]


@pytest.mark.parametrize("first, second, what", [
    (RuntimeError("down"), RuntimeError("down"), "raised RuntimeError: down"),
    ({"decision": "redirect", "rationale": "loop", "guidance": "install it"}, "not json",
     "returned a malformed decision: the decision is not JSON"),
    ("timeout", {"decision": "maybe", "rationale": "?"},
     "returned a malformed decision: decision must be one of continue, redirect, "
     "stop_complete, stop_blocked, not 'maybe'"),
])
def test_two_failures_in_a_row_end_the_task_blocked(implementation: str, first: Any,
                                                   second: Any, what: str) -> None:
    got, on_event = events()
    release = threading.Event()

    def supervisor(review: Review) -> Any:
        answer = first if review.number == 1 else second
        if answer == "timeout":
            release.wait(10)
            return CONTINUE
        if isinstance(answer, BaseException):
            raise answer
        return answer

    s, task = make(implementation, supervisor, on_event=on_event,
                   config=SupervisorConfig(review_timeout_s=0.05))
    try:
        s.start_turn()
        fail_tests(s, 3)
        with pytest.raises(TaskEnded) as ended:
            s.start_turn()
    finally:
        release.set()
    assert (ended.value.outcome.kind, ended.value.outcome.reason) == (
        "blocked", "supervisor_unavailable")
    assert task.used("reviews") == 2 and s.decisions == [(1, "failed"), (2, "failed")]
    messages = [e.message for e in got if e.kind == "supervisor_failed"]
    assert len(messages) == 2 and messages[1].startswith(
        f"[session s] supervisor_failed: review 2 {what}")
    assert messages[1].endswith("(2 in a row)")
    if first == "timeout":
        assert messages[0] == "[session s] supervisor_failed: review 1 timed out after " \
                              "0.05 s (1 in a row)"
    elif isinstance(first, dict):
        assert messages[0] == ("[session s] supervisor_failed: review 1 returned a malformed "
                               "decision: the decision has no 'check' field (1 in a row)")


def test_async_supervisor_failures(implementation: str) -> None:
    async def hangs(review: Review) -> SupervisorDecision:
        await asyncio.sleep(30)
        return CONTINUE

    s, task = make(implementation, hangs, config=SupervisorConfig(review_timeout_s=0.05))
    s.start_turn()
    fail_tests(s, 3)
    with pytest.raises(TaskEnded) as ended:
        asyncio.run(s.astart_turn())
    assert ended.value.outcome.reason == "supervisor_unavailable"
    assert s.decisions == [(1, "failed"), (2, "failed")]

    async def answers(review: Review) -> str:
        return json.dumps(REDIRECT.to_dict())

    s, task = make(implementation, answers)
    s.start_turn()
    fail_tests(s, 3)
    assert "pip install parsimonious" in asyncio.run(s.astart_turn()).feedback
    fail_tests(s, 3, first=3)
    assert "pip install parsimonious" in s.start_turn().feedback  # async, from sync code too


# --------------------------------------------------------------------------------------------
# Stale decisions


def test_stale_guidance_after_user_input_is_reviewed_again(implementation: str) -> None:
    got, on_event = events()
    s: Supervision

    def supervisor(review: Review) -> SupervisorDecision:
        if review.number == 1:
            s.new_revision()  # the user types while the supervisor thinks
            return SupervisorDecision.redirect("Install the dependency.", PIP, "loop")
        return SupervisorDecision.redirect("The user asked to skip that test: run the rest.",
                                           Check("bash", "called"), "new instructions")

    seen: list[int] = []

    def recording(review: Review) -> SupervisorDecision:
        seen.append(review.revision)
        return supervisor(review)

    s, task = make(implementation, recording, on_event=on_event)
    s.start_turn()
    fail_tests(s, 3)
    turn = s.start_turn()
    assert seen == [0, 1] and task.revision == 1
    assert "Install the dependency." not in turn.feedback
    assert "- supervisor: The user asked to skip that test: run the rest." in turn.feedback
    assert s.decisions == [(1, "stale"), (2, "redirect")] and task.used("reviews") == 2
    assert [e.message for e in got if e.kind == "supervisor_stale"] == [
        "[session s] supervisor review 1 was about revision 0, the run is at revision 1: not "
        "applied, reviewing the new revision"]


def test_a_compaction_is_a_new_revision(implementation: str) -> None:
    from tripwire.context.guard import SummaryResult
    task = Task("t", {"reviews": 10})
    summaries = ["the work so far"]

    def summarize(messages: Any, focus: str | None) -> SummaryResult:
        if not summaries:
            raise RuntimeError("summarizer down")
        return SummaryResult(summaries.pop(), "stop")

    g = Guardrails(session_id="s", task=task, implementation=implementation,
                   summarize=summarize)
    s = Supervision(Scripted(CONTINUE), g)
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}] + [
        {"role": "assistant", "content": "x" * 100}, {"role": "user", "content": "y" * 100}] * 40
    assert s.compact(history).kind == "summary" and s.revision == task.revision == 1
    # the summarizer fails and there is nothing to truncate: nothing changed, same revision
    assert s.compact(history[:2]).kind == "failed" and s.revision == 1


def test_stale_async_decision(implementation: str) -> None:
    async def run() -> tuple[Supervision, Any, list[int]]:
        thinking = asyncio.Event()
        revisions: list[int] = []

        async def supervisor(review: Review) -> SupervisorDecision:
            revisions.append(review.revision)
            if review.number == 1:
                thinking.set()
                await asyncio.sleep(0.01)  # the user's message arrives meanwhile
                return SupervisorDecision.stop_blocked("no way forward", "loop")
            return CONTINUE

        s, _ = make(implementation, supervisor)
        s.start_turn()
        fail_tests(s, 3)

        async def user() -> None:
            await thinking.wait()
            s.new_revision()

        turn, _ = await asyncio.gather(s.astart_turn(), user())
        return s, turn, revisions

    s, turn, revisions = asyncio.run(run())
    assert revisions == [0, 1] and s.task.outcome is None  # the stale stop was not applied
    assert s.decisions == [(1, "stale"), (2, "continue")]


# --------------------------------------------------------------------------------------------
# The reference supervisor


def test_model_supervisor_prompt_usage_and_parsing(implementation: str) -> None:
    asked: list[tuple[list[dict[str, str]], Any]] = []

    def complete(messages: list[dict[str, str]], schema: Any) -> Completion:
        asked.append((messages, schema))
        review = json.loads(messages[1]["content"].removeprefix("Review:\n"))
        repeated = review["long_term_record"][0]
        text = json.dumps({"decision": "redirect", "rationale": f"{repeated['count']} runs",
                           "guidance": "Install the dependency.",
                           "check": {"tool": "bash", "outcome": "succeeds",
                                     "args_contains": "pip install"}})
        return Completion(f"```json\n{text}\n```", model="judge", input_tokens=1500,
                          output_tokens=80, cost_usd=0.004)

    s, task = make(implementation, ModelSupervisor(complete))
    s.start_turn()
    fail_tests(s, 3)
    turn = s.start_turn()
    assert "- supervisor: Install the dependency. Checkpoint:" in turn.feedback
    messages, schema = asked[0]
    from tripwire.supervisor.schema import DECISION_SCHEMA, decision_schema_json
    assert schema is DECISION_SCHEMA
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].endswith(decision_schema_json())
    assert json.loads(messages[1]["content"].removeprefix("Review:\n"))["run"] == "s"
    assert (task.used("steps"), task.used("tokens"), task.used("usd")) == (1, 1580, 0.004)

    prose = ModelSupervisor(lambda m, sch: "I think the agent should continue.")
    s, task = make(implementation, prose)
    s.start_turn()
    fail_tests(s, 3)
    with pytest.raises(TaskEnded) as ended:
        s.start_turn()
    assert ended.value.outcome.reason == "supervisor_unavailable"

    async def acomplete(messages: list[dict[str, str]], schema: Any) -> str:
        return '{"decision": "continue", "rationale": "progress"}'

    s, _ = make(implementation, ModelSupervisor(acomplete))
    s.start_turn()
    fail_tests(s, 3)
    asyncio.run(s.astart_turn())
    assert s.decisions == [(1, "continue")]


# --------------------------------------------------------------------------------------------
# Bad input


def test_bad_configuration_is_a_config_error(implementation: str) -> None:
    g = Guardrails(implementation=implementation)
    with pytest.raises(ConfigError, match="supervisor must be a callable"):
        Supervision(None, g)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="supervises a Guardrails"):
        Supervision(lambda r: CONTINUE, Task("t"))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="review_every_steps"):
        SupervisorConfig(review_every_steps=0)
    with pytest.raises(ConfigError, match="review_timeout_s"):
        SupervisorConfig(review_timeout_s=float("nan"))
    with pytest.raises(ConfigError, match="acceptance"):
        Supervision(lambda r: CONTINUE, g, acceptance=[1])
    with pytest.raises(ConfigError, match="complete must be a callable"):
        ModelSupervisor("gpt")  # type: ignore[arg-type]
    with pytest.raises(MalformedDecision) as bad:
        SupervisorDecision.redirect("  ", PIP, "x")
    assert bad.value.field == "guidance"


def test_a_halted_session_is_not_reviewed(implementation: str) -> None:
    sup = Scripted(CONTINUE)
    s, _ = make(implementation, sup, mode="enforce")
    s.start_turn()
    for i in range(5):
        s.on_call("read_file", {"path": "a.py"}, id=f"r{i}")
        s.on_result(id=f"r{i}", payload="same")
    assert s.pending_triggers == ("critical",)
    with pytest.raises(GuardrailHalted):
        s.start_turn()
    assert sup.reviews == []
