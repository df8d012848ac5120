"""A minimal fleet daemon for the cross-daemon tests (test_fleet_daemons.py): one ``Fleet`` on a
shared store, driven by JSON commands on stdin, one JSON reply per line on stdout.

    python fleet_daemon.py LOCATION IMPLEMENTATION

Commands: {"op": "turn", "session": s, "usage": [usd, ...]} (start a turn, charge each usage,
end it), {"op": "start"|"end", "session": s} (start, end a turn), {"op": "charge", "session": s,
"usage": [usd, ...]} (charge each usage, no turn boundary; ``"acks": true``: a line
``{"ack": n}`` once the n-th charge returned), {"op": "loop", "session": s} (start a turn and
repeat one call until it halts),
{"op": "status", "session": s}, {"op": "quit"}. Every reply carries ``ms``, the time the
guardrails took (the turn start's read of the shared store included).
"""

from __future__ import annotations

import json
import sys
import time

from tripwire import GuardrailsConfig
from tripwire.durability.open import open_store
from tripwire.errors import GuardrailHalted
from tripwire.fleet.fleet import Fleet

CONFIG = GuardrailsConfig(mode="enforce", unattended=False, max_session_cost_usd=100.0)


def main() -> None:
    location, implementation = sys.argv[1], sys.argv[2]
    options = {} if location.startswith("postgresql://") else {"shared": True}
    fleet = Fleet(CONFIG, store=open_store(location, **options), implementation=implementation)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        g = fleet.session(cmd["session"]) if "session" in cmd else None
        start = time.perf_counter()
        reply: dict[str, object] = {}
        if cmd["op"] == "quit":
            break
        assert g is not None
        if cmd["op"] == "turn":
            try:
                g.start_turn()
            except GuardrailHalted as halted:
                reply = {"refused": True, "halted_by": list(halted.guardrails)}
            else:
                actions = [g.on_usage(cost_usd=usd).action for usd in cmd.get("usage", [])]
                g.end_turn()
                reply = {"refused": False, "actions": actions}
        elif cmd["op"] == "start":
            try:
                g.start_turn()
            except GuardrailHalted as halted:
                reply = {"refused": True, "halted_by": list(halted.guardrails)}
            else:
                reply = {"refused": False}
        elif cmd["op"] == "charge":
            actions = []
            for n, usd in enumerate(cmd["usage"], 1):
                actions.append(g.on_usage(cost_usd=usd).action)
                if cmd.get("acks"):
                    print(json.dumps({"ack": n}), flush=True)
            reply = {"actions": actions}
        elif cmd["op"] == "end":
            reply = {"action": g.end_turn().action}
        elif cmd["op"] == "loop":
            g.start_turn()
            actions = [g.on_call("read_file", '{"path": "a.py"}').action for _ in range(5)]
            reply = {"actions": actions}
        elif cmd["op"] == "status":
            s = g.status()
            reply = {"halted": s.halted, "halted_by": list(s.halted_by),
                     "spent_usd": s.spent_usd}
        reply["ms"] = (time.perf_counter() - start) * 1000
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
