"""``tripwire corpus`` in parallel: ``-j 2`` output byte-identical to serial on the shared
corpus (both engines), the size-ordered guided schedule, columnar results merged back into file
order, the first failing file's error whatever ran it, one worker pool per sweep, and format
detection in the workers (serial, -j 2 and Dask: the same sessions and the same errors)."""

from __future__ import annotations

import io
import json
import pickle
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tripwire.cli.main import main
from tripwire.corpus import measure as measure_module
from tripwire.corpus.measure import (
    MIN_CHUNK_BYTES,
    NEVER,
    Columns,
    Measured,
    SessionResult,
    measure_chunk,
    measure_paths,
    schedule,
)
from tripwire.corpus.sessions import corpus_files
from tripwire.interchange.adapters import FORMAT_NAMES
from tripwire.signals import SIGNAL_IDS, WatchdogConfig

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "corpus" / "scenarios"
EXAMPLES = ROOT / "corpus" / "examples"
LABELS = SCENARIOS / "labels.json"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _shared_corpora() -> list[str]:
    from conftest import need_shared

    root = need_shared("corpus")
    return [str(p) for p in sorted(root.iterdir()) if p.is_dir()]


# --------------------------------------------------------------------------------------------
# Byte-identical output


def test_stats_json_and_table_are_byte_identical_serial_and_j2_on_the_shared_corpus(
        implementation: str) -> None:
    paths = [*_shared_corpora(), str(SCENARIOS)]
    for form in (["--json"], []):
        serial = run("corpus", "stats", *paths, *form, "--implementation", implementation)
        parallel = run("corpus", "stats", *paths, *form, "--implementation", implementation,
                       "-j", "2")
        assert serial[0] == 0 and serial[2] == ""
        assert parallel == serial
    _code, out, _ = serial
    assert out.startswith("496 sessions, ")  # the table: 491 shared sessions + 5 scenarios
    records = [json.loads(line) for line in run("corpus", "stats", *paths, "--json",
                                                "-j", "2")[1].splitlines()]
    assert len(records) == 497 and records[-1]["kind"] == "summary"
    assert list(records[-1]["corpora"]) == paths  # each corpus, in the arguments' order


def test_sweep_is_identical_serial_and_j2_and_starts_one_pool(implementation: str,
                                                              monkeypatch) -> None:
    started = []
    real = measure_module._start_pool

    def counting(jobs: int, files: list) -> object:
        started.append(jobs)
        return real(jobs, files)

    monkeypatch.setattr(measure_module, "_start_pool", counting)
    argv = ["corpus", "sweep", str(SCENARIOS), str(EXAMPLES), "--signal", "tools-without-text",
            "--values", "4:9", "--labels", str(LABELS), "--json",
            "--implementation", implementation]
    serial = run(*argv)
    assert started == []
    assert run(*argv, "-j", "2") == serial
    assert started == [2]  # six threshold values, one pool
    assert len(serial[1].splitlines()) == 7  # a line per value, then the summary


# --------------------------------------------------------------------------------------------
# The schedule


def test_schedule_hands_out_the_largest_files_first_in_shrinking_chunks() -> None:
    mb = 1 << 20
    sizes = [1 * mb, 8 * mb, 2 * mb, 8 * mb, 4 * mb, 1 * mb, 16 * mb]  # 40 MB
    chunks = schedule(sizes, 2)
    # a chunk closes once it holds 1/8 of the bytes still to hand out (40 MB: 5 MB; then
    # 24 MB: 3 MB; 16 MB: 2 MB; 8 MB: 1 MB; ...); files by size, ties by index
    assert chunks == [[6], [1], [3], [4], [2], [0], [5]]
    assert sorted(i for c in chunks for i in c) == list(range(len(sizes)))


def test_schedule_groups_small_files_up_to_the_minimum_chunk() -> None:
    sizes = [1000] * 1000  # 1 MB of 1 kB files
    chunks = schedule(sizes, 2)
    assert [i for c in chunks for i in c] == list(range(1000))  # equal sizes: index order
    assert all(sum(sizes[i] for i in c) >= MIN_CHUNK_BYTES for c in chunks[:-1])
    assert [len(c) for c in chunks] == [263, 263, 263, 211]  # 256 KiB a chunk, the rest last
    assert schedule([], 2) == []


def test_two_greedy_workers_over_the_schedule_finish_within_a_small_chunk() -> None:
    """The point of largest-first guided chunks: whichever worker is free takes the next chunk,
    and the two end within the last chunks' size (with size as the work)."""
    sizes = [((i * 7919) % 997 + 1) * 1000 for i in range(2000)]  # 1 kB .. 1 MB, ~1 GB
    chunks = schedule(sizes, 2)
    loads = [0, 0]
    for chunk in chunks:
        loads[loads.index(min(loads))] += sum(sizes[i] for i in chunk)
    assert abs(loads[0] - loads[1]) <= 2 * MIN_CHUNK_BYTES + max(sizes)
    assert sum(sizes[i] for i in chunks[0]) >= sum(sizes) // 8  # the first chunk is large


# --------------------------------------------------------------------------------------------
# Columns in, rows in file order out


def test_a_chunk_in_any_order_measures_its_files_in_index_order(implementation: str) -> None:
    work = corpus_files([str(SCENARIOS), str(EXAMPLES)])
    files = [(i, t) for i, (_, t) in enumerate(work)]
    columns = measure_chunk(WatchdogConfig(), implementation, list(reversed(files)))
    assert isinstance(columns, Columns)
    assert columns.files.tolist() == list(range(len(work)))  # one session per file here
    assert columns.stats.shape == columns.first_trip.shape == (len(work), len(SIGNAL_IDS))
    serial = measure_paths([str(SCENARIOS), str(EXAMPLES)], implementation=implementation)
    assert columns.names == serial.sessions
    assert columns.stats.tolist() == serial.stats.tolist()
    # what a worker sends back: a handful of arrays, not one object per session
    assert len(pickle.dumps(columns)) < 2200  # 6 files x 15 signals, two int matrices


def test_measured_rows_are_the_session_results(implementation: str) -> None:
    results = measure_paths([str(SCENARIOS), str(EXAMPLES)], implementation=implementation)
    assert isinstance(results, Measured) and len(results) == 6
    rows = list(results)
    assert all(isinstance(r, SessionResult) for r in rows)
    assert [results[i] for i in range(6)] == rows == results[:]
    assert results[-1] == rows[5] and results[1:3] == rows[1:3]
    with pytest.raises(IndexError):
        results[6]
    first = rows[[r.session for r in rows].index("identical-failure.jsonl")]
    assert first.first_trip[SIGNAL_IDS.index("repeated-tool-call")] == 10
    assert first.first_trip[SIGNAL_IDS.index("alternating-tool-cycle")] is None
    assert int((results.first_trip == NEVER).sum()) == sum(
        t is None for r in rows for t in r.first_trip)
    assert results.corpora() == [str(SCENARIOS), str(EXAMPLES)]
    examples = results.of_corpus(str(EXAMPLES))
    assert list(examples) == [r for r in rows if r.corpus == str(EXAMPLES)]
    assert results != examples


def test_a_corpus_given_twice_is_one_corpus_of_both_copies() -> None:
    results = measure_paths([str(EXAMPLES), str(SCENARIOS), str(EXAMPLES)], jobs=2)
    assert results.corpora() == [str(EXAMPLES), str(SCENARIOS)]
    assert len(results.of_corpus(str(EXAMPLES))) == 2
    assert results == measure_paths([str(EXAMPLES), str(SCENARIOS), str(EXAMPLES)])


# --------------------------------------------------------------------------------------------
# Errors: the first failing file's, serial or parallel


def test_the_first_bad_file_is_reported_whatever_runs_the_files(tmp_path: Path,
                                                                implementation: str) -> None:
    good = (SCENARIOS / "slow-progress.jsonl").read_text(encoding="utf-8")
    for i in range(12):
        (tmp_path / f"s{i:02d}.jsonl").write_text(good, encoding="utf-8")
    # two bad files: the first in path order is small, the second large (so -j 2 hands it
    # out in the first chunk and it fails first)
    (tmp_path / "s03.jsonl").write_text(good + '{"type": "nope"}\n', encoding="utf-8")
    (tmp_path / "s09.jsonl").write_text(good * 400 + '{"type": "bad"}\n', encoding="utf-8")
    serial = run("corpus", "stats", str(tmp_path), "--implementation", implementation)
    assert serial[0] == 2 and serial[1] == ""
    assert serial[2].startswith(f"tripwire: {tmp_path / 's03.jsonl'}:")
    assert run("corpus", "stats", str(tmp_path), "--implementation", implementation,
               "-j", "2") == serial


# --------------------------------------------------------------------------------------------
# Detection in the workers: a parallel run's parent lists a directory's files without reading
# them; the workers detect each and skip what is of no known format, as the listing skips it


EXPECTED = "expected one of: " + ", ".join(FORMAT_NAMES)


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str | None]:
    """A local Dask cluster's address (None without the dask extra: then serial and -j 2)."""
    try:
        import distributed
    except ImportError:
        yield None
        return
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def three_ways(scheduler: str | None, *argv: str) -> tuple[int, str, str]:
    """The command's (exit code, stdout, stderr) in one process, asserted identical with -j 2
    and on the Dask cluster."""
    serial = run(*argv)
    assert run(*argv, "-j", "2") == serial
    if scheduler is not None:
        assert run(*argv, "--dask", scheduler) == serial
    return serial


@pytest.fixture
def folders(tmp_path: Path, monkeypatch) -> Path:
    """``mixed/``: three transcripts among JSON files of no known format (and a .txt no walk
    considers); ``none/``: only such JSON files; ``bad/``: a transcript and one with an invalid
    line; ``unknown.json``: a JSON file of no known format. Chunks of one file or so, so that
    -j 2 and Dask hand each folder out in several chunks."""
    monkeypatch.setattr(measure_module, "MIN_CHUNK_BYTES", 1)
    mixed, none, bad = tmp_path / "mixed", tmp_path / "none", tmp_path / "bad"
    for folder in (mixed, mixed / "c", none, bad):
        folder.mkdir()
    for name, source in (("a.jsonl", "identical-failure.jsonl"),
                         ("c/d.jsonl", "slow-progress.jsonl"),
                         ("z.jsonl", "two-strategy-cycle.jsonl"), ("labels.json", "labels.json")):
        shutil.copy(SCENARIOS / source, mixed / name)
    for folder in (mixed, none):
        (folder / "b.json").write_text('{"note": 1}\n', encoding="utf-8")
        (folder / "e.jsonl").write_text('{"x": 1}\n{"y": 2}\n', encoding="utf-8")
    (mixed / "f.txt").write_text("not a transcript\n", encoding="utf-8")
    good = (SCENARIOS / "slow-progress.jsonl").read_text(encoding="utf-8")
    (bad / "a.jsonl").write_text(good, encoding="utf-8")
    (bad / "b.jsonl").write_text(good + '{"type": "nope"}\n', encoding="utf-8")
    (tmp_path / "unknown.json").write_text('{"note": 1}\n', encoding="utf-8")
    return tmp_path


def test_a_parallel_runs_parent_leaves_a_directorys_detection_to_the_workers(
        folders: Path, monkeypatch) -> None:
    from tripwire.corpus.measure import Run
    from tripwire.interchange import adapters

    sniffed: list[Path] = []
    real = adapters._sniff
    monkeypatch.setattr(adapters, "_sniff", lambda path: sniffed.append(path) or real(path))
    mixed, file_argument = folders / "mixed", SCENARIOS / "slow-progress.jsonl"
    paths = [str(mixed), str(file_argument)]
    with Run(paths, jobs=2) as parallel:
        listed = [(t.path, t.format, t.name) for _, t in parallel.work]
        measured = parallel.measure()
    # every file of a transcript suffix, sorted, undetected; the file argument detected
    assert listed == [*((mixed / name, None, name) for name in (
        "a.jsonl", "b.json", "c/d.jsonl", "e.jsonl", "labels.json", "z.jsonl")),
        (file_argument, "interchange", str(file_argument))]
    assert sniffed == [file_argument]  # the workers' detection is theirs (forked processes)
    serial = measure_paths(paths)
    # a serial run detects the directory's files as it lists them
    assert sniffed[1:] == [path for path, _, _ in listed]
    assert measured == serial
    assert measured.sessions == ["a.jsonl", "c/d.jsonl", "z.jsonl", str(file_argument)]
    assert measured.corpus == [str(mixed)] * 3 + [str(file_argument)]
    # what a chunk reports back: the files it skipped (b.json, e.jsonl, labels.json)
    chunk = measure_chunk(WatchdogConfig(), None, list(enumerate(t for _, t in parallel.work)))
    assert chunk.skipped == (1, 3, 4) and chunk.files.tolist() == [0, 2, 5, 6]


def test_a_directory_of_transcripts_among_other_json_reads_the_same_whatever_runs_it(
        folders: Path, scheduler: str | None, implementation: str) -> None:
    mixed = str(folders / "mixed")
    code, out, err = three_ways(scheduler, "corpus", "stats", mixed, str(SCENARIOS), "--json",
                                "--implementation", implementation)
    assert (code, err) == (0, "")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["session"] for r in records[:-1]] == [
        "a.jsonl", "c/d.jsonl", "z.jsonl", "false-success.jsonl", "identical-failure.jsonl",
        "polling-wait-and-verify.jsonl", "slow-progress.jsonl", "two-strategy-cycle.jsonl"]
    assert list(records[-1]["corpora"]) == [mixed, str(SCENARIOS)]
    assert records[0]["stats"] == records[4]["stats"]  # a.jsonl is identical-failure.jsonl


def test_a_directory_with_no_transcript_fails_the_same_whatever_runs_it(
        folders: Path, scheduler: str | None) -> None:
    none = folders / "none"
    assert three_ways(scheduler, "corpus", "stats", str(SCENARIOS), str(none)) == (
        2, "", f"tripwire: no transcripts in directory {none} ({EXPECTED})\n")
    lone = folders / "lone"  # one file: -j 2 measures it in the main process, detecting it
    lone.mkdir()
    shutil.copy(none / "b.json", lone / "b.json")
    assert three_ways(scheduler, "corpus", "stats", str(lone)) == (
        2, "", f"tripwire: no transcripts in directory {lone} ({EXPECTED})\n")


def test_a_file_argument_of_no_known_format_fails_the_same_whatever_runs_it(
        folders: Path, scheduler: str | None) -> None:
    unknown = folders / "unknown.json"
    assert three_ways(scheduler, "corpus", "stats", str(folders / "mixed"), str(unknown)) == (
        2, "", f"tripwire: {unknown}: not a transcript of a known format ({EXPECTED})\n")


def test_an_invalid_line_fails_the_same_whatever_runs_it(folders: Path,
                                                         scheduler: str | None) -> None:
    bad = folders / "bad" / "b.jsonl"
    code, out, err = three_ways(scheduler, "corpus", "stats", str(folders / "mixed"),
                                str(folders / "bad"))
    assert (code, out) == (2, "")
    assert err.startswith(f"tripwire: {bad}:29: unknown event type 'nope'")


def test_a_listing_error_comes_before_any_read_error_in_the_arguments_order(
        folders: Path, scheduler: str | None) -> None:
    """A serial run lists (and detects) every file before it reads one: of several problems
    it reports the first in the listing, and a file's read error only when the listing has
    none. A parallel run, which learns what its workers skipped only as they read, reports
    the same one."""
    bad, none, unknown, missing = (str(folders / name) for name in
                                   ("bad", "none", "unknown.json", "missing.jsonl"))
    empty = f"tripwire: no transcripts in directory {none} ({EXPECTED})\n"
    not_known = f"tripwire: {unknown}: not a transcript of a known format ({EXPECTED})\n"
    gone = f"tripwire: {missing}: no such file or directory\n"
    for paths, err in (([bad, none], empty),  # the read error comes first in file order
                       ([none, missing], empty), ([missing, none], gone),
                       ([none, unknown], empty), ([bad, unknown], not_known),
                       ([none, bad, none], empty)):
        assert three_ways(scheduler, "corpus", "stats", *paths) == (2, "", err), paths
