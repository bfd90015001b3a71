"""The first retune of an adopted fleet, and any retune of GPUs sharing a card: one GPU at a
time, like a rollout.

Servers gpufleet adopted (``gpufleet adopt``) feed a job gpufleet may know nothing of: the
operator's own generation script, sending straight to every port. An apply that stopped them
all together would take the whole fleet down at once (the issue's operator did exactly that,
by hand). So an apply whose GPUs run adopted servers walks them: each GPU is drained, relaunched
and verified before the next one stops, and the walk stops at the first GPU that does not come
up (the others keep what they run). Once relaunched, the servers are gpufleet's own and later
applies change them together as usual.

Slots that share one card (``[gpu.N] device``) are walked too: SGLang sizes a server's pools
from the free memory it finds at start, so each relaunch must find its neighbour serving (its
memory planned for: ``tui.retune.sharing``), never starting beside it at the same moment; and a
retune that would not fit beside the neighbour is refused before that GPU stops.

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
SHARED_NOTE = (
    "walked one GPU at a time: {gpus} share a card, and each relaunch is sized beside the "
    "others' servers; no before/after window"
)
"""The same, for GPUs sharing a card."""

RunOne = Callable[[int, EventSink], Awaitable[ApplyResult]]
"""Runs the engine on one GPU (its events to the sink) and returns its result."""


def shared_gpus(profile: Profile, gpus: Sequence[int]) -> tuple[int, ...]:
    """The GPUs of ``gpus`` whose card another of ``gpus`` runs on too."""
    known = [g for g in gpus if g in profile.gpus]
    return tuple(g for g in known if set(profile.neighbours_of(g)) & set(known))


def one_per_card(profile: Profile, gpus: Sequence[int]) -> list[list[int]]:
    """``gpus`` in waves that relaunch at most one GPU of each card: a relaunch that runs GPUs
    of one card together would start servers beside each other at the same moment, each
    measuring the card as free."""

    def card(gpu: int) -> int:
        return profile.device_for(gpu) if gpu in profile.gpus else gpu

    waves: list[list[int]] = []
    for gpu in sorted(gpus):
        free = [w for w in waves if card(gpu) not in {card(g) for g in w}]
        if free:
            free[0].append(gpu)
        else:
            waves.append([gpu])
    return waves


def adopted_gpus(state: FleetState, gpus: Sequence[int]) -> tuple[int, ...]:
    """The GPUs of ``gpus`` whose recorded server gpufleet adopted (never launched)."""
    records = {g: state[g].server for g in gpus if g in state}
    return tuple(g for g, record in records.items() if record is not None and record.adopted)


async def walk(
    profile: Profile,
    gpus: Sequence[int],
    run_one: RunOne,
    sink: EventSink | None,
    note: str = WALK_NOTE,
) -> ApplyResult:
    """Apply ``profile`` to ``gpus`` one at a time, stopping at the first that fails.

    Args:
        profile: The (fitted) profile.
        gpus: The GPUs, in order.
        run_one: One GPU's engine run.
        sink: Receives every run's events but their ``ApplyFinished`` (the walk ends once).
        note: Why it walked, for its throughput line.

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
