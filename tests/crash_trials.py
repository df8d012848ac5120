"""SIGKILL trials: a worker process is killed at a random point, and what it was told must be
in the store. Run by tests/test_crash.py; also a command for the figures in docs:

    python tests/crash_trials.py DIR --trials 200 --implementation native --seed 1

This process stays single-threaded and forks one worker per trial (a clean fork, and ~2 ms
instead of an interpreter start). The worker runs turns on one session that keeps its store
across trials — usage events worth one cent each, calls that loop into a watchdog halt, operator
resets — one event at a time or through ``Fleet.observe_many``, and after each decision returns
it reports on a pipe what it was told (the spend so far, a halt, a reset). The parent kills it
with SIGKILL after a random delay, restores the session from the store, and checks that the
restored spend is at least the last spend reported and that a reported halt with no reset
after it restored halted, and that every chain verifies. Prints one JSON summary line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time

from tripwire import GuardrailHalted, Guardrails, GuardrailsConfig
from tripwire.durability.sqlite import SQLiteStore
from tripwire.fleet.fleet import Fleet

CENT = 0.01
NANO = 1_000_000_000
CONFIG = GuardrailsConfig(mode="enforce", unattended=False, max_session_cost_usd=1e6)


def worker(db: str, implementation: str, seed: int, out: int) -> None:
    rng = random.Random(seed)

    def say(*fields: object) -> None:
        os.write(out, (" ".join(map(str, fields)) + "\n").encode())

    store = SQLiteStore(db)
    if rng.random() < 0.3:  # the batch path
        fleet = Fleet(CONFIG, store=store, implementation=implementation)
        g = fleet.session("s")
        while True:
            if g.halted:
                say("r")  # before: a reset written and then killed is no lost halt
                g.reset()
            rows = [("s", "turn_start")]
            for _ in range(rng.randint(1, 6)):
                rows.append(("s", "usage", "m", 100, 10, CENT))
                rows.append(("s", "call", "read_file", '{"path": "loop.py"}'))
            out_ = fleet.observe_many(rows)
            say("S", fleet.session("s")._cost.spent)
            if any(d.halt_session for _, _, d in out_):
                say("H")
            fleet.observe_many([("s", "turn_end")])
    g = Guardrails(CONFIG, session_id="s", implementation=implementation, store=store)
    while True:
        try:
            g.start_turn()
        except GuardrailHalted:
            say("r")  # before: a reset written and then killed is no lost halt
            g.reset()
            continue
        for _ in range(rng.randint(1, 8)):
            g.on_usage(model="m", input_tokens=100, cost_usd=CENT)
            say("S", g._cost.spent)
            looping = rng.random() < 0.7
            args = '{"path": "loop.py"}' if looping else f'{{"path": "f{rng.random()}"}}'
            if g.on_call("read_file", args).halt_session:
                say("H")
                break
        g.end_turn()


def trial(db: str, implementation: str, seed: int, rng: random.Random) -> dict[str, int]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: never returns, never cleans up
        os.close(r)
        try:
            worker(db, implementation, seed, w)
        finally:
            os._exit(0)
    os.close(w)
    # Kill after the worker has reported a random number of decisions, plus a random delay:
    # the point of death then depends on the worker's progress, not on how loaded the machine is
    told = b""
    target = rng.randint(1, 60)
    while told.count(b"\n") < target and (chunk := os.read(r, 65536)):
        told += chunk
    time.sleep(rng.uniform(0, 0.004))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    while chunk := os.read(r, 65536):
        told += chunk
    os.close(r)
    spent, halted, halts = 0, False, 0
    for line in told.decode().splitlines():
        kind, *rest = line.split()
        if kind == "S":
            spent = int(rest[0])
        elif kind == "H":
            halted, halts = True, halts + 1
        elif kind == "r":
            halted = False
    store = SQLiteStore(db)
    g = Guardrails(CONFIG, session_id="s", implementation=implementation, store=store)
    restored = g._cost.spent
    result = {
        "spend_lost_nano": max(0, spent - restored),
        "halts_lost": int(halted and not g.halted),
        "halts_told": halts,
        "broken_chains": sum(not rep.intact for rep in store.verify()),
    }
    store.close()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--implementation", default="native")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    db = os.path.join(args.dir, "crash.sqlite")
    total = {"trials": 0, "spend_lost_nano": 0, "halts_lost": 0, "halts_told": 0,
             "broken_chains": 0, "lossy_trials": 0}
    for n in range(args.trials):
        r = trial(db, args.implementation, args.seed * 100_000 + n, rng)
        total["trials"] += 1
        total["lossy_trials"] += bool(r["spend_lost_nano"] or r["halts_lost"])
        for k in ("spend_lost_nano", "halts_lost", "halts_told", "broken_chains"):
            total[k] += r[k]
    g = Guardrails(CONFIG, session_id="s", implementation=args.implementation,
                   store=SQLiteStore(db))
    total["final_spend_cents"] = round(g._cost.spent / NANO * 100)
    print(json.dumps(total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
