"""Shell-tool identity for the name-level signals (SPEC §11.2), exactly, on both engines."""

from __future__ import annotations

import pytest

from tripwire import Watchdog, WatchdogConfig
from tripwire.errors import ConfigError
from tripwire.identity.shell import SHELL_TOOLS, shell_program, tool_identity

PROGRAMS = [
    ({"command": "ls -la"}, b"ls"),
    ({"command": "cd /testbed && python -m pytest -x"}, b"python"),
    ({"command": "cd /a && cd b; git status"}, b"git"),
    ({"command": "cd /a"}, b"cd"),
    ({"cmd": "FOO=1 BAR_2=x make test"}, b"make"),
    ({"script": "sudo -E env -i timeout 10 time nl -ba x"}, b"nl"),
    ({"command": ["bash", "-lc", "timeout 30 pytest -q"]}, b"pytest"),
    ({"command": ["/bin/sh", "-c", "cat a"]}, b"cat"),
    ({"command": ["ruff", "check", "."]}, b"ruff"),
    ({"command": "grep -r x|head"}, b"grep"),
    ({"command": "  \n cat <<'EOF' > f\nx\nEOF"}, b"cat"),
    ({"command": "1A=x ls"}, b"1A=x"),  # not a valid name: not an assignment
    ('{"command": "\\u00e9cho hi"}', "\u00e9cho".encode()),
    ('{"cmd": "zzz", "command": "ls"}', b"ls"),  # command before cmd before script
    ('{"command": "ls", "command": "cat"}', b"ls"),  # the first of a repeated key
    ('"git log"', b"git"),  # a JSON string
    ("echo hi && ls", b"echo"),  # plain text
    ({"command": 5}, b""),
    ({"path": "a"}, b""),
    ({"command": "&& ls"}, b""),
    ('{"command": "ls"', b""),  # broken JSON
    (None, b""),
]


@pytest.mark.parametrize("args, program", PROGRAMS)
def test_program_word(args: object, program: bytes) -> None:
    native = pytest.importorskip("tripwire._native")
    assert shell_program(args) == program
    assert native.shell_program(args) == program


def test_identity_is_tool_colon_program_for_shell_tools_only() -> None:
    shells = frozenset(SHELL_TOOLS)
    assert tool_identity("bash", {"command": "cd /w && pytest"}, shells) == "bash:pytest"
    assert tool_identity("exec_command", {"cmd": "rg x"}, shells) == "exec_command:rg"
    assert tool_identity("read_file", {"command": "ls"}, shells) == "read_file"
    assert tool_identity("bash", {"path": "x"}, shells) == "bash"  # no program word
    assert SHELL_TOOLS == ("bash", "Bash", "shell", "sh", "terminal", "run_command",
                           "execute_command", "exec_command", "run_shell_command", "local_shell")


def _name_alerts(watchdog: Watchdog, calls: list[tuple[str, object]]) -> list[tuple]:
    out = []
    for i, (name, args) in enumerate(calls):
        out.extend((i, a.signal, a.reason) for a in watchdog.observe_call(name, args)
                   if a.signal in ("repeated-tool-name", "alternating-tool-cycle"))
    return out


def test_many_programs_through_one_shell_tool_are_no_name_run(implementation: str) -> None:
    programs = ["ls", "cat", "grep x", "sed -n 1p"]
    calls = [("bash", {"command": f"{programs[i % 4]} f{i}"}) for i in range(20)]
    assert _name_alerts(Watchdog(implementation=implementation), calls) == []


def test_one_program_many_times_is_a_name_run_named_tool_colon_program(
        implementation: str) -> None:
    calls = [("bash", {"command": f"cd /w && sed -n '{i}p' a.py"}) for i in range(15)]
    assert _name_alerts(Watchdog(implementation=implementation), calls) == [
        (14, "repeated-tool-name", "bash:sed was called 15 times in a row with no other tool "
         "in between (arguments vary): a reworded loop or a long sweep; the name alone cannot "
         "tell which.")]


def test_the_shell_tool_list_is_configurable(implementation: str) -> None:
    programs = ["ls", "cat", "grep x"]
    calls = [("bash", {"command": f"{programs[i % 3]} f{i}"}) for i in range(15)]
    plain = WatchdogConfig(signals={"repeated-tool-name": {"shell_tools": []}})
    assert [a[:2] for a in _name_alerts(Watchdog(plain, implementation=implementation),
                                         calls)] == [(14, "repeated-tool-name")]
    own = WatchdogConfig(signals={"repeated-tool-name": {"shell_tools": ["run"]}})
    runs = [("run", args) for _, args in calls]
    assert _name_alerts(Watchdog(own, implementation=implementation), runs) == []
    assert [a[:2] for a in _name_alerts(Watchdog(own, implementation=implementation),
                                         calls)] == [(14, "repeated-tool-name")]


def test_cycle_texts_name_the_programs(implementation: str) -> None:
    calls = [("bash", {"command": "cat a"}), ("bash", {"command": "grep x a"})] * 3
    assert _name_alerts(Watchdog(implementation=implementation), calls) == [
        (5, "alternating-tool-cycle", "The same 2-call sequence (bash:cat \u2192 bash:grep) ran "
         "3 times in a row with identical arguments each lap and no new result after the first: "
         "a loop the consecutive-repeat "
         "detector cannot see.")]


def test_a_bad_shell_tool_list_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        WatchdogConfig(signals={"repeated-tool-name": {"shell_tools": 3}})
