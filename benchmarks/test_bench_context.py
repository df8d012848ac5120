"""Context estimation through Guardrails: a 1 MiB tool result streamed in 64 KiB chunks."""

from __future__ import annotations

import pytest
import workload

from tripwire import Guardrails, GuardrailsConfig

MIB = workload.payload(1 << 20)
CHUNKS_STR = [MIB[i:i + (1 << 16)] for i in range(0, len(MIB), 1 << 16)]
CHUNKS_BYTES = [c.encode() for c in CHUNKS_STR]
NON_ASCII = [("\u00e9" + c[1:]) for c in CHUNKS_STR]  # forces the UTF-8 length count


@pytest.mark.benchmark(group="on_result_1MiB_in_64KiB_chunks")
@pytest.mark.parametrize("impl", ["native", "python"])
@pytest.mark.parametrize("kind", ["bytes", "ascii-str", "non-ascii-str"])
def test_stream_estimate(benchmark, impl: str, kind: str) -> None:
    chunks = {"bytes": CHUNKS_BYTES, "ascii-str": CHUNKS_STR, "non-ascii-str": NON_ASCII}[kind]
    g = Guardrails(GuardrailsConfig(mode="warn", unattended=False), implementation=impl)
    g.start_turn()
    # a 1M-token window: a MiB (~350K tokens) neither cuts the turn nor blocks later rounds
    g.on_usage(model="claude-opus-4-6", input_tokens=1000)

    def stream() -> None:
        g.on_usage(input_tokens=1000)  # measured: the estimate starts over
        for chunk in chunks:
            g.on_result_chunk(chunk)
        g.on_result("read_file")

    benchmark.extra_info["bytes_per_round"] = 1 << 20
    benchmark(stream)
    expected = sum(len(c.encode()) if isinstance(c, str) else len(c) for c in chunks)
    assert g.on_result_chunk(b"").proceed and g.utilization().unmeasured_bytes == expected
