"""Lost throughput of a full-fleet apply vs a rolling rollout (batch 1) of the same change.

A simulated 7-GPU fleet runs the seed's baseline under the real pipeline (``gpufleet generate``);
the change is the seed's aggressive profile. First it is applied to all seven GPUs at once (the
seed's way) and the cost measured; the fleet is put back on the baseline; then the same change
is rolled out one GPU at a time and measured the same way. ``lost_gpu_seconds`` is the fleet's
shortfall against its rate before the operation (``tui.rollout.cost``); it is also expressed in
"GPU restarts": the full apply's per-GPU downtime (its ``gpu_downtime_gpu_seconds`` / 7).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from bench.harness import Context, Row, Stat
from bench.simfleet import pipeline, sim_fleet, state_dir, wait_done_at_least
from tui.ops.journal import read_journal
from tui.ops.service import FleetOps, OpsOptions
from tui.profiles import load_profile
from tui.retune.options import ApplyOptions
from tui.rollout.fleet_verdict import VerdictWindows
from tui.rollout.rollout import RolloutOptions, rollout_plan

BENCH = "rollout"
GPUS = 7
SPEED = 10.0
"""Startup ~3.3 s of simulated phases (+ process start); ~10 requests/s per GPU at 3000 tokens."""
INTERVAL_S = 0.5
BASELINE_S = 4.0
SETTLE_S = 8.0
APPLY = ApplyOptions(timeout_s=60, release_timeout_s=30, measure=False)


def _ops() -> FleetOps:
    # The apply's own 'before' window is the cost's baseline, its warm-up and 'after' window
    # the settle time: the same seconds the rollout gets.
    apply = replace(
        APPLY, window_s=BASELINE_S, warmup_s=SETTLE_S - BASELINE_S, interval_s=INTERVAL_S
    )
    return FleetOps(options=OpsOptions(apply=apply), by="bench")


async def _full(profile_path: Path) -> tuple[float, float, float]:
    profile = load_profile(profile_path)
    result = await _ops().apply(profile, list(profile.gpus), measure=True)
    cost = read_journal().entries[-1].detail.get("cost") or {}
    lost, down = cost.get("lost_gpu_seconds"), cost.get("gpu_downtime_gpu_seconds")
    if not result.ok or lost is None or down is None:
        raise RuntimeError(f"full apply failed or unmeasured: {cost}")
    ready = [r.time_to_ready_s or 0.0 for r in result.reports]
    return float(lost), float(down), sum(ready) / len(ready)


async def _rolling(profile_path: Path) -> tuple[float, float, float | None]:
    profile = load_profile(profile_path)
    plan, _ = rollout_plan(profile)
    options = RolloutOptions(
        batch=1,
        apply=APPLY,
        interval_s=INTERVAL_S,
        baseline_s=BASELINE_S,
        settle_s=SETTLE_S,
        verdict=VerdictWindows(window_s=0),  # the cost as before: the same baseline window
    )
    assert [g for g, _ in plan] == list(profile.gpus)
    result = await _ops().rollout(profile, 1, options=options)
    cost = result.cost
    if not result.ok or cost is None or cost.lost_gpu_seconds is None:
        raise RuntimeError(f"rollout failed or unmeasured: {result.describe()}")
    assert cost.gpu_downtime_gpu_seconds is not None
    return cost.lost_gpu_seconds, cost.gpu_downtime_gpu_seconds, cost.net_gpu_seconds


def run(ctx: Context) -> list[Row]:
    """Measure both operations on one fleet under one pipeline."""
    with (
        state_dir(ctx.scratch / "rollout-state"),
        sim_fleet(ctx.scratch, GPUS, SPEED) as fleet,
        pipeline(ctx.scratch, fleet.urls, prompts=60_000, max_tokens=3000) as job,
    ):
        wait_done_at_least(job, 50, timeout=60)
        full_lost, full_down, ready_s = asyncio.run(_full(fleet.files["aggressive"]))
        # Back to the baseline (not measured), then the same change rolled out.
        back = asyncio.run(
            _ops().apply(load_profile(fleet.files["baseline"]), fleet.gpus, measure=False)
        )
        if not back.ok:
            raise RuntimeError("could not put the fleet back on the baseline")
        wait_done_at_least(job, 0, timeout=1)
        roll_lost, roll_down, roll_net = asyncio.run(_rolling(fleet.files["aggressive"]))
        if job.proc.poll() is not None:
            raise RuntimeError("the pipeline stopped during the benchmark")
    restart = full_down / GPUS
    ctx.notes.append(
        f"rollout: one GPU restart = {restart:.2f} GPU-s of its own output (full apply's per-GPU "
        f"downtime; mean time to ready {ready_s:.2f} s at sim speed {SPEED:g}); rollout lost "
        f"{roll_lost / restart:.2f} restarts, full apply {full_lost / restart:.2f}. Every GPU "
        f"still restarts once in a rollout (its GPUs' own downtime summed: {roll_down:.1f} GPU-s "
        f"vs {full_down:.1f}); the fleet's output dips less because GPUs already on the better "
        f"profile make up for the one restarting (net {roll_net:+.1f} GPU-s)."
    )
    return [
        Row(
            BENCH,
            "lost throughput, 7 GPUs (GPU-seconds)",
            Stat.of([roll_lost]),
            "full-fleet apply",
            Stat.of([full_lost]),
            "rollout <= ~1.5 restarts; apply ~7",
            roll_lost <= 1.5 * restart and full_lost >= 5.0 * restart,
            note=f"one restart = {restart:.2f} GPU-s; rollout {roll_lost / restart:.2f} restarts, "
            f"apply {full_lost / restart:.2f}",
        ),
        Row(
            BENCH,
            "own downtime of every GPU (GPU-seconds)",
            Stat.of([roll_down]),
            "full-fleet apply",
            Stat.of([full_down]),
            "about equal (each GPU restarts once)",
            None,
        ),
    ]
