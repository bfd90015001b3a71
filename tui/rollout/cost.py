"""The cost of a retune: throughput lost to an apply, a canary or a rollout, in GPU-seconds.

Baseline: each GPU's mean output tokens/s over the intervals before the operation began; the
fleet's baseline is their sum and one GPU's share is that sum / number of GPUs. From the moment
the operation began until it ended plus a settle time (earlier once, after it ended, an interval's
fleet rate is back within ``recover_tol`` of the baseline), every interval adds

    lost   += max(0, baseline - fleet rate) / per-GPU baseline * dt      (lost_gpu_seconds)
    net    +=        baseline - fleet rate  / per-GPU baseline * dt      (net_gpu_seconds)
    per-GPU = sum over GPUs of max(0, own baseline - own rate) / own baseline * dt

``lost_gpu_seconds`` is how far the job's output dipped below what it produced before (the figure
the journal and the generation pane show); ``net_gpu_seconds`` lets GPUs already upgraded pay
back (negative = the job came out ahead); ``gpu_downtime_gpu_seconds`` counts every GPU's own
shortfall, i.e. the restarts themselves, whatever the others did meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import fmean
from typing import Any

from tui.retune.events import GpuFailed, GpuPhase, GpuReady, RetuneEvent
from tui.rollout.sampling import IntervalRates, Sampler

DEFAULT_RECOVER_TOL = 0.03
"""An interval within 3% of the baseline fleet rate counts as recovered."""


@dataclass(frozen=True, slots=True)
class RetuneCost:
    """Throughput an operation cost, against the fleet's rate before it began."""

    lost_gpu_seconds: float | None
    """Integrated fleet shortfall (never negative per interval), in GPU-seconds."""
    net_gpu_seconds: float | None
    """Same, with intervals above the baseline paying back (negative = a net gain)."""
    gpu_downtime_gpu_seconds: float | None
    """Sum of every GPU's own shortfall against its own baseline, in GPU-seconds."""
    baseline_tokens_per_s: float | None
    """Fleet output tokens/s before the operation."""
    per_gpu_baseline_tokens_per_s: float | None
    """One GPU's share of that."""
    gpus: int
    """GPUs in the fleet measured."""
    measured_s: float
    """Seconds integrated."""
    recovered: bool
    """True when the fleet rate came back to the baseline before the settle time ran out."""
    note: str = ""
    """Why nothing could be measured, if so."""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return asdict(self)


def _not_measured(gpus: int, note: str) -> RetuneCost:
    return RetuneCost(None, None, None, None, None, gpus, 0.0, False, note)


def lost_throughput(
    rates: Sequence[IntervalRates],
    gpus: Sequence[int],
    began: float,
    ended: float,
    settle_s: float,
    recover_tol: float = DEFAULT_RECOVER_TOL,
) -> RetuneCost:
    """Integrate the shortfall of an operation from per-interval per-GPU rates.

    Args:
        rates: Per-interval rates (monotonic times), covering before and after the operation.
        gpus: The fleet's GPUs (all of them, not only those restarted).
        began: Monotonic time the operation began (its first stop).
        ended: Monotonic time its last GPU was ready or failed.
        settle_s: Longest time integrated after ``ended``.
        recover_tol: Relative distance to the baseline that counts as recovered.

    Returns:
        The cost; fields None with a note when there was no baseline.
    """
    before = [r for r in rates if r.t1 <= began + 1e-9]
    if not before:
        return _not_measured(len(gpus), "no interval before the operation to compare with")
    base = {g: fmean(r.tokens.get(g, 0.0) for r in before) for g in gpus}
    fleet = sum(base.values())
    if fleet <= 0.0:
        return _not_measured(len(gpus), "the fleet produced nothing before the operation")
    unit = fleet / len(gpus)
    limit = ended + settle_s
    lost = net = down = measured = 0.0
    recovered = False
    for r in rates:
        if r.t1 <= began or r.t0 >= limit:
            continue
        # Only the part of an interval inside [began, limit] counts (rates are flat within it).
        dt = min(r.t1, limit) - max(r.t0, began)
        if dt <= 0:
            continue
        rate = sum(r.tokens.get(g, 0.0) for g in gpus)
        short = (fleet - rate) / unit * dt
        net += short
        lost += max(short, 0.0)
        down += sum(
            max(base[g] - r.tokens.get(g, 0.0), 0.0) / base[g] * dt for g in gpus if base[g] > 0
        )
        measured += dt
        if r.t0 >= ended and rate >= fleet * (1.0 - recover_tol):
            recovered = True
            break
    return RetuneCost(
        round(lost, 3),
        round(net, 3),
        round(down, 3),
        round(fleet, 3),
        round(unit, 3),
        len(gpus),
        round(measured, 3),
        recovered,
    )


class CostMeter:
    """Marks an operation's start and end on a running sampler, then integrates its cost.

    Args:
        sampler: A started sampler reading every GPU of the fleet.
        settle_s: Longest time measured after the operation ended.
        recover_tol: See ``lost_throughput``.
    """

    def __init__(
        self, sampler: Sampler, settle_s: float, recover_tol: float = DEFAULT_RECOVER_TOL
    ) -> None:
        self.sampler = sampler
        self.settle_s = settle_s
        self.recover_tol = recover_tol
        self.began: float | None = None
        self.ended: float | None = None

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def begin(self) -> None:
        """The operation starts now (first call wins)."""
        if self.began is None:
            self.began = self._now()

    def end(self) -> None:
        """The operation's last GPU settled now (last call wins)."""
        self.ended = self._now()

    def current(self) -> RetuneCost:
        """The cost from the readings so far (the operation must have begun and ended)."""
        if self.began is None or self.ended is None:
            return _not_measured(len(self.sampler.gpus), "the operation did not begin and end")
        return lost_throughput(
            self.sampler.rates(),
            self.sampler.gpus,
            self.began,
            self.ended,
            self.settle_s,
            self.recover_tol,
        )

    async def finish(self) -> RetuneCost:
        """Keep sampling until the fleet recovered or the settle time passed; return the cost."""
        if self.ended is None:
            self.end()
        assert self.ended is not None
        while True:
            cost = self.current()
            if cost.recovered or cost.lost_gpu_seconds is None:
                return cost
            if self._now() >= self.ended + self.settle_s + self.sampler.interval_s:
                return cost
            await self.sampler.next_reading()


class ApplyCostWatch:
    """Turns an apply's events into the cost meter's begin and end marks.

    Args:
        sampler: A started sampler over every GPU of the fleet.
        gpus: GPUs the apply restarts (the end is when all of them settled).
        settle_s: Longest time measured after the end.
    """

    def __init__(self, sampler: Sampler, gpus: Sequence[int], settle_s: float) -> None:
        self.meter = CostMeter(sampler, settle_s)
        self._pending = set(gpus)

    def on_event(self, event: RetuneEvent) -> None:
        """Engine listener."""
        if isinstance(event, GpuPhase):
            self.meter.begin()
        elif isinstance(event, GpuReady | GpuFailed):
            self._pending.discard(event.gpu)
            if not self._pending:
                self.meter.end()

    def cost(self) -> RetuneCost:
        """The cost from the readings so far."""
        return self.meter.current()
