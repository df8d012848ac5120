"""``tripwire corpus stats|validate|sweep`` on the shipped labelled scenarios (``corpus/``):
exact first trips and statistics on both engines, the label gate's exit codes, sweeps, the
report in a real headless browser, and identical results serial / -j 2 / Dask."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from browser import dump_dom

from tripwire.cli.main import main
from tripwire.corpus import measure_paths
from tripwire.corpus.labels import read_labels
from tripwire.signals import SIGNAL_IDS, WatchdogConfig

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "corpus" / "scenarios"
LABELS = SCENARIOS / "labels.json"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def by_session(implementation: str) -> dict:
    return {r.session: r for r in measure_paths([str(SCENARIOS)], implementation=implementation)}


def trips(result) -> dict[str, int]:
    return {s: e for s, e in zip(SIGNAL_IDS, result.first_trip, strict=True) if e is not None}


def test_scenarios_trip_exactly_what_they_must(implementation: str) -> None:
    r = by_session(implementation)
    assert sorted(r) == ["false-success.jsonl", "identical-failure.jsonl",
                         "polling-wait-and-verify.jsonl", "slow-progress.jsonl",
                         "two-strategy-cycle.jsonl"]
    # 6 identical failing runs: the 3rd failure (event 7) is one error thrice, repeated-
    # failure's alone (the failure streak stands down for it, SPEC §12.3); the 5th call (10)
    assert trips(r["identical-failure.jsonl"]) == {"repeated-tool-call": 10,
                                                   "repeated-failure": 7}
    # (the last: recycled-calls' run, five repeated failures with their first answer; it stands
    # down for the repeat run and counts for nothing below its threshold of 8)
    assert r["identical-failure.jsonl"].stats[:10] == (6, 0, 6, 6, 6, 0, 0, 6, 6, 5)
    # two edits undoing each other: the 3rd lap's last call; the "ok" payloads repeat too
    assert trips(r["two-strategy-cycle.jsonl"]) == {"alternating-tool-cycle": 12,
                                                    "no-new-state": 15}
    assert r["two-strategy-cycle.jsonl"].stats[:10] == (1, 4, 4, 8, 0, 0, 7, 8, 0, 6)
    # polling: 8 wait_and_verify with backoff, "pending" 7 times (exempt from no-new-state)
    assert trips(r["polling-wait-and-verify.jsonl"]) == {}
    assert r["polling-wait-and-verify.jsonl"].stats[:10] == (1, 0, 1, 8, 0, 0, 0, 4, 0, 0)
    assert trips(r["slow-progress.jsonl"]) == {}
    assert r["slow-progress.jsonl"].stats[:10] == (1, 0, 6, 1, 1, 0, 4, 4, 1, 1)
    # a false claim of success is invisible to the watchdog: no signal trips
    assert trips(r["false-success.jsonl"]) == {}
    assert r["false-success.jsonl"].events == 8


def test_polling_needs_its_exemption(implementation: str) -> None:
    config = WatchdogConfig(signals={"no-new-state": {"exempt_tools": []}})
    (r,) = measure_paths([str(SCENARIOS / "polling-wait-and-verify.jsonl")], config,
                         implementation=implementation)
    assert trips(r) == {"no-new-state": 19}  # the 7th "status: pending", 6th already seen


def test_validate_passes_the_shipped_scenarios(implementation: str) -> None:
    code, out, _ = run("corpus", "validate", str(SCENARIOS), "--labels", str(LABELS),
                       "--implementation", implementation)
    assert code == 0
    assert lines(out) == [{"kind": "summary", "sessions": 5, "labelled": 5, "healthy": 2,
                           "violations": 0, "passed": True}]


def test_validate_gates_a_threshold_change_that_loses_a_must_trip(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[signals."repeated-tool-call"]\nthreshold = 7\n')
    code, out, _ = run("corpus", "validate", str(SCENARIOS), "--labels", str(LABELS),
                       "--config", str(config))
    assert code == 3
    assert lines(out)[0] == {"kind": "violation", "session": "identical-failure.jsonl",
                             "corpus": str(SCENARIOS), "label": "runaway",
                             "signal": "repeated-tool-call", "event": None,
                             "problem": "must trip, did not"}
    assert lines(out)[-1]["passed"] is False


def test_validate_gates_a_healthy_session_tripping_a_critical_signal(tmp_path: Path) -> None:
    labels = tmp_path / "outcomes.json"  # the SWE-bench outcome shape
    labels.write_text(json.dumps({"resolved": {"identical-failure": True,
                                               "two-strategy-cycle": False}}))
    code, out, _ = run("corpus", "validate", str(SCENARIOS), "--labels", str(labels))
    assert code == 3
    assert [(v["session"], v["signal"], v["event"]) for v in lines(out)[:-1]] == [
        ("identical-failure.jsonl", "repeated-tool-call", 10)]
    assert lines(out)[-1] == {"kind": "summary", "sessions": 5, "labelled": 2, "healthy": 1,
                              "violations": 1, "passed": False}


def test_validate_without_labels_lists_every_critical_trip() -> None:
    code, out, _ = run("corpus", "validate", str(SCENARIOS))
    assert code == 0
    assert [(v["kind"], v["session"], v["signal"], v["event"]) for v in lines(out)[:-1]] == [
        ("critical_trip", "identical-failure.jsonl", "repeated-tool-call", 10),
        ("critical_trip", "two-strategy-cycle.jsonl", "alternating-tool-cycle", 12)]
    assert lines(out)[-1]["critical_trips"] == 2


def test_stats_json_lines_exactly(implementation: str) -> None:
    code, out, _ = run("corpus", "stats", str(SCENARIOS / "identical-failure.jsonl"), "--json",
                       "--implementation", implementation)
    assert code == 0
    session, summary = lines(out)
    assert session == {
        # a file given directly is named by the argument itself (as replay names it)
        "kind": "session", "session": str(SCENARIOS / "identical-failure.jsonl"), "events": 16,
        "stats": dict(zip(SIGNAL_IDS, (6, 0, 6, 6, 6, 0, 0, 6, 6, 5, 0, 1, 0, 0, 1, 1),
                          strict=True)),
        "first_trip": dict(zip(SIGNAL_IDS, (10, None, None, None, None, None, None, None, 7,
                                             None, None, None, None, None, None, None),
                               strict=True)),
    }
    assert summary["kind"] == "summary"
    assert summary["sessions"] == 1 and summary["events"] == 16
    assert summary["signals"]["repeated-tool-call"] == {
        "threshold": 5, "median": 6.0, "p90": 6.0, "p99": 6.0, "max": 6, "margin": -1,
        "trips": 1, "trip_rate": 1.0}
    assert summary["signals"]["repeated-failure"] == {
        "threshold": 3, "median": 6.0, "p90": 6.0, "p99": 6.0, "max": 6, "margin": -3,
        "trips": 1, "trip_rate": 1.0}


def test_stats_distribution_over_the_scenarios() -> None:
    _code, out, _ = run("corpus", "stats", str(SCENARIOS), "--json")
    summary = lines(out)[-1]
    assert summary["sessions"] == 5
    silence = summary["signals"]["tools-without-text"]
    # peaks 2, 6, 4, 4, 8: median 4, p90 by linear interpolation 6 + 0.6 * 2
    assert silence == {"threshold": 12, "median": 4.0, "p90": pytest.approx(7.2),
                       "p99": pytest.approx(7.92), "max": 8, "margin": 4, "trips": 0,
                       "trip_rate": 0.0}
    assert list(summary["corpora"]) == [str(SCENARIOS)]


def test_stats_terminal_table() -> None:
    code, out, _ = run("corpus", "stats", str(SCENARIOS))
    assert code == 0
    assert out.splitlines()[0] == "5 sessions, 95 events"  # the five files hold 95 lines
    row = next(line for line in out.splitlines() if line.startswith("repeated-tool-call"))
    assert row.split() == ["repeated-tool-call", "5", "1.0", "4.0", "5.8", "6", "-1", "1"]


def test_sweep_counts_trips_per_value_by_label(tmp_path: Path) -> None:
    code, out, _ = run("corpus", "sweep", str(SCENARIOS), "--signal", "repeated-tool-name",
                       "--values", "6:9", "--labels", str(LABELS), "--json")
    assert code == 0
    points, result = lines(out)[:-1], lines(out)[-1]
    # name peaks: identical-failure 6 (stood down: its repeat run reached 5), cycle 8,
    # polling 8 (healthy)
    assert [(p["value"], p["trips"], p["by_label"]["healthy"], p["by_label"]["unhealthy"])
            for p in points] == [(6, 2, 1, 1), (7, 2, 1, 1), (8, 2, 1, 1), (9, 0, 0, 0)]
    assert points[0]["median_first_trip"] == 13.5  # events 12 (polling) and 15 (cycle)
    assert result == {"kind": "summary", "signal": "repeated-tool-name", "knob": "threshold",
                      "default": 15, "smallest_without_healthy_trip": 9, "healthy_peak": 8,
                      "margin": 1}


@pytest.mark.parametrize("argv, message", [
    (["--values", "9:x"], "--values takes START:STOP"),
    (["--values", "0:3"], "positive integers"),
])
def test_sweep_rejects_bad_values(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["corpus", "sweep", str(SCENARIOS), "--signal", "no-op-streak", *argv])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "call", "name": "a"}\n{"type": "nope"}\n')
    code, _, err = run("corpus", "stats", str(bad))
    assert code == 2
    assert err == (f"tripwire: {bad}:2: unknown event type 'nope' (known: call, result, text, "
                   "usage, turn_start, turn_end, reset, task_start, task_end, stop_attempt, "
                   "retry, compaction, budget_raise, check_in)\n")
    labels = tmp_path / "labels.json"
    labels.write_text("[1, 2]")
    code, _, err = run("corpus", "validate", str(SCENARIOS), "--labels", str(labels))
    assert (code, err) == (2, f"tripwire: {labels}: a label file is a JSON object (or a "
                              "tau-bench results array)\n")
    code, _, err = run("corpus", "stats", str(tmp_path / "missing"))
    assert code == 2 and err.count("\n") == 1


def test_the_swe_bench_outcome_file_reads_as_labels() -> None:
    from conftest import need_shared

    labels = read_labels(need_shared("corpus", "mini-swe-agent-swebench", "outcomes.json"))
    assert labels.of("astropy__astropy-12907.traj.json").healthy
    assert labels.of("astropy__astropy-13033.traj.json").label == "failed"
    assert labels.of("no-such-instance") is None


# --------------------------------------------------------------------------------------------
# Scale: identical results whatever runs them


def test_serial_processes_and_dask_give_identical_results() -> None:
    paths = [str(SCENARIOS), str(ROOT / "corpus" / "examples")]
    serial = measure_paths(paths)
    assert len(serial) == 6
    assert measure_paths(paths, jobs=2) == serial
    distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        assert measure_paths(paths, dask=cluster.scheduler_address) == serial
        on_dask = run("corpus", "stats", *paths, "--json", "--dask", cluster.scheduler_address)
    assert on_dask == run("corpus", "stats", *paths, "--json") == run(
        "corpus", "stats", *paths, "--json", "-j", "2")
    assert on_dask[0] == 0 and len(lines(on_dask[1])) == 7


# --------------------------------------------------------------------------------------------
# The report, looked at in a real browser


def _loaded_widths(page: Path) -> list[int]:
    """Each image's naturalWidth once the page has loaded, as Chromium saw it."""
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text(encoding="utf-8").replace(
        "</body>", "<script>window.addEventListener('load', () => document.body.setAttribute("
        "'data-widths', [...document.images].map(i => i.naturalWidth).join(',')));</script>"
        "</body>"), encoding="utf-8")
    dom = dump_dom(probe.as_uri())
    marker = 'data-widths="'
    assert marker in dom, dom[:500]
    start = dom.index(marker) + len(marker)
    return [int(w) for w in dom[start:dom.index('"', start)].split(",")]


def _seen(page: Path) -> dict:
    """What Chromium shows of the report once loaded: the legend's terms, and per signal the
    sessions listed as tripping it with the files their links open."""
    import json
    import urllib.parse

    probe = page.with_name("probe-seen.html")
    script = (
        "<script>window.addEventListener('load', () => document.body.setAttribute('data-seen',"
        " JSON.stringify({terms: [...document.querySelectorAll('dt')].map(d => d.textContent),"
        " trips: Object.fromEntries([...document.querySelectorAll('h2')].map(h => [h.id,"
        " [...(h.nextElementSibling.nextElementSibling || {querySelectorAll: () => []})"
        ".querySelectorAll('a')].map(a => [a.textContent, a.href])]))})));</script></body>")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", script),
                     encoding="utf-8")
    dom = dump_dom(probe.as_uri())
    start = dom.index('data-seen="') + len('data-seen="')
    raw = dom[start:dom.index('"', start)]
    import html as html_module

    seen = json.loads(html_module.unescape(raw))
    for signal, links in seen["trips"].items():
        seen["trips"][signal] = [(name, urllib.parse.unquote(urllib.parse.urlparse(href).path))
                                 for name, href in links]
    return seen


def test_stats_report_images_load_in_chromium(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the report extra is not installed")
    code, _, _ = run("corpus", "stats", str(SCENARIOS), str(ROOT / "corpus" / "examples"),
                     "--report", str(tmp_path / "r"))
    assert code == 0
    page = tmp_path / "r" / "index.html"
    assert sorted(p.name for p in page.parent.glob("*.png")) == sorted(
        [f"hist-{s}.png" for s in SIGNAL_IDS] + [f"corpora-{s}.png" for s in SIGNAL_IDS])
    widths = _loaded_widths(page)
    assert len(widths) == 2 * len(SIGNAL_IDS)  # a histogram and a comparison per signal
    assert all(w == 400 for w in widths)  # 5 in x 80 dpi: every image decoded


def test_stats_report_explains_its_terms_and_links_the_tripping_sessions(tmp_path: Path
                                                                         ) -> None:
    """Issue 23: the page had no legend for "margin" and "peak per session", and did not say
    which sessions trip a signal; now it does, each linked to its file (opened in Chromium)."""
    pytest.importorskip("matplotlib", reason="the report extra is not installed")
    code, _, _ = run("corpus", "stats", str(SCENARIOS), str(ROOT / "corpus" / "examples"),
                     "--report", str(tmp_path / "r"))
    assert code == 0
    seen = _seen(tmp_path / "r" / "index.html")
    assert seen["terms"] == ["peak per session", "median, p90, p99, max", "margin",
                             "trips, trip rate"]
    trips = seen["trips"]
    assert set(trips) == {f"trips-{s}" for s in SIGNAL_IDS}
    assert [name for name, _ in trips["trips-repeated-tool-call"]] == [
        "identical-failure.jsonl", "read-file-loop.jsonl"]
    assert [name for name, _ in trips["trips-alternating-tool-cycle"]] == [
        "two-strategy-cycle.jsonl"]
    assert trips["trips-dominant-tool-call"] == []
    for links in trips.values():
        for name, path in links:
            assert Path(path).is_file() and Path(path).name == name  # the link opens the file


def test_histograms_put_integer_peaks_on_integer_bins_and_ticks() -> None:
    """A peak is an integer: each bar is centred on its value and ticks are whole numbers
    (they used to be bin edges, so a peak of 5 drew between the ticks 5 and 6)."""
    plt = pytest.importorskip("matplotlib.pyplot", reason="the report extra is not installed")
    from tripwire.corpus.report import histogram

    fig, ax = plt.subplots()
    histogram(ax, [1, 1, 1, 1, 6, 7], 5, "repeated-tool-call")
    fig.canvas.draw()
    centres = [p.get_x() + p.get_width() / 2 for p in ax.patches if p.get_height() > 0]
    assert centres == [1.0, 6.0, 7.0]
    assert all(float(t).is_integer() for t in ax.get_xticks())
    assert all(float(t).is_integer() for t in ax.get_yticks())
    (line,) = ax.get_lines()
    assert line.get_xdata()[0] == 4.5  # between 4 (no trip) and 5 (trips)
    plt.close(fig)


def test_sweep_report_image_loads_in_chromium(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the report extra is not installed")
    code, _, _ = run("corpus", "sweep", str(SCENARIOS), "--signal", "tools-without-text",
                     "--values", "2:12", "--labels", str(LABELS), "--report", str(tmp_path))
    assert code == 0
    assert _loaded_widths(tmp_path / "index.html") == [480]


def test_progress_bar_only_when_asked_or_on_a_terminal(capsys) -> None:
    pytest.importorskip("tqdm", reason="the corpus extra is not installed")
    measure_paths([str(SCENARIOS)])  # stderr is not a terminal here: no bar
    assert capsys.readouterr().err == ""
    with_bar = measure_paths([str(SCENARIOS)], progress=True)
    assert "| 0/5 [" in capsys.readouterr().err  # tqdm's bar over the 5 files, on stderr
    assert with_bar == measure_paths([str(SCENARIOS)])


def _replayed_first_trips(paths: list[str], implementation: str) -> dict[str, dict[str, int]]:
    """Each session's first alert per signal as ``tripwire replay`` (one event at a time)
    reports it."""
    from tripwire.cli.replay import ReplayOptions, ReplayStats, replay_transcript
    from tripwire.corpus.measure import corpus_config
    from tripwire.corpus.sessions import corpus_files

    options = ReplayOptions(guardrails=corpus_config(WatchdogConfig()),
                            implementation=implementation)
    first: dict[str, dict[str, int]] = {}
    for _, transcript in corpus_files(paths):
        for record in replay_transcript(transcript, options, ReplayStats()):
            if record["kind"] == "alert":
                session = record.get("session", transcript.name)
                first.setdefault(session, {}).setdefault(record["signal"], record["event"])
    return first


def test_first_trips_are_replays_alerts(implementation: str) -> None:
    paths = [str(SCENARIOS), str(ROOT / "corpus" / "examples")]
    measured = {r.session: trips(r) for r in measure_paths(paths, implementation=implementation)
                if trips(r)}
    assert sorted(measured) == ["identical-failure.jsonl", "read-file-loop.jsonl",
                                "two-strategy-cycle.jsonl"]
    assert measured == _replayed_first_trips(paths, implementation)


def test_first_trips_are_replays_alerts_on_the_shared_corpus() -> None:
    from conftest import need_shared

    paths = [str(need_shared("corpus", "tau-bench-airline")),
             str(need_shared("corpus", "swe-agent-demos")),
             str(need_shared("corpus", "claude-code-samples"))]
    results = measure_paths(paths)
    assert len(results) == 230
    measured = {r.session: trips(r) for r in results if trips(r)}
    # sessions with at least one alert: 9 since shell-tool identity (SPEC §11.2), which no
    # longer counts the 3 SWE-agent demos' varied commands as one `bash` name run
    assert len(measured) == 9
    assert measured == _replayed_first_trips(paths, "native")


def test_an_unreachable_dask_scheduler_is_one_line_and_exit_2() -> None:
    dask = pytest.importorskip("dask", reason="the dask extra is not installed")
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        code, out, err = run("corpus", "stats", str(SCENARIOS), "--dask", "tcp://127.0.0.1:9")
    assert (code, out) == (2, "")
    assert err.startswith("tripwire: --dask: cannot reach a Dask scheduler at "
                          "'tcp://127.0.0.1:9': ")
    assert err.count("\n") == 1


def test_an_unwritable_report_directory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the report extra is not installed")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, err = run("corpus", "stats", str(SCENARIOS), "--report", str(blocker / "r"))
    assert (code, err) == (2, f"tripwire: --report {blocker / 'r'}: Not a directory\n")


def _identity_runs(paths: list[str]) -> dict[str, int]:
    """Each session's longest run of calls with one tool identity, by the rule's owner
    (``tool_identity``: ``tool:program`` for a shell tool), not by the engines."""
    from tripwire.corpus.sessions import corpus_files, session_events
    from tripwire.identity.shell import tool_identity
    from tripwire.interchange.events import Call

    shells = WatchdogConfig().engine_settings().shell_tools
    last: dict[str, str] = {}
    run_of: dict[str, int] = {}
    longest: dict[str, int] = {}
    for _, transcript in corpus_files(paths):
        for name, event in session_events(transcript):
            longest.setdefault(name, 0)
            if isinstance(event, Call):
                key = tool_identity(event.name, event.args, shells)
                run_of[name] = run_of.get(name, 0) + 1 if last.get(name) == key else 1
                last[name] = key
                longest[name] = max(longest[name], run_of[name])
    return longest


def test_the_name_statistic_is_the_shell_tool_identity_run(tmp_path: Path,
                                                           implementation: str) -> None:
    """The report's ``repeated-tool-name`` statistic (histogram, box plots, table) is the run the
    detector counts: calls of one shell tool are told apart by the program they run."""
    session = tmp_path / "bash-only.jsonl"
    commands = ["ls", "ls -la", "sed -n 1p a", "sed -i s/a/b/ a", "sed -n 2p a", "cd x && pytest"]
    session.write_text("".join(
        json.dumps({"type": "call", "name": "bash", "args": json.dumps({"command": c})}) + "\n"
        for c in commands))
    (result,) = measure_paths([str(session)], implementation=implementation)
    name = SIGNAL_IDS.index("repeated-tool-name")
    assert result.stats[name] == 3  # bash:sed three times; the plain name would be 6
    assert _identity_runs([str(session)]) == {str(session): 3}


def test_the_name_statistic_on_the_shared_corpus(implementation: str) -> None:
    from conftest import need_shared

    paths = [str(need_shared("corpus", "mini-swe-agent-swebench")),
             str(need_shared("corpus", "swe-agent-demos"))]
    name = SIGNAL_IDS.index("repeated-tool-name")
    measured = {r.session: r.stats[name]
                for r in measure_paths(paths, implementation=implementation)}
    assert measured == _identity_runs(paths)
    assert len(measured) == 283 and max(measured.values()) == 33  # 33 `sed` calls in a row


def test_stats_reads_a_transcript_with_the_hosts_task_events(tmp_path: Path,
                                                            implementation: str) -> None:
    """A task's start and end, stop attempts and retries are the host's events (recorded by
    OpenHands, claude -p ...): counted as events, never a batch row, so the loop after them
    trips at the same position as without them."""
    loop = [{"type": "call", "name": "read_file", "args": {"path": "a.py"}},
            {"type": "result", "name": "read_file", "payload": "same"}] * 5
    events = [{"type": "task_start", "task": "t1"}, {"type": "turn_start"}, *loop,
              {"type": "stop_attempt", "accepted": False}, {"type": "retry", "reason": "429"},
              {"type": "task_end", "exhausted": "steps"}]
    path = tmp_path / "host.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    code, out, err = run("corpus", "stats", str(path), "--json", "--implementation",
                         implementation)
    assert code == 0, err
    session, summary = lines(out)
    assert session["events"] == len(events) == 15
    # the 5th identical call is event 10 (1-based: task_start 1, turn_start 2, calls 3, 5, ...)
    assert session["first_trip"]["repeated-tool-call"] == 10
