"""Calibration of the simulated scheduler, as relations with tolerance."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from tui.gpu.sim_records import SIM_GPU_KINDS
from tui.sglang.memory import plan_memory
from tui.sglang.models import get_model
from tui.sglang.plan_types import MemoryPlan
from tui.sim.scheduler import SimScheduler, step_seconds
from tui.sim.throughput import expected_rate

QWEN = get_model("qwen3.6-27b")
B200 = SIM_GPU_KINDS["b200"][1]
BASELINE = plan_memory(
    QWEN, B200, mem_fraction_static=0.88, max_mamba_cache_size=80, speculative_algorithm="EAGLE"
)
AGGRESSIVE = plan_memory(
    QWEN,
    B200,
    mem_fraction_static=0.93,
    max_mamba_cache_size=200,
    mamba_full_memory_ratio=0.6,
    max_running_requests=64,
    speculative_algorithm="EAGLE",
)


def test_baseline_matches_the_seeds_per_server_rate() -> None:
    rate = expected_rate(BASELINE, QWEN)
    assert rate.running == 16
    assert abs(rate.output_tokens_per_s * 7 - 13_500) / 13_500 < 0.15
    assert abs(rate.requests_per_s * 7 - 6.1) / 6.1 < 0.15


def test_more_concurrency_helps_with_diminishing_returns() -> None:
    base = expected_rate(BASELINE, QWEN).output_tokens_per_s
    wide = expected_rate(AGGRESSIVE, QWEN).output_tokens_per_s
    assert AGGRESSIVE.max_running_requests == 40
    gain = wide / base
    assert 1.0 < gain < 40 / 16


def test_speed_scales_rates() -> None:
    assert (
        abs(
            expected_rate(BASELINE, QWEN, speed=50).output_tokens_per_s
            - 50 * expected_rate(BASELINE, QWEN).output_tokens_per_s
        )
        < 1e-6
    )


async def _measure(
    plan: MemoryPlan, speed: float, requests: int, tokens: int
) -> tuple[float, int, int]:
    lines: list[str] = []
    sch = SimScheduler(plan, QWEN, speed=speed, decode_log_interval=40, emit=lines.append)
    task = asyncio.create_task(sch.run())
    try:
        start = time.monotonic()
        reqs = [sch.submit(f"r{i}", 100, tokens, True) for i in range(requests)]
        peak = 0
        while not all(r.done.done() for r in reqs):
            peak = max(peak, len(sch.running))
            await asyncio.sleep(0.01)
        elapsed = time.monotonic() - start
    finally:
        task.cancel()
    decode = [line for line in lines if line.startswith("Decode batch, ")]
    assert decode and "mamba usage" in decode[0] and "accept len" in decode[0]
    return requests * tokens / elapsed, peak, len(decode)


async def test_scheduler_runs_at_the_modelled_rate_and_respects_the_cap() -> None:
    speed = 100.0
    measured, peak, _ = await _measure(BASELINE, speed, 64, 3000)
    assert peak == 16  # never more than the effective cap
    # 4 waves of 16 identical requests: the steady-state model applies.
    expected = expected_rate(BASELINE, QWEN, speed=speed).output_tokens_per_s
    assert abs(measured - expected) / expected < 0.15


async def test_scheduler_wider_cap_is_faster_but_sublinear() -> None:
    speed = 100.0
    narrow, _, _ = await _measure(BASELINE, speed, 80, 2000)
    wide, peak, _ = await _measure(AGGRESSIVE, speed, 80, 2000)
    assert peak == 40
    assert narrow < wide < narrow * 40 / 16


async def test_a_late_catch_up_logs_each_interval_at_its_own_rate() -> None:
    """One wake-up that is many log intervals late writes several decode lines at once; each
    line's gen throughput must still be tokens over that interval's own duration."""
    lines: list[str] = []
    speed = 10.0
    sch = SimScheduler(BASELINE, QWEN, speed=speed, decode_log_interval=40, emit=lines.append)
    for i in range(16):
        sch.submit(f"r{i}", 100, 100_000, True)
    sch._run_prefill(sch._prefill_batch(), 0.001)  # admit all 16 in one prefill batch
    assert len(sch.running) == 16
    step = step_seconds(QWEN, 16, speed)
    start = time.monotonic()
    sch._log_at = start
    sch.advance(40 * step * 5.5, start + 40 * step * 5.5)  # 5 intervals in one go
    rates = [float(m) for m in re.findall(r"gen throughput \(token/s\): ([0-9.]+)", "".join(lines))]
    assert len(rates) == 5, lines
    expected = expected_rate(BASELINE, QWEN, speed=speed).output_tokens_per_s
    for rate in rates:
        assert abs(rate - expected) / expected < 0.1, (rate, expected)


async def test_a_huge_prompt_is_prefilled_in_chunks_while_decoding_pauses() -> None:
    """SGLang's chunked prefill (no mixed chunks): one Prefill line per chunk at the prefill
    rate, and no decode step in between, so the decode counters stand still meanwhile."""
    lines: list[str] = []
    speed = 20.0
    sch = SimScheduler(BASELINE, QWEN, speed=speed, decode_log_interval=40, emit=lines.append)
    task = asyncio.create_task(sch.run())
    try:
        decoding = [sch.submit(f"d{i}", 100, 50_000, True) for i in range(4)]
        while len(sch.running) < 4:
            await asyncio.sleep(0.01)
        prompt = 10 * BASELINE.chunked_prefill_size + 100
        started = time.monotonic()
        big = sch.submit("big", prompt, 8, True)
        while big.first_token_at is None:
            await asyncio.sleep(0.01)
        elapsed = time.monotonic() - started
        decode_before = sch.realtime_tokens["decode"]
        assert not any(r.done.done() for r in decoding)
    finally:
        task.cancel()
    chunks = [ln for ln in lines if ln.startswith("Prefill batch") and "#new-token: 16384" in ln]
    assert len(chunks) >= 10, lines[-15:]
    assert "#pending-token: " in chunks[0] and "#pending-token: 0," not in chunks[0]
    expected = prompt / QWEN.prefill_tokens_per_s / speed
    assert expected * 0.8 < elapsed < expected * 2 + 0.3
    # The prefill lines came one after another: no decode line between the first and the last.
    first = lines.index(chunks[0])
    last = lines.index(chunks[-1])
    assert not any(ln.startswith("Decode batch") for ln in lines[first:last])
    assert decode_before > 0 and sch.realtime_tokens["prefill_compute"] >= prompt


def _spec(draft_tokens: int, **knobs: Any) -> MemoryPlan:
    return plan_memory(
        QWEN,
        B200,
        mem_fraction_static=0.88,
        speculative_algorithm="EAGLE",
        speculative_num_draft_tokens=draft_tokens,
        **knobs,
    )


def test_more_speculative_steps_win_at_a_small_batch_and_lose_at_a_large_one() -> None:
    """SGLang's own adaptive speculation allows 7 steps at batch 1, at most 3 from batch 8
    (srt/speculative/adaptive_spec_params.py): the verify cost grows with batch x draft tokens."""

    def rate(draft_tokens: int, slots: int) -> float:
        plan = _spec(draft_tokens, max_mamba_cache_size=slots)
        return expected_rate(plan, QWEN).output_tokens_per_s

    # 80 slots: 16 running; the seed's 3 steps (4 draft tokens) are the best of 2, 3, 4 steps.
    assert rate(4, 80) > rate(3, 80) and rate(4, 80) > rate(5, 80)
    # 200 slots: 40 running; 2 steps beat 3, which beat 4.
    assert rate(3, 200) > rate(4, 200) > rate(5, 200)
    # the accept length grows with the steps, with diminishing returns
    lengths = [expected_rate(_spec(d), QWEN).output_tokens_per_s for d in (3, 4, 5)]
    assert len(set(lengths)) == 3


async def test_a_batch_above_the_cuda_graph_ceiling_runs_eager_and_slower() -> None:
    """srt/model_executor/runner/decode_cuda_graph_runner.py can_run_graph: bs <= max_bs."""
    graphed = _spec(4, max_mamba_cache_size=120)
    eager = _spec(4, max_mamba_cache_size=120, cuda_graph_max_bs=16)
    assert graphed.max_running_requests == eager.max_running_requests == 24
    assert eager.cuda_graph_max_bs == 16
    fast = expected_rate(graphed, QWEN).output_tokens_per_s
    slow = expected_rate(eager, QWEN).output_tokens_per_s
    assert slow < fast * 0.9
    # and the simulated scheduler runs at the eager rate, saying so on its decode lines
    lines: list[str] = []
    speed = 10.0
    sch = SimScheduler(eager, QWEN, speed=speed, decode_log_interval=40, emit=lines.append)
    for i in range(24):
        sch.submit(f"r{i}", 100, 100_000, True)
    sch._run_prefill(sch._prefill_batch(), 0.001)
    assert len(sch.running) == 24
    step = step_seconds(QWEN, 24, speed, eager)
    start = time.monotonic()
    sch._log_at = start
    sch.advance(40 * step * 2.5, start + 40 * step * 2.5)
    decode = [line for line in lines if line.startswith("Decode batch, ")]
    assert len(decode) == 2 and all("cuda graph: False" in line for line in decode)
    rates = [
        float(m) for m in re.findall(r"gen throughput \(token/s\): ([0-9.]+)", "".join(decode))
    ]
    expected = expected_rate(eager, QWEN, speed=speed).output_tokens_per_s
    assert all(abs(r - expected) / expected < 0.1 for r in rates), (rates, expected)
