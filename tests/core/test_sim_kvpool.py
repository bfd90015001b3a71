"""The simulator's KV pool (SGLang 0.5.23's admission, retraction and token ratio) and what it
does to the throughput model: a small pool with long outputs retracts and loses throughput, so
the model's best configuration on the seed's B200 is not its largest concurrency."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from sim_helpers import Clients, running_sim, wait_until

from tui.gpu.sim_records import SIM_GPU_KINDS
from tui.logs.life_rules import pressure
from tui.logs.parser import parse_line
from tui.sglang.memory import plan_memory
from tui.sglang.models import get_model
from tui.sglang.plan_types import MemoryPlan
from tui.sim import kvpool
from tui.sim.scheduler import SimScheduler
from tui.sim.steady import JOB, kv_binds, steady_run
from tui.sim.throughput import expected_rate

QWEN = get_model("qwen3.6-27b")
B200 = SIM_GPU_KINDS["b200"][1]


def seed_plan(
    fraction: float, slots: int, running: int | None = None, graph_bs: int | None = None
) -> MemoryPlan:
    """The seed's server (extra_buffer, EAGLE 3 steps) with the tuning knobs set."""
    return plan_memory(
        QWEN,
        B200,
        mem_fraction_static=fraction,
        max_mamba_cache_size=slots,
        max_running_requests=running,
        cuda_graph_max_bs=graph_bs,
        mamba_radix_cache_strategy="extra_buffer",
        speculative_algorithm="EAGLE",
        speculative_num_draft_tokens=4,
    )


@dataclass
class Req:
    """A request as the rules read it."""

    prompt_tokens: int
    generated: float
    max_new: int = 3000
    ignore_eos: bool = False


def test_the_ratio_decays_from_sglangs_initial_value_to_its_floor_in_600_steps() -> None:
    ratio = kvpool.NewTokenRatio()
    assert ratio.current == 0.7
    ratio.decay(300)
    assert ratio.current == pytest.approx(0.7 - 300 * (0.7 - 0.098) / 600)
    ratio.decay(301)
    assert ratio.current == pytest.approx(0.7 * 0.14)
    ratio.reset()
    assert ratio.current == 0.7


def test_admission_reserves_running_requests_at_the_ratio_and_new_ones_in_full() -> None:
    running = [Req(8, 1000), Req(8, 2900), Req(8, 0, ignore_eos=True)]
    held = sum(kvpool.held_tokens(r) for r in running)
    room = kvpool.remaining_total(20_000, held, running, 0.5)
    # 2000 * 0.5 + 100 * 0.5 + 3000 * 1.0 (ignore_eos reserves in full)
    assert room == pytest.approx(20_000 - held - 1000 - 50 - 3000)
    assert kvpool.admission_cost(Req(8, 0), 8) == 3008
    assert kvpool.admission_cost(Req(8, 0, max_new=9000), 8) == 8 + 4096  # CLIP estimation


def test_retraction_takes_the_fewest_generated_first_until_the_step_fits() -> None:
    plan = seed_plan(0.88, 80)  # 4 draft tokens a step per request
    running = [Req(8, 500), Req(8, 100), Req(50, 100), Req(8, 2000)]
    victims = kvpool.retraction_victims(plan, running, free=0)
    # Ties on generated tokens go to the longer prompt first; 16 tokens are needed for 4
    # requests, 108 free after the first victim is enough for the other 3.
    assert victims == [running[2]]
    victims = kvpool.retraction_victims(plan, running, free=-150)
    assert victims == [running[2], running[1]]
    everything = kvpool.retraction_victims(plan, running, free=-(10**9))
    assert everything == [running[2], running[1], running[0]]  # never the last one
    kept = [running[0], running[3]]
    assert kvpool.ratio_after_retract(kept) == pytest.approx((2500 + 40) / 6001)


def test_max_new_tokens_is_clamped_so_one_request_fits_an_empty_pool() -> None:
    tiny = seed_plan(0.93, 400, 80)
    assert tiny.max_total_num_tokens < 3000
    bound = kvpool.max_new_tokens(tiny, 8, 3000)
    assert bound == tiny.max_total_num_tokens - 1 - 8 - 1
    assert kvpool.max_new_tokens(seed_plan(0.88, 80), 8, 3000) == 3000


def test_a_small_pool_with_long_outputs_retracts_and_loses_throughput() -> None:
    small = seed_plan(0.88, 360, 80)  # 72 running on ~29k KV tokens
    large = seed_plan(0.91, 360, 80)  # the same 72 running on ~107k
    assert small.max_running_requests == large.max_running_requests == 72
    assert kv_binds(small) and kv_binds(large)
    lean, roomy = steady_run(small, QWEN), steady_run(large, QWEN)
    assert lean.retracted > 50 and roomy.retracted == 0
    assert lean.running < 0.5 * roomy.running
    assert lean.output_tokens_per_s < 0.7 * roomy.output_tokens_per_s


def test_the_seeds_calibration_still_holds() -> None:
    # 16 running (the seed's baseline) and 40 (its aggressive run): the pool does not bind.
    base, aggressive = seed_plan(0.88, 80), seed_plan(0.93, 200, 64)
    assert not kv_binds(base) and not kv_binds(aggressive)
    assert expected_rate(base, QWEN).output_tokens_per_s == pytest.approx(1935, rel=0.01)
    assert expected_rate(aggressive, QWEN).output_tokens_per_s == pytest.approx(3158, rel=0.01)


def test_the_models_optimum_on_the_seeds_b200_is_not_its_largest_concurrency() -> None:
    rates: dict[tuple[float, int, int], tuple[int, float]] = {}
    for fraction in (0.84, 0.88, 0.91, 0.93):
        for slots in (200, 240, 280, 320, 360, 400):
            for running in (56, 64, 72, 80):
                plan = seed_plan(fraction, slots, running, graph_bs=running)
                if plan.ok:
                    rate = expected_rate(plan, QWEN).output_tokens_per_s
                    rates[(fraction, slots, running)] = (plan.max_running_requests, rate)
    best = max(rates.values(), key=lambda v: v[1])
    widest = max(cap for cap, _ in rates.values())
    assert best[0] < widest
    # Every configuration at the widest concurrency that fits loses to the pool.
    assert all(rate < 0.5 * best[1] for cap, rate in rates.values() if cap == widest)


async def test_the_scheduler_retracts_from_the_model_and_the_log_parser_reads_it() -> None:
    plan = seed_plan(0.88, 360, 80)
    lines: list[str] = []
    speed = 200.0
    sch = SimScheduler(plan, QWEN, speed=speed, decode_log_interval=40, emit=lines.append)
    task = asyncio.create_task(sch.run())
    try:
        reqs = [sch.submit(f"r{i}", JOB.prompt_tokens, JOB.max_tokens, False) for i in range(200)]
        deadline = time.monotonic() + 20
        while sch.retracted_total < 10 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert len(sch.running) <= plan.max_running_requests
        assert sch.used_tokens() <= plan.max_total_num_tokens
    finally:
        task.cancel()
        for req in reqs:
            sch.abort(req)
    warnings = [ln for ln in lines if ln.startswith("KV cache pool is full. Retract requests.")]
    assert warnings, "the model never retracted"
    fields = pressure(warnings[-1])
    assert fields is not None and fields["reason"] == "retract"
    assert int(fields["retracted_reqs"]) >= 1
    assert 0.0 < float(fields["new_token_ratio"]) <= 1.0
    assert "#mamba_num_gained: " in warnings[-1]


async def test_the_scheduler_runs_at_the_models_rate_where_the_pool_binds() -> None:
    """The servers and the model are one code, so their rates agree (noise: a short window)."""
    plan = seed_plan(0.91, 400, 64)  # 64 running on ~90k KV tokens: the pool binds, mildly
    assert kv_binds(plan)
    speed = 100.0
    sch = SimScheduler(plan, QWEN, speed=speed, decode_log_interval=40, emit=lambda _: None)
    task = asyncio.create_task(sch.run())
    try:
        # ~170 requests a wall second finish: enough queued for the whole window
        reqs = [sch.submit(f"r{i}", JOB.prompt_tokens, JOB.max_tokens, False) for i in range(900)]
        await asyncio.sleep(1.0)  # warm-up: the batch fills, the ratio decays
        start, tokens0 = time.monotonic(), sch.realtime_tokens["decode"]
        await asyncio.sleep(2.5)
        assert sch.waiting, "the queue ran dry: the window measured an idle server"
        measured = (sch.realtime_tokens["decode"] - tokens0) / (time.monotonic() - start)
    finally:
        task.cancel()
        for req in reqs:
            sch.abort(req)
    expected = expected_rate(plan, QWEN, speed=speed).output_tokens_per_s
    assert abs(measured - expected) / expected < 0.2


SMALL_POOL = [
    *("--sim-speed", "5", "--sim-startup-seconds", "1", "--enable-metrics"),
    *("--mem-fraction-static", "0.88", "--max-mamba-cache-size", "360"),
    *("--max-running-requests", "80", "--mamba-radix-cache-strategy", "extra_buffer"),
    *("--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3"),
    *("--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"),
]
"""A simulated server whose 72 running requests share ~29,000 KV tokens."""


def test_a_server_with_a_small_pool_retracts_by_itself(tmp_path: Path) -> None:
    with running_sim(SMALL_POOL, tmp_path) as sim:
        clients = Clients(sim.url, 150, max_tokens=3000, ignore_eos=False)
        retracted = wait_until(lambda: "KV cache pool is full. Retract requests." in sim.log(), 30)
        assert retracted, sim.log()[-3000:]
        log = sim.log()
        answered = list(clients.results)  # before the server stops under the rest
    line = next(ln for ln in log.splitlines() if "KV cache pool is full" in ln)
    event = parse_line(line)
    assert event is not None and event.kind == "pressure"
    assert event.fields["reason"] == "retract" and int(event.fields["retracted_reqs"]) >= 1
    assert "#new_token_ratio: " in line and "Testing retraction" not in log
    assert not [r for r in answered if r != 200]  # a retracted request is requeued, not failed
