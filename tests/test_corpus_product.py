"""The seed's corpus test as a product test: on the recorded sessions of ../shared/corpus, the
default tools-without-text threshold (12) and every critical signal trip on no session labelled
healthy (SWE-bench resolved; tau-bench reward 1). The true numbers of the shared corpus are
pinned too, including repeated-tool-name on bash-only agents, by program since SPEC §11.2."""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import need_shared

from tripwire.corpus import measure_paths
from tripwire.corpus.analysis import critical_trips
from tripwire.corpus.labels import read_labels
from tripwire.signals import SIGNAL_IDS

CORPUS = need_shared("corpus")
MINI = CORPUS / "mini-swe-agent-swebench"
TAU = CORPUS / "tau-bench-airline"
SILENCE = SIGNAL_IDS.index("tools-without-text")
NAME = SIGNAL_IDS.index("repeated-tool-name")


@pytest.fixture(scope="module")
def results():
    paths = [str(MINI), str(TAU), str(CORPUS / "swe-agent-demos"),
             str(CORPUS / "claude-code-samples")]
    return measure_paths(paths, jobs=2)


@pytest.fixture(scope="module")
def healthy(results):
    mini = read_labels(MINI / "outcomes.json")
    tau = read_labels(TAU / "gpt-4o-airline.json")
    out = []
    for r in results:
        labels = mini if r.corpus == str(MINI) else tau if r.corpus == str(TAU) else None
        label = labels.of(r.session) if labels is not None else None
        if label is not None and label.healthy:
            out.append(r)
    return out


def test_the_shared_corpus_as_read(results) -> None:
    by_corpus = Counter(r.corpus.rsplit("/", 1)[-1] for r in results)
    assert by_corpus == {"mini-swe-agent-swebench": 261, "tau-bench-airline": 200,
                         "swe-agent-demos": 22, "claude-code-samples": 8}
    assert sum(r.events for r in results) == 38728


def test_no_healthy_session_trips_silence_or_a_critical_signal(healthy) -> None:
    # 197 resolved SWE-bench instances, 84 tau-bench tasks with reward 1
    assert Counter(r.corpus.rsplit("/", 1)[-1] for r in healthy) == {
        "mini-swe-agent-swebench": 197, "tau-bench-airline": 84}
    assert [r.session for r in healthy if r.first_trip[SILENCE] is not None] == []
    assert [(r.session, critical_trips(r)) for r in healthy if critical_trips(r)] == []
    assert max(r.stats[SILENCE] for r in healthy) == 11  # one call short of the threshold


def test_what_trips_on_the_rest_of_the_corpus(results) -> None:
    # the only critical trip of the whole corpus: a failed tau-bench task (reward 0)
    assert [(r.session, critical_trips(r)) for r in results if critical_trips(r)] == [
        ("gpt-4o-airline.json#task-9-trial-2", [("alternating-tool-cycle", 65)])]
    assert sorted(r.session for r in results if r.first_trip[SILENCE] is not None) == [
        "gpt-4o-airline.json#task-2-trial-1", "gpt-4o-airline.json#task-28-trial-1",
        "gpt-4o-airline.json#task-33-trial-0"]  # all three reward 0


def test_repeated_tool_name_on_a_bash_only_agent_counts_programs_not_the_shell(results):
    # mini-swe-agent has one tool (bash): with the name alone nearly every session was one long
    # same-name run (258 of 261 warned, median longest run 35); the per-program identity of
    # shell tools (SPEC §11.2) leaves one session, 33 `sed` edits in a row
    mini = [r for r in results if r.corpus == str(MINI)]
    assert [r.session for r in mini if r.first_trip[NAME] is not None] == [
        "django__django-16560.traj.json"]
    assert sorted(r.stats[NAME] for r in mini)[len(mini) // 2] == 3
    assert max(r.stats[NAME] for r in mini) == 33
