"""Per-corpus warn rate of ``repeated-tool-name``: the share of sessions in ../shared/corpus with
at least one such alert, replayed through the guardrails (default config, warn mode), and the
median / max longest same-identity run of calls per session. A measurement, not a test:

    python benchmarks/name_rates.py [--implementation native|python]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path

from tripwire.cli.replay import ReplayOptions, ReplayStats, replay_transcript
from tripwire.interchange.adapters import read, transcripts
from tripwire.interchange.events import Call

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


def identity_of():
    """The identity the name-level signals use (the plain name before shell-tool identity)."""
    try:
        from tripwire.identity.shell import tool_identity
        from tripwire.signals import WatchdogConfig

        shells = WatchdogConfig().engine_settings().shell_tools
        return lambda call: tool_identity(call.name, call.args, shells)
    except ImportError:
        return lambda call: call.name


def longest_runs(found: list) -> list[int]:
    identity = identity_of()
    runs: Counter = Counter()
    last: dict[str, tuple[str, int]] = {}
    for transcript in found:
        for item in read(transcript):
            if not isinstance(item.event, Call):
                continue
            key = identity(item.event)
            prev, run = last.get(item.session, (None, 0))
            run = run + 1 if key == prev else 1
            last[item.session] = (key, run)
            runs[item.session] = max(runs[item.session], run)
    return list(runs.values())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--implementation", choices=("native", "python"), default="native")
    args = parser.parse_args()
    print("| corpus | sessions | warned by repeated-tool-name | rate | longest same-identity "
          "run: median / max |")
    print("|---|---|---|---|---|")
    for corpus in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        found = transcripts([str(corpus)])
        warned: set[str] = set()
        stats = ReplayStats()
        options = ReplayOptions(implementation=args.implementation)
        for transcript in found:
            for record in replay_transcript(transcript, options, stats):
                if record.get("signal") == "repeated-tool-name":
                    warned.add(record.get("session", transcript.name))
        runs = longest_runs(found)
        print(f"| {corpus.name} | {stats.sessions} | {len(warned)} | "
              f"{len(warned) / stats.sessions:.1%} | {statistics.median(runs):g} / "
              f"{max(runs)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
