"""A minimal agent loop with tripwire wired in. No network: the "model" is a script.

The agent sweeps files in silence and is told so on its next turn; it then loops on one file
until the watchdog halts the session; its next turn is refused before any model call; an
operator resets it; the resumed model reads why it was stopped and changes course.

    python examples/agent_loop.py
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Iterator

from tripwire import GuardrailHalted, Guardrails, GuardrailsConfig

# The operator channel: tripwire's log lines (one per cut or halt) go to stderr.
logging.basicConfig(level=logging.WARNING, format="  operator log | %(name)s: %(message)s")


def scripted_model(turn: int, prompt: str) -> Iterator[tuple[str, object]]:
    """What the model "does" on each turn: ("call", (name, args)) or ("text", words)."""
    if turn == 1:  # a silent sweep: twelve calls and not a word
        for i in range(6):
            yield "call", ("grep", {"pattern": "header", "path": f"src/handlers/h{i}"})
            yield "call", ("read_file", {"path": f"src/handlers/h{i}/main.py"})
    elif turn == 2:  # told to narrate, it does; then it loops on one file, spelled differently
        assert "tools-without-text" in prompt
        yield "text", "The handlers never read the header; checking the app entry point."
        for spelling in ["src/app.py", "./src/app.py", "src/app.py", "/repo/src/app.py"] * 10:
            yield "call", ("read_file", {"path": spelling})
    else:  # the resumed model has read the [watchdog] block and changes course
        assert "repeated-tool-call" in prompt
        yield "call", ("grep", {"pattern": "parse_header", "path": "src"})
        yield "text", "parse_header is never called: the router skips it. Fix: call it in route()."


def tool_output(args: dict) -> str:
    """What the tool answers: a file reads the same however its path is spelled (and a read
    whose output kept changing would be polling, which the watchdog lets run)."""
    return "contents of " + posixpath.normpath(args["path"]).removeprefix("/repo/")


def run_turn(guardrails: Guardrails, turn: int, user_prompt: str) -> None:
    print(f"turn {turn}: {user_prompt!r}")
    try:
        started = guardrails.start_turn()
    except GuardrailHalted as halted:
        print(f"  refused before any model call: halted by {', '.join(halted.guardrails)}")
        return
    prompt = started.prepend(user_prompt)
    if started.feedback:
        print("  prepended to the model's input:")
        for line in started.feedback.splitlines():
            print(f"    {line}")
    calls = 0
    for kind, payload in scripted_model(turn, prompt):
        if kind == "text":
            guardrails.on_text(payload)
            print(f"  model: {payload}")
            continue
        name, args = payload
        calls += 1
        decision = guardrails.on_call(name, json.dumps(args), id=f"t{turn}c{calls}")
        if decision.cut_turn:
            print(f"  call {calls} ({name} {args['path']}): {decision.action} "
                  f"by {decision.guardrail}")
            break
        guardrails.on_result(id=f"t{turn}c{calls}", payload=tool_output(args))
        guardrails.on_usage(model="claude-sonnet-4-5", input_tokens=4000, cost_usd=0.004)
    guardrails.end_turn()
    print(f"  {calls} tool calls ran this turn")


def main() -> None:
    guardrails = Guardrails(GuardrailsConfig(mode="enforce", max_session_cost_usd=5.0),
                            session_id="demo")
    run_turn(guardrails, 1, "Why are request headers ignored?")
    run_turn(guardrails, 2, "Look closer at src/app.py.")
    run_turn(guardrails, 3, "Any progress?")
    print("operator: " + guardrails.reset().message)
    run_turn(guardrails, 4, "Try again.")
    status = guardrails.status()
    print(f"status: halted={status.halted}, spent ${status.spent_usd:.4f} of "
          f"${status.max_session_cost_usd:.4f}, counters={status.counters}")


if __name__ == "__main__":
    main()
