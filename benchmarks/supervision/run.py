"""Print the supervision evaluation's table (see ``sim.py``).

    python benchmarks/supervision/run.py --seed 1
    python benchmarks/supervision/run.py --seed 1 --tasks 50 --misjudge 0 --implementation python
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sim


def main(argv: list[str] | None = None) -> int:
    defaults = sim.Settings()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tasks", type=int, default=defaults.tasks, help="tasks per policy")
    p.add_argument("--steps", type=int, default=defaults.steps, help="each task's step allowance")
    p.add_argument("--every", type=int, default=defaults.review_every_steps,
                   help="review every N steps (0: only on alerts and stop attempts)")
    p.add_argument("--comply", type=float, default=defaults.comply)
    p.add_argument("--misjudge", type=float, default=defaults.misjudge)
    p.add_argument("--mode", default=defaults.mode, choices=("warn", "feedback", "enforce"))
    p.add_argument("--implementation", choices=("native", "python"), default=None)
    p.add_argument("--policy", action="append", choices=sim.POLICIES,
                   help="only these policies (repeatable)")
    args = p.parse_args(argv)
    settings = replace(defaults, tasks=args.tasks, steps=args.steps,
                       review_every_steps=args.every or None, comply=args.comply,
                       misjudge=args.misjudge, mode=args.mode,
                       implementation=args.implementation)
    rows = sim.evaluate(args.seed, settings, args.policy or sim.POLICIES)
    print(f"seed {args.seed}: {settings.tasks} tasks per policy, {settings.steps} steps each "
          f"(worker and supervisor), stop-hook cap {settings.stop_rejections}, "
          f"{settings.reviews} reviews; mode {settings.mode}; review every "
          f"{settings.review_every_steps or 'never'} steps and on alerts and stop attempts; "
          f"comply {settings.comply}, misjudge {settings.misjudge}")
    print(sim.table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
