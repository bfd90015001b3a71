"""The log-line table (``tui.sglang.loglines``): the simulator writes each line from its row and
the parser reads it by the same row, and the real lines SGLang printed are read by those rows."""

from __future__ import annotations

import pytest
from repo_paths import FIXTURES

from tui.logs.parser import parse_line
from tui.sglang import loglines
from tui.sglang.loglines import LINES, LogLine
from tui.sglang.memory import plan_memory
from tui.sglang.models import MODELS
from tui.sim import logfmt

REAL = [
    *sorted((FIXTURES / "real_sglang" / "0.5.17").rglob("*.log")),
    FIXTURES / "logs" / "sglang-0523-lines.txt",
    FIXTURES / "logs" / "sglang-log-samples.txt",
    FIXTURES / "logs" / "seed-lines.txt",
]

EXAMPLES: dict[str, dict[str, object]] = {
    "weights_line": {
        "elapsed_s": 12.5,
        "arch": "Qwen3_5ForConditionalGeneration",
        "quant": "quant=fp8, fmt=e4m3, ",
        "avail_gb": "140.11",
        "usage_gb": "29.03",
    },
    "mamba_line": {"slots": 200, "conv_gb": "1.10", "ssm_gb": "29.00", "speculative": ""},
    "kv_line_dtype": {
        "dtype": "dtype: torch.bfloat16, ",
        "tokens": 1234567,
        "sizes": "K size: 10.50 GB, V size: 10.50 GB",
    },
    "memory_pool_end": {"avail_gb": "30.20"},
    "pool_line": {
        "tokens": 1234567,
        "chunked_prefill_size": 8192,
        "max_prefill_tokens": 16384,
        "max_running_requests": 40,
        "context_len": 262144,
        "avail_gb": "12.34",
    },
    "cap_warning": {"cap": 40, "slots": 200, "ratio": 5},
    "kv_reduced_warning": {"requested": 64, "effective": 48},
    "ready_line": {},
}
"""A value for every template's parameter, per row."""

READ_BACK: dict[str, dict[str, object]] = {
    "weights_line": {"elapsed_s": 12.5, "quant": "fp8", "avail_mem_gb": 140.11},
    "mamba_line": {"max_mamba_cache_size": 200, "conv_gb": 1.1, "ssm_gb": 29.0},
    "kv_line_dtype": {"tokens": 1234567, "k_gb": 10.5, "dtype": "torch.bfloat16"},
    "memory_pool_end": {"avail_mem_gb": 30.2},
    "pool_line": {"max_total_num_tokens": 1234567, "max_running_requests": 40},
    "cap_warning": {"max_running_requests": 40, "slots_per_request": 5, "cause": "mamba"},
    "kv_reduced_warning": {"requested": 64, "max_running_requests": 48, "cause": "kv_cache"},
    "ready_line": {},
}
"""What the parser must read back from each written example."""


@pytest.mark.parametrize("line", LINES, ids=lambda line: line.name)
def test_every_line_the_simulator_writes_the_parser_reads_by_the_same_row(line: LogLine) -> None:
    text = f"[2026-12-07 10:00:00] {line.write(**EXAMPLES[line.name])}"
    event = parse_line(text)
    assert event is not None and event.kind == line.event, text
    assert READ_BACK[line.name].items() <= event.fields.items(), event.fields


def test_the_simulators_own_lines_are_the_rows() -> None:
    model = MODELS["qwen3.6-27b"]
    plan = plan_memory(model, 192 * 2**30, max_mamba_cache_size=200, max_running_requests=64)
    written = {
        "mamba_line": logfmt.mamba_line(plan),
        "kv_line_dtype": logfmt.kv_line(plan.max_total_num_tokens, plan.k_bytes, plan.v_bytes),
        "memory_pool_end": logfmt.memory_pool_end_line(plan.available_after_pools_bytes),
        "pool_line": logfmt.summary_line(plan),
        "ready_line": logfmt.READY_LINE,
        "cap_warning": next(w for w in plan.warnings if "capped" in w),
    }
    for name, text in written.items():
        row = next(r for r in LINES if r.name == name)
        assert row.read(text) is not None, name
        event = parse_line(text)
        assert event is not None and event.kind == row.event, text
    pool = parse_line(written["pool_line"])
    assert pool is not None and pool.fields["max_running_requests"] == 40


def test_the_real_lines_sglang_printed_are_read_by_the_rows() -> None:
    seen: dict[str, int] = {line.name: 0 for line in LINES}
    for path in REAL:
        for number, text in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            for line in LINES:
                if not line.pattern.search(text):
                    continue
                event = parse_line(text, number)
                if event is None or event.kind == "error":
                    continue  # an error that names a pool ("Not enough memory for KV cache")
                assert event.kind == line.event, f"{path.name}:{number}: {text}"
                seen[line.name] += 1
    # every row but the KV-reduced warning (no real server printed it here) is in the fixtures
    assert {name for name, n in seen.items() if n == 0} <= {"kv_reduced_warning"}, seen
    assert loglines.READY.write() == "The server is fired up and ready to roll!"
