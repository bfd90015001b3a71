"""The first retune of an adopted fleet: one GPU at a time, like a rollout.

Servers gpufleet adopted (``gpufleet adopt``) feed a job gpufleet may know nothing of: the
operator's own generation script, sending straight to every port. An apply that stopped them
all together would take the whole fleet down at once (the issue's operator did exactly that,
by hand). So an apply whose GPUs run adopted servers walks them: each GPU is drained, relaunched
and verified before the next one stops, and the walk stops at the first GPU that does not come
up (the others keep what they run). Once relaunched, the servers are gpufleet's own and later
applies change them together as usual.

The walk is one apply to whoever watches it: one ``ApplyResult`` at the end, whose reports
are the GPUs walked (a GPU it never reached has none), its throughput not measured (no window
spans a walk).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

from tui.ops.events import EventSink, OpEvent
from tui.profiles import Profile
from tui.retune.events import ApplyFinished, ApplyResult, ThroughputComparison
from tui.state.fleet_state import FleetState

WALK_NOTE = (
    "walked one GPU at a time: the GPUs ran adopted servers, whose job keeps running on the "
    "others; no before/after window"
)
"""What the walk's throughput says instead of a verdict."""

RunOne = Callable[[int, EventSink], Awaitable[ApplyResult]]
"""Runs the engine on one GPU (its events to the sink) and returns its result."""


def adopted_gpus(state: FleetState, gpus: Sequence[int]) -> tuple[int, ...]:
    """The GPUs of ``gpus`` whose recorded server gpufleet adopted (never launched)."""
    records = {g: state[g].server for g in gpus if g in state}
    return tuple(g for g, record in records.items() if record is not None and record.adopted)


async def walk(
    profile: Profile, gpus: Sequence[int], run_one: RunOne, sink: EventSink | None
) -> ApplyResult:
    """Apply ``profile`` to ``gpus`` one at a time, stopping at the first that fails.

    Args:
        profile: The (fitted) profile.
        gpus: The GPUs, in order.
        run_one: One GPU's engine run.
        sink: Receives every run's events but their ``ApplyFinished`` (the walk ends once).

    Returns:
        One result: every GPU walked has its report; a refused first run is returned as is.
    """
    started = time.time()

    def forward(event: OpEvent) -> None:
        if sink is not None and not isinstance(event, ApplyFinished):
            sink(event)

    results: list[ApplyResult] = []
    for gpu in gpus:
        result = await run_one(gpu, forward)
        results.append(result)
        if result.refused or not result.ok:
            break
    first, last = results[0], results[-1]
    if first.refused:
        merged = first  # refused before anything stopped: said as such
    else:
        note = WALK_NOTE
        if last.refused:  # a later GPU's port was taken meanwhile: the walk stopped there
            note += f"; stopped before GPU {last.gpus[0]}: " + "; ".join(last.refused)
        previous = {g: p for r in results for g, p in r.previous_profiles.items()}
        merged = ApplyResult(
            profile.name,
            previous,
            tuple(gpus),
            tuple(report for r in results for report in r.reports),
            ThroughputComparison((), (), "not measured", note=note),
            started,
            time.time(),
            diff=first.diff,
        )
    if sink is not None:
        sink(ApplyFinished(merged))
    return merged
