"""The answer scanner (SPEC §12.1): each volatile class exactly, both modes, both engines, and
the two twins compared byte for byte on fuzzed payloads and on every tool result of the
recorded corpus (``../shared/corpus``, every reader)."""

from __future__ import annotations

import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tripwire.engine import reference as _reference
from tripwire.errors import ConfigError
from tripwire.identity import answer as _answer
from tripwire.identity.answer import ALL_CLASSES, CLASSES, ResultsConfig

native = pytest.importorskip("tripwire._native", reason="the native core is not built")

P = _answer.PLACEHOLDER


def both(data: bytes, classes: int = ALL_CLASSES, keys: tuple[bytes, ...] = (),
         signature: bool = False) -> bytes | None:
    """The scan by both twins, which must agree."""
    ours = _answer.scan(data, classes, keys, signature)
    assert native.scan_answer(data, classes, keys, signature) == ours
    assert _reference.scan_answer(data, classes, keys, signature) == ours
    return ours


# -- each class ------------------------------------------------------------------------------

CASES = [
    # durations
    (b"==== 1 failed, 2 passed in 0.53s ====", b"==== 1 failed, 2 passed in " + P + b" ===="),
    (b"Ran 15 tests in 0.074s\n\nOK", b"Ran 15 tests in " + P + b"\n\nOK"),
    (b"took 12 ms; 3 seconds; 2h; 1m30s; 1h2m3.5s", b"took " + P + b"; " + P + b"; " + P
     + b"; " + P + b"; " + P),
    (b"-0.5s +2us 7ns 5\xc2\xb5s 5\xce\xbcs 10min 4 sec 9secs 1second",
     b" ".join([P] * 9)),
    (b"2 steps, 5m, 3 of 6, 5 min_time, 5s3, 12msx, v1.5s, 1.2.3s",
     None),  # not durations: a word, meters, a count, an identifier, glued, versions
    # date-times, times, epochs
    (b"2026-12-04T10:22:31.123Z start", P + b" start"),
    (b"[2026-12-04 10:22:31,123] INFO", b"[" + P + b"] INFO"),
    (b"at 2026-12-04T10:22+01:00, 2026-12-04t10:22:31-0500 and 2026-12-04 10:22:31.5",
     b"at " + P + b", " + P + b" and " + P),
    (b"elapsed 0:00:01 at 23:59:60.25", b"elapsed " + P + b" at " + P),
    (b"epoch 1712345678 ms 1712345678123 f 1712345678.25", b"epoch " + P + b" ms " + P + b" f "
     + P),
    (b"2026-12-04 only, 10:22 no seconds, 1499999999, 2000000000, 17123456789",
     None),  # a date, a clock time, numbers outside the plausible epochs
    # hex
    (b"<Foo object at 0x7f3a9c2d1e00> 0X1F2E", b"<Foo object at " + P + b"> " + P),
    (b"request 550e8400-e29b-41d4-a716-446655440000 done", b"request " + P + b" done"),
    (b"id deadbeef-cafe-babe-face-0123456789ab", b"id " + P),  # first digit in the last group
    (b"sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 req_7f3a9c0e1b2d",
     b"sha " + P + b" req_" + P),
    (b"short 7f3a9c0 0x12 deadbeefcafe 123456789012 0x1234_x", None),
    # process ids
    (b"pid 4242, PID: 12, process=9, worker_pid = 77", b"pid " + P + b", PID: " + P
     + b", process=" + P + b", worker_pid = " + P),
    (b"rapid 5, Process 42, pid42, pid 42x", None),
    # a shell's line counter
    (b"/bin/bash: line 11301: cd: fastjson/: No such file or directory",
     b"/bin/bash: line " + P + b": cd: fastjson/: No such file or directory"),
    (b"bash: line 1: pytest: command not found\n/bin/sh: 12: x: not found\nzsh:3: no match",
     b"bash: line " + P + b": pytest: command not found\n/bin/sh: " + P
     + b": x: not found\nzsh:" + P + b": no match"),
    (b"dash: 1: x, line 12: y, bash: 3: z", None),
    # temporary paths
    (b"/tmp/tmpab12cd/out.log", b"/tmp/" + P + b"/out.log"),
    (b"'/var/tmp/build-a81f/o' /private/tmp/x/y", b"'/var/tmp/" + P + b"/o' /private/tmp/"
     + P + b"/y"),
    (b"/var/folders/x7/k2_9/T/tmpq1w2e3/config.yaml", b"/var/folders/x7/k2_9/T/" + P
     + b"/config.yaml"),
    (b"/private/var/folders/x7/k2/T/pytest-of-u/f", b"/private/var/folders/x7/k2/T/" + P
     + b"/f"),
    (b"C:\\Users\\me\\AppData\\Local\\Temp\\tmpa1b2\\x.txt",
     b"C:\\Users\\me\\AppData\\Local\\Temp\\" + P + b"\\x.txt"),
    (b'"C:\\\\Users\\\\me\\\\Temp\\\\_MEI42\\\\a"', b'"C:\\\\Users\\\\me\\\\Temp\\\\' + P
     + b'\\\\a"'),  # as JSON text
    (b"/home/u/tmp/x x/tmp/y /tmp/ /tmpfoo /var/folders/x/T/y", None),
    # JSON text: the letter of an escape is a boundary
    (b'{"log": "ok\\n2026-12-04T10:22:31Z done\\tpid 7"}', b'{"log": "ok\\n' + P
     + b' done\\tpid ' + P + b'"}'),
    # small integers stay
    (b"3 of 6 replicas updated, 12 files, line 42, exit 1", None),
]


@pytest.mark.parametrize(("raw", "scanned"), CASES)
def test_each_class_both_twins(raw: bytes, scanned: bytes | None) -> None:
    assert both(raw) == scanned


def test_a_class_turned_off_stays() -> None:
    raw = b"in 0.53s at 10:22:31 pid 7 0x7f3a9c2d /tmp/abc/x bash: line 3: y"
    assert both(raw) == b"in " + P + b" at " + P + b" pid " + P + b" " + P + b" /tmp/" + P \
        + b"/x bash: line " + P + b": y"
    for name, bit in CLASSES.items():
        kept = both(raw, ALL_CLASSES & ~bit)
        spans = 6 if name in ("duration_keys", "id_counters") else 5  # no JSON in raw
        assert kept is not None and kept.count(P) == spans, name
    assert both(raw, 0) is None
    # a host whose polls report progress as a commit hash keeps hashes
    assert both(b"at 9f86d081884c7d659a2f", ALL_CLASSES & ~CLASSES["hex"]) is None


def test_json_keys_are_replaced_whatever_the_value() -> None:
    raw = (b'{"request_id": "r-1234", "served_at": 1712, "data": {"n": [1, {"x": "}"}]}, '
           b'"etag": null, "ok": true}')
    assert both(raw, keys=(b"request_id", b"served_at", b"n", b"etag")) == (
        b'{"request_id": ' + P + b', "served_at": ' + P + b', "data": {"n": ' + P + b'}, '
        b'"etag": ' + P + b', "ok": true}')
    # JSON inside text; a key that is only a string value is not a member
    assert both(b'HTTP 200 {"request_id":"abc"} "request_id" here', keys=(b"request_id",)) \
        == b'HTTP 200 {"request_id":' + P + b'} "request_id" here'
    # no keys configured: untouched, but for the counter-like id under an id key (id_counters)
    assert both(raw) == raw.replace(b"r-1234", b"r-" + P)
    assert both(raw, ALL_CLASSES & ~CLASSES["id_counters"]) is None
    assert both(b'{"a": "unterminated', keys=(b"a",)) is None


SIGNATURES = [
    (b"", b""),
    (b"  \t\n ", b""),
    (b"a  b\n\nc ", b"a b c"),
    (b"line 42", b"line #"),
    (b"pid=4242 port 8080", b"pid=# port #"),
    (b"id 7f3a9c0e and deadbeef", b"id # and deadbeef"),  # short hex ids are numbers here
    (b"addr 0x7ffe12ab 0X1F 0x 0xzz", b"addr # # #x #xzz"),
    (b"2026-12-03T14:11:20.123Z", b"#"),
    (b"2026-12-03 and 14:11", b"# and #"),  # a date and a clock time: numbers, joined
    (b"v1.2.3 py3 utf8", b"v#.# py# utf#"),
    (b"a.py:12:5: E501 W6x", b"a.py:#: # W#x"),  # E501 is a hex word
    (b"at /tmp/pytest-of-ci/pytest-3/x.py:12 end", b"at /tmp/#/pytest-#/x.py:# end"),
    (b"0x7f3a9c:12 req=550e8400-e29b-41d4-a716-446655440000", b"# req=#"),  # spans join too
    (b"/bin/bash: line 11301: cd: x", b"/bin/bash: line #: cd: x"),
    ("caf\u00e9 12 \u00e9t\u00e9".encode(), "caf\u00e9 # \u00e9t\u00e9".encode()),
    (b"\xff\xfe 12", b"\xff\xfe #"),
]


@pytest.mark.parametrize(("raw", "signed"), SIGNATURES)
def test_signature_mode(raw: bytes, signed: bytes) -> None:
    assert both(raw, signature=True) == signed
    assert _answer.signature(raw) == signed


def test_empty_answer_and_digests() -> None:
    for empty in (b"", b" ", b"\n\t\r\x0b\x0c\x1c\x1d\x1e\x1f  "):
        assert _answer.is_empty(empty)
        assert _answer.answer_digest(empty) is None
        assert native.answer_digest(empty) is None
    assert not _answer.is_empty(b"\xc2\xa0")  # only ASCII whitespace is empty
    # a clean payload's answer is the digest of its bytes (as before answers existed)
    clean = b"3 of 6 replicas updated"
    assert native.answer_digest(clean) == _answer.answer_digest(clean) \
        == xxhash.xxh3_128_digest(clean)
    a, b = b"1 failed in 0.53s", b"1 failed in 0.61s"
    assert native.answer_digest(a) == native.answer_digest(b) == _answer.answer_digest(b) \
        == xxhash.xxh3_128_digest(b"1 failed in " + P)
    assert native.answer_digest(b"2 failed in 0.53s") != native.answer_digest(a)


def test_results_config() -> None:
    default = ResultsConfig().settings()
    assert default == {"answer_volatile": ALL_CLASSES, "ignore_json_keys": (),
                       "ignore_json_keys_by_tool": ()}
    config = ResultsConfig.from_mapping({
        "volatile": ["durations", "pids"], "ignore_json_keys": ["request_id"],
        "tools": {"http_get": {"ignore_json_keys": ["etag", "request_id"]}}})
    assert config.settings() == {
        "answer_volatile": CLASSES["durations"] | CLASSES["pids"],
        "ignore_json_keys": ("request_id",),
        "ignore_json_keys_by_tool": (("http_get", ("request_id", "etag")),)}
    for bad, message in [({"volatile": ["hashes"]}, "unknown class"),
                         ({"volatile": "hex"}, "must be a list of strings"),
                         ({"ignore": []}, "unknown \\[results\\] setting"),
                         ({"tools": {"x": {"volatile": []}}}, "takes ignore_json_keys only"),
                         ({"ignore_json_keys": [1]}, "must be a list of strings")]:
        with pytest.raises(ConfigError, match=message):
            ResultsConfig.from_mapping(bad)


# -- the twins agree ---------------------------------------------------------------------------

_SPANS = [
    "0.53s", "12 ms", "1m30s", "-2.5us", "5\u00b5s", "2026-12-04T10:22:31.123Z",
    "2026-12-04 10:22:31,5", "10:22:31", "1712345678", "1712345678123.5", "0x7f3a9c",
    "550e8400-e29b-41d4-a716-446655440000", "deadbeef0123abcd99", "pid 4242", "PID: 7",
    "process=12", "bash: line 11301:", "/bin/sh: 3:", "zsh:9:", "/tmp/tmpab12/", "/var/tmp/x",
    "/var/folders/a1/b2/T/tmp9/", "\\Temp\\t1\\", '"request_id": "r-1"', '"n": [1, {"a": 2}]',
]
_TEXT = ["a", "Z", "_", "-", ".", ":", "/", "\\", " ", "\n", "\\n", "\t", '"', "{", "}", "[",
         "]", ",", "=", "0", "7", "42", "x", "e", "f", "T", "s", "ms", "min", "line", "sh",
         "pid", "\u00e9", "\x00", "\x1a"]


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_SPANS) | st.sampled_from(_TEXT), max_size=30).map("".join),
       st.integers(0, ALL_CLASSES), st.booleans(), st.booleans())
def test_twins_agree_on_spliced_text(text: str, classes: int, signature: bool,
                                     with_keys: bool) -> None:
    data = text.encode("utf-8")
    keys = (b"request_id", b"n") if with_keys else ()
    assert native.scan_answer(data, classes, keys, signature) == \
        _answer.scan(data, classes, keys, signature)
    if not signature:
        assert native.answer_digest(data, classes, keys) == \
            _answer.answer_digest(data, classes, keys)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=96), st.booleans())
def test_twins_agree_on_any_bytes(data: bytes, signature: bool) -> None:
    assert native.scan_answer(data, ALL_CLASSES, (b"a",), signature) == \
        _answer.scan(data, ALL_CLASSES, (b"a",), signature)


def _corpus_results() -> tuple[list[bytes], list[bytes]]:
    from conftest import need_shared

    from tripwire.base.inputs import error_failed, payload_bytes
    from tripwire.interchange.adapters import read, transcripts
    from tripwire.interchange.events import Result
    from tripwire.signals.repeated_failure import error_bytes

    corpus = need_shared("corpus")
    payloads: list[bytes] = []
    errors: list[bytes] = []
    for transcript in transcripts([str(corpus)]):
        for item in read(transcript):
            event = item.event
            if isinstance(event, Result):
                data = payload_bytes(event.payload)
                if data is not None:
                    payloads.append(data)
                if error_failed(event.error):
                    errors.append(error_bytes(event.error))
    return payloads, errors


def test_twins_agree_on_every_corpus_result() -> None:
    payloads, errors = _corpus_results()
    assert len(payloads) > 10_000 and len(errors) > 500  # every reader's results, not a few
    keys = (b"id", b"status", b"created_at")
    changed = 0
    for data in payloads:
        ours = _answer.scan(data)
        assert native.scan_answer(data) == ours
        changed += ours is not None
        assert native.scan_answer(data, ALL_CLASSES, keys) == _answer.scan(data, keys=keys)
        assert native.answer_digest(data) == _answer.answer_digest(data)
    for data in errors + payloads[::10]:
        assert native.scan_answer(data, ALL_CLASSES, (), True) == _answer.signature(data)
    # volatile spans are common in real output: test timings, timestamps, object addresses
    assert changed > 1000
