"""Autotune on the demo fleet against the seed's own hand tuning (issue 39's acceptance).

The demo's fleet: seven simulated B200s serving the seed's model at speed 20 under the real
pipeline (``gpufleet generate``, 48 requests in flight per server, as ``make demo``), on
``sim-baseline``'s knobs. ``tui.autotune`` searches from there with every default: the default
space (six knobs), budget (4 h of wall time, 1,800 exploration GPU-seconds, 25% regression)
and canary and rollout windows. Then, on the same fleet and pipeline:

1. **the verdict against the seed's hand tuning**: the fleet moved to the seed's aggressive
   profile (``sim-aggressive``: 0.93, 200 slots, ratio 0.6, 64 running), the search's winner
   canaried on GPU 0 against it (the default canary): its verdict must not be ``worse``;
2. **the grid, measured**: a grid over the four knobs (fraction, Mamba slots, ratio, max
   running; every value of the default space, SGLang's automatic values kept) rated by the
   simulator's model (``bench.autotune_measure.model_grid``), its best-rated distinct servers
   and the seed's aggressive RUN one per GPU beside the winner, all at once, three windows one
   after the other (n = 3 a point): the winner against the best of them (>= 0.97 of it, or
   the canary above, is the acceptance).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from bench.autotune_measure import (
    GridPoint,
    Measured,
    measure,
    measure_profile,
    model_grid,
    reached_row,
    shape_of,
    top_distinct,
)
from bench.harness import Context, Row, Stat
from bench.simfleet import (
    BASELINE,
    pipeline,
    sim_fleet,
    sim_profile_text,
    state_dir,
    wait_done_at_least,
)
from tui.autotune.options import AutotuneOptions, SearchResult
from tui.autotune.search import Autotuner
from tui.autotune.space import KNOBS, Candidate, SearchSpace, knobs_of
from tui.ops.service import FleetOps
from tui.profiles import Profile, load_profile
from tui.retune.preflight import model_for, preflight
from tui.rollout.canary_result import CanaryResult
from tui.sim.throughput import expected_rate

BENCH = "autotune on the demo fleet"
SPEED = 20.0
"""The demo's speed (``make demo``)."""
GPUS = 7
INFLIGHT = 48
"""The demo pipeline's requests in flight per server (``gpufleet generate``'s default)."""
FOUR = (
    "mem_fraction_static",
    "max_mamba_cache_size",
    "mamba_full_memory_ratio",
    "max_running_requests",
)
"""The four knobs the grid is over (the tuning form's)."""
WINDOWS = 3
"""Windows a grid point is measured in (n)."""


def four_knob_space() -> SearchSpace:
    """The default values of the four knobs."""
    return SearchSpace(tuple((k, KNOBS[k].default_values) for k in FOUR))


def rate(profile: Profile) -> float:
    """The model's output tokens/s of ``profile`` on one GPU at speed 1 (0: will not start)."""
    pre = preflight(profile, profile.gpus[0])
    if not pre.fits:
        return 0.0
    return expected_rate(pre.plan, model_for(profile, profile.gpus[0])).output_tokens_per_s


def _profile(scratch: Path, name: str, server: str) -> Profile:
    path = scratch / f"{name}.toml"
    ports = list(range(31000, 31000 + GPUS))
    path.write_text(sim_profile_text(name, list(range(GPUS)), ports, "{state}", server, SPEED))
    return load_profile(path)


def run(ctx: Context) -> list[Row]:
    """The search from the baseline with every default, then the winner against the seed's
    aggressive (a canary) and against the grid's best (measured, n = 3)."""
    began = time.monotonic()
    space = four_knob_space()
    base_for_grid = _profile(ctx.scratch, "grid-base", BASELINE)
    grid, points = model_grid(base_for_grid, space)
    grid_s = time.monotonic() - began
    with (
        state_dir(ctx.scratch / "demo-state"),
        sim_fleet(ctx.scratch, GPUS, SPEED) as fleet,
        pipeline(
            ctx.scratch, fleet.urls, prompts=600_000, max_tokens=3000, inflight=INFLIGHT
        ) as job,
    ):
        wait_done_at_least(job, 100, timeout=120)
        t0 = time.monotonic()
        tuner = Autotuner(FleetOps(by="autotune"), AutotuneOptions(gpu=0))
        result: SearchResult = asyncio.run(tuner.run())
        search_s = time.monotonic() - t0
        ops = FleetOps(by="bench")
        winner = ops.profile_for(0)
        aggressive = load_profile(fleet.files["aggressive"])
        applied = asyncio.run(ops.apply(aggressive, mode="drain", measure=False))
        if not applied.ok:
            raise RuntimeError(f"the seed's aggressive profile did not start: {applied}")
        verdict: CanaryResult = asyncio.run(ops.canary(winner, 0))
        # Every GPU overridden on the seed's baseline: the winner (all its knobs), the seed's
        # aggressive, then the grid's best-rated distinct servers (the four knobs).
        picks = top_distinct(grid, shape_of(winner), GPUS - 2)
        everyone = [_as_point(winner, SearchSpace.default()), _as_point(aggressive), *picks]
        baseline = load_profile(fleet.files["baseline"])
        measured = asyncio.run(
            measure(
                ops,
                measure_profile(baseline, everyone, first=0),
                fleet.urls,
                20.0,
                45.0,
                WINDOWS,
            )
        )
        if job.proc.poll() is not None:
            raise RuntimeError("the pipeline stopped during the benchmark")
    found = Found(result, search_s, winner, verdict, measured, picks, everyone[1])
    return _rows(ctx, found, grid_s, points, len(grid))


def _as_point(profile: Profile, space: SearchSpace | None = None) -> GridPoint:
    """A profile's knobs (the four, or ``space``'s) as a grid point (``measure_profile``)."""
    chosen = knobs_of(profile, space or four_knob_space())
    values = {k: v for k, v in chosen.items() if v is not None}
    return GridPoint(Candidate.of(values), rate(profile), shape_of(profile))


@dataclass(frozen=True, slots=True)
class Found:
    """What the run found."""

    result: SearchResult
    """The search."""
    search_s: float
    """Its wall seconds."""
    winner: Profile
    """The profile it ended on."""
    verdict: CanaryResult
    """The winner canaried against the seed's aggressive."""
    measured: Measured
    """The winner, the aggressive and the grid's picks, measured one per GPU."""
    picks: list[GridPoint]
    """The grid's best-rated distinct servers (GPUs 2 onwards)."""
    aggressive: GridPoint
    """The seed's aggressive knobs (GPU 1)."""


def _rows(ctx: Context, found: Found, grid_s: float, points: int, feasible: int) -> list[Row]:
    result, search_s, winner, verdict = found.result, found.search_s, found.winner, found.verdict
    measured, picks, aggressive = found.measured, found.picks, found.aggressive
    names = ["autotune winner", "seed's aggressive"] + [p.candidate.key() for p in picks]
    best = max(range(1, len(names)), key=lambda i: measured.rates[i])
    reached = measured.rates[0] / measured.rates[best]
    not_worse = verdict.verdict != "worse" and verdict.tokens is not None
    launched = sum(1 for r in result.records if r.launched)
    ctx.notes.append(
        f"autotune on the demo fleet ({GPUS} GPUs at speed {SPEED:g}, {INFLIGHT} in flight per "
        f"server, every default): {len(result.records)} candidates, {launched} canaries, "
        f"{sum(r.decision == 'kept' for r in result.records)} adopted, in {search_s:.0f} s of "
        f"wall time ({result.spent.wall_s:.0f} s counted of the 14,400 s budget, "
        f"{result.spent.explore_gpu_s:.0f} of 1,800 exploration GPU-s); ended "
        f"'{result.reason}' on {knobs_of(winner, SearchSpace.default())}"
    )
    for r in result.records:
        ctx.notes.append(f"  #{r.index} {r.key}: {r.decision} ({r.verdict}, {r.relative}): {r.why}")
    ctx.notes.append(
        "  winner canaried against the seed's aggressive: " + verdict.describe().replace("\n", "; ")
    )
    ctx.notes.append(
        f"  grid over the four knobs: {points} points, {feasible} start, rated by the model in "
        f"{grid_s:.0f} s; measured one per GPU, {WINDOWS} windows of "
        f"{measured.window_s / WINDOWS:.0f} s"
    )
    for i, name in enumerate(names):
        samples = ", ".join(f"{x / SPEED:,.0f}" for x in measured.samples[i])
        model = rate(winner) if i == 0 else (aggressive.rate if i == 1 else picks[i - 2].rate)
        ctx.notes.append(
            f"  GPU {i} {name}: {samples} tok/s/GPU at speed 1 "
            f"(mean {measured.rates[i] / SPEED:,.0f}; model {model:,.0f}), "
            f"queue never below {measured.min_queue[i]:.0f}"
        )
    for note in ctx.notes[-(len(result.records) + len(names) + 4) :]:
        print(note, flush=True)
    relative = verdict.tokens.relative if verdict.tokens is not None else float("nan")
    return [
        Row(
            BENCH,
            "winner canaried against the seed's aggressive (relative)",
            Stat.of([relative]),
            verdict.verdict,
            None,
            "not worse",
            not_worse,
            note=verdict.describe().splitlines()[0],
            higher_is_better=True,
            fmt="{:+.1%}",
        ),
        reached_row(
            BENCH,
            "winner / grid's best (measured, n=3 windows)",
            reached,
            f"best of {len(names) - 1}: {names[best]}",
        ),
        Row(
            BENCH,
            "search wall time (s)",
            Stat.of([search_s]),
            "default budget",
            Stat.of([14_400.0]),
            "<= 14,400",
            result.spent.wall_s <= 14_400,
        ),
    ]
