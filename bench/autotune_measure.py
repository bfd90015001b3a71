"""The autotune benchmark's measured side: the offline grid rated by the simulator's model, and
its top configurations measured on the fleet under the running pipeline, one per GPU.

The exhaustive grid is too large to run (15,552 points of explicit values, 21,600 with the
baseline's automatic values kept as points of their own): the model
(``tui.sim.throughput.expected_rate``, which runs the simulator's own scheduler where the KV
pool binds) rates every point, and the distinct servers it rates best are then RUN, each on one
GPU of the fleet beside the autotune winner, all at once, for the same fixed window under the
same pipeline: the "reached" ratio is measured tokens over measured tokens. Relaunching the whole
fleet onto these configurations is itself one restart cycle of the offline way, so it is timed.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.harness import Row, Stat
from tui.autotune.space import KNOBS, Candidate, SearchSpace, candidate_profile, knobs_of
from tui.ops.service import FleetOps
from tui.profiles import Profile, profile_from_dict, profile_to_dict
from tui.retune.preflight import model_for, preflight
from tui.sim.throughput import expected_rate

SHAPE = (
    "max_running_requests",
    "max_total_num_tokens",
    "cuda_graph_max_bs",
    "speculative",
    "num_draft_tokens",
)
"""The plan fields that decide a simulated server's throughput (grid points equal on these run
the same server)."""


@dataclass(frozen=True, slots=True)
class GridPoint:
    """One feasible point of the grid, rated by the model."""

    candidate: Candidate
    """Its knobs (all of the space's)."""
    rate: float
    """Modelled output tokens/s of one GPU at speed 1."""
    shape: tuple[object, ...]
    """Its server, as SHAPE's plan fields."""


def model_grid(base: Profile, space: SearchSpace) -> tuple[list[GridPoint], int]:
    """Every point of ``space`` the preflight lets start, best-rated first.

    Args:
        base: The fleet's baseline profile (the knobs are set on it).
        space: The grid.

    Returns:
        (feasible points sorted by modelled rate, points in the grid).
    """
    # A knob the baseline leaves on SGLang's automatic value keeps that value as one more grid
    # point (None: not set): the search may keep it too (e.g. the automatic CUDA-graph ceiling,
    # which covers a batch above the space's largest explicit ceiling), so a grid without it
    # would not be the same space.
    auto = {k for k, v in knobs_of(base, space).items() if v is None}
    points: list[dict[str, float | None]] = [{}]
    for knob, values in space.values:
        options = (*values, None) if knob in auto else values
        points = [{**p, knob: v} for p in points for v in options]
    out: list[GridPoint] = []
    for point in points:
        candidate = Candidate.of({k: v for k, v in point.items() if v is not None})
        profile = candidate_profile(base, candidate, "grid")
        pre = preflight(profile, profile.gpus[0])
        model = model_for(profile, profile.gpus[0])
        if not pre.fits or model is None:
            continue
        rate = expected_rate(pre.plan, model).output_tokens_per_s
        shape = tuple(getattr(pre.plan, f) for f in SHAPE)
        out.append(GridPoint(candidate, rate, shape))
    return sorted(out, key=lambda g: g.rate, reverse=True), len(points)


def shape_of(profile: Profile) -> tuple[object, ...]:
    """The server ``profile`` runs on its first GPU, as SHAPE's plan fields."""
    plan = preflight(profile, profile.gpus[0]).plan
    return tuple(getattr(plan, f) for f in SHAPE)


def top_distinct(grid: list[GridPoint], skip: tuple[object, ...], count: int) -> list[GridPoint]:
    """The ``count`` best-rated points with distinct servers, none running ``skip``'s server."""
    seen = {skip}
    out: list[GridPoint] = []
    for point in grid:
        if point.shape not in seen:
            seen.add(point.shape)
            out.append(point)
        if len(out) == count:
            break
    return out


def measure_profile(final: Profile, picks: list[GridPoint], first: int = 1) -> Profile:
    """The fleet's final profile with GPU i+``first`` overridden to ``picks[i]`` (the GPUs
    before ``first`` keep it)."""
    doc = profile_to_dict(final)
    doc["name"] = "grid-measure"
    doc["note"] = "the grid's best-rated servers, one per GPU, beside the autotune winner"
    tables: dict[str, Any] = {}
    for gpu, point in zip(final.gpus[first:], picks, strict=False):
        table: dict[str, Any] = {}
        for knob, value in point.candidate.knobs:
            if KNOBS[knob].extra_flag:
                table.setdefault("extra_flags", {})[knob] = value
            else:
                table[knob] = value
            if knob == "speculative_num_steps":
                table["speculative_num_draft_tokens"] = int(value) + 1
        tables[str(gpu)] = table
    doc["gpu"] = tables
    return profile_from_dict(doc, "grid-measure", source="bench autotune")


_DECODE = re.compile(r'^sglang:realtime_tokens_total\{[^}]*mode="decode"[^}]*\} (\S+)$', re.M)
_QUEUE = re.compile(r"^sglang:num_queue_reqs\{[^}]*\} (\S+)$", re.M)
_RETRACTED = re.compile(r"^sglang:num_retracted_requests_total\{[^}]*\} (\S+)$", re.M)


def _scrape(url: str) -> tuple[float, float, float]:
    """(decode tokens so far, queued requests, retracted so far) from one server's /metrics."""
    text = httpx.get(url + "/metrics", timeout=5).text
    decode, queue, retracted = (rx.search(text) for rx in (_DECODE, _QUEUE, _RETRACTED))
    if decode is None or queue is None or retracted is None:
        raise RuntimeError(f"{url}/metrics lacks decode tokens, the queue or retractions")
    return float(decode.group(1)), float(queue.group(1)), float(retracted.group(1))


@dataclass(frozen=True, slots=True)
class Measured:
    """The fleet measured on the grid's configurations."""

    restart_s: float
    """Wall seconds to relaunch the whole fleet onto them (one offline restart cycle)."""
    rates: list[float]
    """Per GPU: measured decode tokens per wall second over the window (the mean of the
    windows' rates when there were several)."""
    min_queue: list[float]
    """Per GPU: the fewest requests queued at any sample (> 0: the client never starved it)."""
    retracted: list[float]
    """Per GPU: requests the KV pool retracted during the window."""
    window_s: float
    """The window's wall seconds."""
    samples: list[list[float]] = field(default_factory=list)
    """Per GPU: each window's rate (n windows one after the other; one without ``windows``)."""


async def measure(
    ops: FleetOps,
    profile: Profile,
    urls: list[str],
    warmup_s: float,
    window_s: float,
    windows: int = 1,
) -> Measured:
    """Relaunch the fleet onto ``profile`` (timed), warm up, count each GPU's decode tokens.

    Args:
        ops: The operations door.
        profile: One configuration per GPU (``measure_profile``).
        urls: Each GPU's server, in GPU order.
        warmup_s: Wall seconds before the first window.
        window_s: Each window's wall seconds.
        windows: Windows one after the other (each GPU's rate in each: n samples a point).

    Returns:
        The measurement.

    Raises:
        RuntimeError: a GPU did not come back ready.
    """
    started = time.monotonic()
    result = await ops.apply(profile, mode="drain")
    restart_s = time.monotonic() - started
    if not result.ok:
        raise RuntimeError(f"the grid's configurations did not all start: {result}")
    await asyncio.sleep(warmup_s)
    first = [await asyncio.to_thread(_scrape, u) for u in urls]
    lows = [q for _, q, _ in first]
    samples: list[list[float]] = [[] for _ in urls]
    begin, elapsed = first, 0.0
    for _ in range(windows):
        t0 = time.monotonic()
        while time.monotonic() - t0 < window_s:
            await asyncio.sleep(max(0.0, min(3.0, window_s - (time.monotonic() - t0))))
            for i, (_, queue, _) in enumerate([await asyncio.to_thread(_scrape, u) for u in urls]):
                lows[i] = min(lows[i], queue)
        end = [await asyncio.to_thread(_scrape, u) for u in urls]
        took = time.monotonic() - t0
        for i, (a, b) in enumerate(zip(begin, end, strict=True)):
            samples[i].append((b[0] - a[0]) / took)
        begin, elapsed = end, elapsed + took
    rates = [sum(s) / len(s) for s in samples]
    retracted = [b[2] - a[2] for a, b in zip(first, begin, strict=True)]
    return Measured(restart_s, rates, lows, retracted, elapsed, samples)


def reached_row(bench: str, metric: str, reached: float, peer_name: str) -> Row:
    """The row of a winner measured against the grid's best (the target: >= 0.97 of it)."""
    return Row(
        bench,
        metric,
        Stat.of([reached]),
        peer_name,
        Stat.of([1.0]),
        ">= 0.97",
        reached >= 0.97,
        higher_is_better=True,
    )
