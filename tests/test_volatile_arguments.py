"""Volatile arguments are the same call (issue 39): a call re-run with only a cache-buster, a
``sleep`` duration, a timestamp or request id in a URL query, or a generated temporary name
changed has the same canonical key, so the repeat, cycle and recycled-call detectors see one
call. Line ranges, offsets, page numbers and every other number stay: they are progress.

Both engines, exactly; a differential over every tool call of ../shared/corpus and the format
samples (the Python and native keys and canonical forms byte for byte); and the corpus figure
the change must keep: no healthy session gains a critical alert."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED

from tripwire import Watchdog, WatchdogConfig
from tripwire.engine import select as _engine
from tripwire.identity.answer import PLACEHOLDER
from tripwire.identity.arguments import scan_argument

P = PLACEHOLDER.decode()
UUID = "0ccf1a04-1b4c-43b6-8aa5-79e41db43a68"


def engine(implementation: str) -> Any:
    return _engine.load(implementation)


def key(implementation: str, name: str, args: Any) -> int:
    return int(engine(implementation).canonical_key(name, args))


def bash(command: str) -> str:
    return json.dumps({"command": command})


def same(implementation: str, a: str, b: str, name: str = "bash") -> bool:
    return key(implementation, name, bash(a)) == key(implementation, name, bash(b))


# -- each class ------------------------------------------------------------------------------


@pytest.mark.parametrize("a, b", [
    ("curl 'http://localhost:8000/api/items?_=1733480000123'",
     "curl 'http://localhost:8000/api/items?_=1733480071999'"),          # epoch ms
    ("curl -s 'https://x.test/logs?since=1733480000&limit=50'",
     "curl -s 'https://x.test/logs?since=1733480100&limit=50'"),         # epoch s
    ("curl 'https://x.test/e?ts=2026-12-04T10:22:31Z&q=err'",
     "curl 'https://x.test/e?ts=2026-12-04T10:25:02.118Z&q=err'"),       # ISO date-time
    (f"curl 'https://x.test/status?request_id={UUID}'",
     "curl 'https://x.test/status?request_id=7d44c5e2-0d3b-4a8e-9a51-2f7c1f0b9e11'"),  # uuid
    ("curl 'https://x.test/poll?nonce=9f86d081884c7d65'",
     "curl 'https://x.test/poll?nonce=2c26b46b68ffc68f'"),               # hex id
    ("sleep 7 && tail -n 50 app.log", "sleep 30 && tail -n 50 app.log"),
    ("sleep 0.5; curl -s localhost:8000/health", "sleep 2; curl -s localhost:8000/health"),
    ("sleep 5s && kubectl get pods", "sleep 1m && kubectl get pods"),
    ("python /tmp/tmpa8f3kq2z.py", "python /tmp/tmp0x_k19qe.py"),         # mkstemp
    ("ls /tmp/tmp.Xa81bC9dQz/out", "ls /tmp/tmp.K2m9PqL0zA/out"),         # mktemp
    ("cat /private/var/folders/x1/y2/T/tmpq1w2e3r4/log",
     "cat /private/var/folders/x1/y2/T/tmpz9x8c7v6/log"),                  # macOS
])
def test_a_volatile_part_is_the_same_call(implementation: str, a: str, b: str) -> None:
    assert same(implementation, a, b)


@pytest.mark.parametrize("a, b", [
    ("sed -n 10,20p src/app.py", "sed -n 20,30p src/app.py"),            # line ranges
    ("sed -i '223s/a/b/' x.py", "sed -i '224s/a/b/' x.py"),              # "223s" is no duration
    ("tail -n 50 app.log", "tail -n 100 app.log"),
    ("curl 'https://x.test/items?page=2'", "curl 'https://x.test/items?page=3'"),  # pages
    ("curl 'https://x.test/items?offset=100&limit=50'",
     "curl 'https://x.test/items?offset=150&limit=50'"),                 # offsets
    ("curl 'https://x.test/items?id=123'", "curl 'https://x.test/items?id=124'"),
    ("curl 'https://x.test/day?date=2026-12-04'",
     "curl 'https://x.test/day?date=2026-12-05'"),                       # a date is the subject
    ("git show 3f2a1b9c8d7e", "git show 8e7d6c5b4a3f"),                  # commits
    (f"python publish_session.py {UUID}",
     "python publish_session.py 7d44c5e2-0d3b-4a8e-9a51-2f7c1f0b9e11"),  # a uuid as subject
    ("python -c \"print(parse_duration('1:00:01'))\"",
     "python -c \"print(parse_duration('1:00:02'))\""),                  # a test's time literal
    ("python -c 'import time; time.sleep(5)'", "python -c 'import time; time.sleep(9)'"),
    ("python /tmp/debug_log1.py", "python /tmp/debug_log2.py"),          # named scratch files
    ("python /tmp/tmp_output1.py", "python /tmp/tmp_output2.py"),       # tmp_ then a word: named
    ("ls /home/u/tmp/tmpa8f3kq2z", "ls /home/u/tmp/tmp0x_k19qe"),        # no temp directory
    ("kill 1234", "kill 5678"),
])
def test_progress_stays_distinct(implementation: str, a: str, b: str) -> None:
    assert not same(implementation, a, b)


def test_every_string_value_is_scanned_but_no_key_or_number(implementation: str) -> None:
    k = engine(implementation).canonical_key
    nested = '{"argv": ["bash", "-lc", "sleep %d && tail log"], "opts": {"url": "u?_=%d"}}'
    assert k("t", nested % (3, 1733480000123)) == k("t", nested % (9, 1733480099999))
    # the key of a member is a name, a JSON number is a number: both stay
    assert k("t", '{"sleep 3": 1}') != k("t", '{"sleep 4": 1}')
    assert k("t", '{"ts": 1733480000123}') != k("t", '{"ts": 1733480000124}')
    # the placeholder is one escaped control character in the canonical form
    assert engine(implementation).canonical_form(bash("sleep 12")) == \
        b'{"command":"sleep \\u001a"}'
    assert engine(implementation).canonical_form('{"url": "h?a=1&_=1733480000123#x"}') == \
        b'{"url":"h?a=1&_=\\u001a#x"}'


def test_path_values_are_cleaned_then_scanned(implementation: str) -> None:
    form = engine(implementation).canonical_form
    assert form('{"path": "/tmp//tmpa8f3kq2z/./out.txt"}') == b'{"path":"/tmp/tmp\\u001a/out.txt"}'
    assert form('{"paths": ["/tmp/tmpa8f3kq2z", "/tmp/notes.txt"]}') == \
        b'{"paths":["/tmp/tmp\\u001a","/tmp/notes.txt"]}'
    # the repeat detector's suffix relation still holds on the scanned spelling
    wd = Watchdog(WatchdogConfig(only=frozenset({"repeated-tool-call"})),
                  implementation=implementation)
    fired = [bool(wd.observe_call("read_file", json.dumps({"path": p}))) for p in [
        "/tmp/tmpa8f3kq2z/out.txt", "/tmp/tmpq9w8e7r6/out.txt", "/tmp/tmp1a2b3c4d/out.txt",
        "/tmp/tmpz0x9c8v7/out.txt", "/tmp/tmpm1n2b3v4/out.txt"]]
    assert fired == [False, False, False, False, True]


def test_scan_argument_spans() -> None:
    def spans(text: str) -> str | None:
        out = scan_argument(text.encode())
        return None if out is None else out.decode()

    assert spans("sed -n 10,20p a.py") is None
    assert spans("curl 'h?_=1733480000123&page=2'") == f"curl 'h?_={P}&page=2'"
    assert spans("h?q=x&from=2026-12-04T10:22:31Z&to=2026-12-04T11:00:00Z") == \
        f"h?q=x&from={P}&to={P}"
    assert spans("h?trace=abc-" + UUID) == f"h?trace=abc-{P}"
    assert spans("sleep 7 && sleep 1.5; nosleep 3; sleep(4); sleep 7x") == \
        f"sleep {P} && sleep {P}; nosleep 3; sleep(4); sleep 7x"
    assert spans("/tmp/tmpa8f3kq2z.py /tmp/tmp.Xa81bC9dQz /tmp/tmpfile /tmp/tmpabcdefgh") == \
        f"/tmp/tmp{P}.py /tmp/tmp.{P} /tmp/tmpfile /tmp/tmpabcdefgh"
    assert spans("C:\\Users\\me\\AppData\\Local\\Temp\\tmpk3j4h5g6\\x") == \
        f"C:\\Users\\me\\AppData\\Local\\Temp\\tmp{P}\\x"
    # spans of two kinds side by side; a temp name inside a query value; token starts
    assert spans("/tmp/tmpa8f3kq2z?_=1733480000123") == f"/tmp/tmp{P}?_={P}"
    assert spans("u?f=/tmp/tmpa8f3kq2z&t=1733480000") == f"u?f=/tmp/tmp{P}&t={P}"
    assert spans("/private/tmp/tmpa8f3kq2z x/private/tmp/tmpa8f3kq2z") == \
        f"/private/tmp/tmp{P} x/private/tmp/tmpa8f3kq2z"
    assert spans("/var/folders/ab/cd/T/tmp1x2y3z4w /var/folders/ab/T/tmp1x2y3z4w") == \
        f"/var/folders/ab/cd/T/tmp{P} /var/folders/ab/T/tmp1x2y3z4w"
    # a parameter needs a name after its '?' or '&'; its value runs to the next '&' or space
    assert spans("?a=b=1733480000123 &=1733480000123 x=1733480000123") == \
        f"?a=b={P} &=1733480000123 x=1733480000123"


def test_both_engines_scan_fragments_alike() -> None:
    """Strings of volatile fragments, glued at random (the fuzzer does more, for longer)."""
    import random
    native, reference = _engine.load("native"), _engine.load("python")
    pieces = ["tmp", "tmpa8f3kq2z", "tmp.Xa81bC9dQz", "tmp_x1y2z3", "/", "\\", "Temp", "T",
              "var", "folders", "private", " ", "sleep", " 7", ".5", "s", "x", "?", "&", "=",
              "_", "1733480000123", "2026-12-04T10:22:31Z", UUID, "9f86d081884c7d65", "\n"]
    rng = random.Random(39)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        args = json.dumps({"command": text, "path": text, "list": [text]})
        assert native.canonical_form(args) == reference.canonical_form(args), text


# -- the detectors see one call --------------------------------------------------------------


def fired(implementation: str, signal: str, commands: list[str]) -> list[tuple[int, str]]:
    wd = Watchdog(WatchdogConfig(only=frozenset({signal})), implementation=implementation)
    out = []
    for i, command in enumerate(commands):
        out += [(i, a.signal) for a in wd.observe_call("bash", bash(command))]
    return out


def test_a_polling_loop_with_a_changing_sleep_is_a_repeat(implementation: str) -> None:
    polls = [f"sleep {s} && tail -n 50 app.log" for s in (5, 7, 10, 15, 30)]
    assert fired(implementation, "repeated-tool-call", polls) == [(4, "repeated-tool-call")]
    reads = [f"sed -n {10 * i},{10 * i + 10}p app.log" for i in range(5)]
    assert fired(implementation, "repeated-tool-call", reads) == []


def test_a_cache_busted_ping_pong_is_a_cycle(implementation: str) -> None:
    calls = []
    for lap in range(3):
        calls += [f"curl -s 'http://localhost:8000/api/jobs?_={1733480000123 + lap * 997}'",
                  "docker logs --tail 20 worker"]
    assert fired(implementation, "alternating-tool-cycle", calls) == \
        [(5, "alternating-tool-cycle")]


# -- every call of the shared recordings, both engines ---------------------------------------


def _recorded_calls() -> list[tuple[str, str, Any, str]]:
    from tripwire.interchange.adapters import read, transcripts
    from tripwire.interchange.events import Call

    roots = [SHARED / "corpus", SHARED / "format-samples"]
    if not all(r.exists() for r in roots):
        pytest.skip(f"{SHARED}/corpus and format-samples are missing: the differential over "
                    "recorded calls needs the read-only ../shared folder beside the project")
    calls = []
    for root in roots:
        for transcript in transcripts([str(root)]):
            for item in read(transcript):
                if type(item.event) is Call:
                    calls.append((transcript.name, item.event.name, item.event.args,
                                  str(transcript.path)))
    return calls


@pytest.fixture(scope="module")
def recorded_calls() -> list[tuple[str, str, Any, str]]:
    return _recorded_calls()


def test_both_engines_key_every_recorded_call_the_same(recorded_calls) -> None:
    native, reference = _engine.load("native"), _engine.load("python")
    assert len(recorded_calls) == 11765  # 11,767 before a CodeActAgent think was read as words
    differ = [(session, name) for session, name, args, _ in recorded_calls
              if native.canonical_key(name, args) != reference.canonical_key(name, args)
              or native.canonical_form(args) != reference.canonical_form(args)]
    assert differ == []


def _with_a_volatile_part(recorded_calls) -> list[tuple[str, str, str, str]]:
    """(session, tool, canonical form, file) of each recorded call the scan changed."""
    from tripwire.base.inputs import args_bytes
    reference = _engine.load("python")
    changed = []
    for session, name, args, path in recorded_calls:
        form = reference.canonical_form(args)
        if form is not None and b"\\u001a" in form and b"\\u001a" not in args_bytes(args):
            changed.append((session, name, form.decode(), path))
    return changed


def test_the_recorded_calls_that_have_a_volatile_part(recorded_calls) -> None:
    """What the scan changes in the recordings: the two `sleep 50` polls of Harbor's terminal
    agent, and nothing else (no sed address, commit hash, task UUID or scratch file)."""
    assert [c[:3] for c in _with_a_volatile_part(recorded_calls)] == [
        ("atif/samples/harbor-golden-terminus_2/hello-world-timeout.trajectory.json",
         "bash_command", '{"duration":5e1,"keystrokes":"sleep \\u001a\\u000a"}')] * 2


def test_no_healthy_session_gains_a_critical_alert(recorded_calls) -> None:
    """A session none of whose calls has a volatile part has exactly the keys it had before the
    scan existed (every string is written as it was), so its alerts are unchanged; each session
    that has one is measured here: no critical alert, and no healthy one among them."""
    from tripwire.corpus import measure_paths
    from tripwire.corpus.analysis import critical_trips
    from tripwire.corpus.labels import read_labels

    files = sorted({c[3] for c in _with_a_volatile_part(recorded_calls)})
    assert [Path(f).name for f in files] == ["hello-world-timeout.trajectory.json"]
    results = measure_paths(files)
    assert [(r.session, critical_trips(r)) for r in results if critical_trips(r)] == []
    labels = [read_labels(SHARED / "corpus" / "mini-swe-agent-swebench" / "outcomes.json"),
              read_labels(SHARED / "corpus" / "tau-bench-airline" / "gpt-4o-airline.json")]
    healthy = {r.session for r in results for lab in labels
               if (label := lab.of(r.session)) is not None and label.healthy}
    assert healthy == set()  # the one touched session is a format sample, unlabelled
