"""The shipped example scripts run and tell their story."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT


@pytest.mark.parametrize("implementation_env", ["native", "python"])
def test_agent_loop_example(implementation_env: str) -> None:
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation_env}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent_loop.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "- tools-without-text: You have made 12 tool calls in a row" in out
    assert "call 5 (read_file src/app.py): halt_session by watchdog" in out
    assert "turn 3: 'Any progress?'\n  refused before any model call: halted by watchdog" in out
    assert "operator: reset: cleared watchdog" in out
    assert "- repeated-tool-call: You called read_file 5 times in a row" in out
    assert "status: halted=False" in out
    assert "tripwire: [session demo] watchdog guardrail cut the turn in flight" in proc.stderr


def readme_block(language: str, containing: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = text.split(f"```{language}\n")[1:]
    return next(b.split("```", 1)[0] for b in blocks if containing in b)


def test_the_readme_fleet_example_then_its_reset_command(tmp_path) -> None:
    """README: the Fleet example, then `tripwire reset ... --add-budget 5` as printed."""
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": ""}
    fleet = subprocess.run([sys.executable, "-c", readme_block("python", "Fleet(")],
                           cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60)
    assert fleet.returncode == 0, fleet.stderr
    commands = [line.split("#")[0].split() for line in
                readme_block("bash", "--add-budget").splitlines() if line.strip()]
    reset = next(c for c in commands if c[:2] == ["tripwire", "reset"])
    too_little = subprocess.run([sys.executable, "-m", "tripwire", *reset[1:-1], "2"],
                                cwd=tmp_path, capture_output=True, text=True, env=env,
                                timeout=60)
    assert too_little.returncode == 4  # as the README's comment says: $12 ceiling, $12.50 spent
    assert "add at least $0.5001" in too_little.stderr
    proc = subprocess.run([sys.executable, "-m", "tripwire", *reset[1:]], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert '"cleared": ["per-session cost ceiling"]' in proc.stdout
    assert '"max_session_cost_usd": 15.0' in proc.stdout


# -- issue 23: the framework examples, the example config, the embedding page's output ---------


def run_example(name: str, implementation: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation}
    return subprocess.run([sys.executable, str(ROOT / "examples" / name)], capture_output=True,
                          text=True, env=env, timeout=120, check=False)


@pytest.mark.parametrize("name, extra", [("langchain_loop.py", "langchain_core"),
                                         ("openai_agents_loop.py", "agents"),
                                         # issue 37 (crewai's: tests/test_integration_crewai.py)
                                         ("pydantic_ai_loop.py", "pydantic_ai"),
                                         ("langchain_agent_loop.py", "langchain.agents"),
                                         ("google_adk_loop.py", "google.adk"),
                                         ("smolagents_loop.py", "smolagents"),
                                         ("agent_framework_loop.py", "agent_framework"),
                                         ("autogen_loop.py", "autogen_ext.models.replay")])
def test_the_framework_examples_run_with_their_scripted_models(name: str, extra: str,
                                                               implementation: str) -> None:
    pytest.importorskip(extra, reason=f"{name} needs its extra")
    assert_the_example_tells_its_story(run_example(name, implementation))


def assert_the_example_tells_its_story(proc: subprocess.CompletedProcess[str]) -> None:
    """The four lines every framework example prints (a framework's own chatter aside)."""
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines()
             if line.startswith(("stopped: ", "  reason: ", "next ", "healthy "))]
    assert len(lines) == 4, proc.stdout
    assert lines[0] == "stopped: watchdog halt_session after the tool ran 4 times"
    assert lines[1].startswith("  reason: watchdog halted the session (repeated-tool-call): "
                               "read_file was called 5 times in a row")
    assert lines[2].startswith("next ") and "refused before any model call" in lines[2]
    assert lines[3] == ("healthy session answered: 'The bug is in src/c.py: fixed.'; "
                        "halted=False")
    assert "Traceback" not in proc.stderr


def test_the_example_config_names_every_key_and_loads() -> None:
    import tomllib

    from tripwire import GuardrailsConfig
    from tripwire.session.config import SECTIONS, file_keys
    from tripwire.signals import SIGNALS

    path = ROOT / "examples" / "tripwire.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    assert set(data) == set(SECTIONS)
    for section, keys in file_keys().items():
        assert set(data[section]) == keys, section
    signals = data["signals"]
    assert set(signals) == {"custom", *(s.id for s in SIGNALS)}
    for spec in SIGNALS:
        assert set(signals[spec.id]) == {"enabled", *(k.name for k in spec.knobs)}, spec.id
        for knob in spec.knobs:  # the defaults, where the knob has one
            if knob.default is not None:
                value = signals[spec.id][knob.name]
                assert (tuple(value) if isinstance(value, list) else value) == knob.default
    resolved = GuardrailsConfig.from_file(path).resolve()
    assert str(resolved.mode) == "enforce" and resolved.max_session_cost_usd == 10.0


def test_the_embedding_page_shows_the_examples_output(implementation: str) -> None:
    proc = run_example("agent_loop.py", implementation)
    page = (ROOT / "docs" / "embedding.md").read_text(encoding="utf-8")
    shown = page.split("## Its output", 1)[1].split("```\n", 2)[1]
    assert shown == proc.stdout
