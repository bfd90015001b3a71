"""The cost of a full-fleet apply: a sampler over the fleet, marked by the retune engine's events.

The operation begins at the first GPU's first step and ends when the last GPU is ready or failed;
``tui.rollout.cost`` integrates the shortfall from there. ``gpufleet apply`` uses ``ApplyCostWatch``
(its own 'before' window is the baseline); ``measured_apply`` runs a whole apply with a baseline
window of its own (the benchmark).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from tui.profiles import Profile
from tui.retune.engine import RetuneEngine
from tui.retune.events import ApplyResult, GpuFailed, GpuPhase, GpuReady, RetuneEvent
from tui.retune.options import ApplyOptions
from tui.rollout.cost import CostMeter, RetuneCost
from tui.rollout.sampling import Sampler
from tui.state.fleet_state import record_outcome


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


async def measured_apply(
    profile: Profile,
    gpus: Sequence[int],
    fleet_gpus: Sequence[int],
    options: ApplyOptions,
    *,
    interval_s: float = 1.0,
    baseline_s: float = 5.0,
    settle_s: float = 30.0,
    on_event: Callable[[RetuneEvent], None] | None = None,
) -> tuple[ApplyResult, RetuneCost]:
    """Apply ``profile`` to ``gpus`` at once (the retune engine) and measure what it cost.

    Args:
        profile: The profile.
        gpus: GPUs restarted together.
        fleet_gpus: Every GPU of the fleet (the cost's baseline and shortfall are the fleet's).
        options: The engine's options (its own throughput measurement is best left off).
        interval_s: Sampling interval.
        baseline_s: Seconds sampled before the apply.
        settle_s: Longest time measured after the last GPU settled.
        on_event: Also called with every engine event.

    Returns:
        The apply's result and its cost.
    """
    from tui.retune.wiring import open_target  # real processes only when really applying
    from tui.rollout.fleet_io import fleet_sampler

    target, _ = open_target(profile, gpus, options.release_timeout_s)
    sampler = fleet_sampler(profile, fleet_gpus, interval_s, target.client)
    sampler.start()
    try:
        await asyncio.sleep(baseline_s)  # the baseline window
        watch = ApplyCostWatch(sampler, gpus, settle_s)
        engine = RetuneEngine(target, gpus, options)
        engine.subscribe(watch.on_event)
        if on_event is not None:
            engine.subscribe(on_event)
        result = await engine.run()
        if not result.refused:
            record_outcome(
                profile,
                [r.gpu for r in result.reports if r.ok],
                [r.gpu for r in result.reports if not r.ok],
            )
        cost = await watch.meter.finish()
    finally:
        await sampler.stop()
        await target.aclose()
    return result, cost
