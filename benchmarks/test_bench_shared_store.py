"""What a shared store costs a turn start, and how fresh another daemon's halt is (SPEC §5).

With a shared store (PostgreSQL; SQLite opened ``shared=True``) each turn start reads the
session's history back, so a halt written by another daemon is refused at this daemon's very
next turn start: the staleness is zero turns, and the time from the other daemon's halt
returning to the refusal here is one turn start (the read). Measured with two Fleets in one
process on separate connections (two daemons, minus the IPC), 40 rows of history.

    .ci/with-postgres python -m pytest benchmarks/test_bench_shared_store.py -q -s
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from store_backends import postgres_url

from tripwire import GuardrailsConfig
from tripwire.durability.open import open_store
from tripwire.errors import GuardrailHalted
from tripwire.fleet.fleet import Fleet

CONFIG = GuardrailsConfig(mode="enforce", unattended=False, max_session_cost_usd=1000.0)
TRIALS = 40


def _location(kind: str, tmp: Path) -> str:
    if kind == "sqlite":
        return str(tmp / "shared.db")
    return f"{postgres_url()}&schema=bench_{uuid.uuid4().hex[:12]}"


@pytest.mark.benchmark(group="shared_store")
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_turn_start_and_halt_freshness(benchmark, tmp_path: Path, kind: str) -> None:
    location = _location(kind, tmp_path)
    options = {"shared": True} if kind == "sqlite" else {}
    a = Fleet(CONFIG, store=open_store(location, **options))
    b = Fleet(CONFIG, store=open_store(location, **options))
    starts, fresh = [], []
    for t in range(TRIALS):
        sid = f"s-{t}"
        ga, gb = a.session(sid), b.session(sid)
        for _ in range(20):  # 20 turns of history (a spend row each), alternating daemons
            for g in (ga, gb):
                g.start_turn()
                g.on_usage(cost_usd=0.01)
                g.end_turn()
        begin = time.perf_counter()
        gb.start_turn()  # a turn start that reads the shared history
        starts.append(time.perf_counter() - begin)
        gb.end_turn()
        ga.start_turn()
        for _ in range(5):
            decision = ga.on_call("read_file", '{"path": "a.py"}')
        assert decision.halt_session  # returned: the halt row is durable
        begin = time.perf_counter()
        with pytest.raises(GuardrailHalted):
            gb.start_turn()
        fresh.append(time.perf_counter() - begin)
    benchmark.pedantic(lambda: None, rounds=1)
    ms = sorted(x * 1000 for x in starts)
    fr = sorted(x * 1000 for x in fresh)
    benchmark.extra_info.update(turn_start_median_ms=round(statistics.median(ms), 2),
                                halt_to_refusal_median_ms=round(statistics.median(fr), 2),
                                halt_to_refusal_max_ms=round(fr[-1], 2))
    print(f"\n{kind}: turn start with a shared store: median {statistics.median(ms):.2f} ms, "
          f"max {ms[-1]:.2f} ms; another daemon's halt refused at the next turn start "
          f"(0 turns late), {statistics.median(fr):.2f} ms median, {fr[-1]:.2f} ms max")
