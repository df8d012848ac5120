"""Memory accesses per cold ``fleet.on_call``, counted by valgrind's cache simulator.

Builds a fleet as test_bench_fleet.py does (each session one turn of six calls and results,
then a usage), then sends calls of the engine mix each to another session, as the benchmark's
cold case does. Run under cachegrind twice, with the calls and without, the difference divided
by the calls is what one call costs: instructions, data accesses, and misses of a simulated
2 MiB cache: the cache lines a call must fetch from memory. The cache is small so that a few
thousand sessions (about 19 MB) are as cold in it as 100,000 are in a real 32 MiB L3; the
fleet's own table stays warm in both, as every call hits it. (valgrind is needed.)

    python benchmarks/fleet_accesses.py                 # runs valgrind twice, prints per call
    python benchmarks/fleet_accesses.py --sessions 5000 --calls 4000 --implementation native
    python benchmarks/fleet_accesses.py --drive --calls 0   # the driver alone (no valgrind)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROWS = 4000  # calls of the mix built in every run (at most this many are sent)
CACHE = "2097152,16,64"  # the simulated cache: 2 MiB, 16-way, 64-byte lines


def drive(sessions: int, calls: int, implementation: str) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import random
    import uuid

    import workload

    # the implicit tasks' ids (uuid4) from a seeded generator: the two runs then build the
    # same fleet, and differ only by the calls
    ids_rng = random.Random(1)
    uuid.uuid4 = lambda: uuid.UUID(int=ids_rng.getrandbits(128), version=4)

    from tripwire import GuardrailsConfig
    from tripwire.fleet.fleet import Fleet

    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=True),
                  implementation=implementation)
    ids = [f"s-{i}" for i in range(sessions)]
    for i, sid in enumerate(ids):
        g = fleet.session(sid)
        g.start_turn()
        for j in range(6):
            g.on_call("read_file", json.dumps({"path": f"src/pkg{i % 40}/m{j}.py"}))
            g.on_result("read_file", payload=f"contents {i} {j}")
        g.on_usage(model="claude-sonnet-4-5", input_tokens=5000, cost_usd=0.01)
        g.end_turn()
    # the same rows in both runs (only the calls differ), and no collection during the calls
    mix = workload.call_mix(ROWS)
    rows = [(ids[(i * 7919 + 5) % sessions], name, args) for i, (name, args) in enumerate(mix)]
    gc.collect()
    gc.disable()
    on_call = fleet.on_call
    for sid, name, args in rows[:calls]:
        on_call(sid, name, args)


_FIELDS = {"instructions": r"I\s+refs:\s+([\d,]+)", "data accesses": r"D\s+refs:\s+([\d,]+)",
           "cache misses": r"D1\s+misses:\s+([\d,]+)"}


def cachegrind(sessions: int, calls: int, implementation: str) -> dict[str, int]:
    # The simulated cache is cachegrind's first level set to 2 MiB (its --LL is overridden by
    # what this VM's CPUID reports), the addresses fixed (setarch -R: no ASLR) so that the two
    # runs differ only by the calls.
    cmd = ["setarch", "-R", "valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--D1={CACHE}",
           "--cachegrind-out-file=/dev/null", sys.executable,
           *(["-S"] if sys.flags.no_site else []), __file__, "--drive",
           "--sessions", str(sessions), "--calls", str(calls),
           "--implementation", implementation]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stderr
    found = {}
    for name, pattern in _FIELDS.items():
        m = re.search(pattern, out)
        if m is None:
            raise SystemExit(f"no {name!r} in cachegrind's output:\n{out[-2000:]}")
        found[name] = int(m.group(1).replace(",", ""))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--implementation", default="native")
    parser.add_argument("--drive", action="store_true", help="run the driver only")
    args = parser.parse_args()
    if not 0 <= args.calls <= ROWS:
        parser.error(f"--calls is at most {ROWS}")
    if args.drive:
        drive(args.sessions, args.calls, args.implementation)
        os._exit(0)  # no teardown: freeing the fleet would differ between the two runs
    with_calls = cachegrind(args.sessions, args.calls, args.implementation)
    without = cachegrind(args.sessions, 0, args.implementation)
    print(f"{args.implementation}: {args.sessions:,} sessions, {args.calls:,} calls each to another session, "
          f"simulated cache {CACHE}: per call")
    for name in _FIELDS:
        print(f"  {name:<18} {(with_calls[name] - without[name]) / args.calls:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
