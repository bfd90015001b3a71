"""Whole moves: the knobs an expert turns together to raise the running batch, in one step.

The seed's operator did not turn one knob: to run more requests at once they raised
``--max-running-requests`` (16 -> 64), the Mamba pool that caps it (80 -> 200 slots), the
ratio and the static fraction that make room for both (0.4 -> 0.6, 0.88 -> 0.93), in one
relaunch, and measured +63% on the demo fleet. A climb of single-knob steps cannot make that
move: SGLang caps the running requests at ``Mamba slots // slots per request``
(``tui.sglang.caps``), so more running requests alone are capped back (the demo's search
skipped 14 such moves as 'predicted to run exactly as the incumbent'), more slots alone only
take KV memory, and each small step is a few percent that a noisy canary calls 'no measurable
difference' (+12.7%, 99.84% CI -32.3% .. +57.6%, in the demo).

So for each running batch ``R`` of the space above the one the incumbent runs, one move sets
everything ``R`` needs, and the preflight judges the whole move:

- ``max_running_requests`` = ``R``;
- the **pool** that does not cap it: the smallest ``max_mamba_cache_size`` of the space with
  ``R * slots per request`` slots (the incumbent's plan says how many a request takes); with
  the pool on SGLang's automatic size, the smallest ``mamba_full_memory_ratio`` of the space
  (at or above the incumbent's) whose pool runs ``R`` instead;
- the **fraction** that holds the batch: the smallest ``mem_fraction_static`` of the space, at
  or above the incumbent's, whose KV pool holds ``R`` running requests
  (``strategy.held_batch``); none does: the one that holds the most.

Each is a candidate like any other (predicted, skipped or rejected by the same rules, ranked by
the batch it holds), so the first canaries of a search are the predicted-best whole moves, and
the climb continues around the best of them with single-knob steps.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tui.autotune.space import Candidate, KnobValue, SearchSpace
from tui.autotune.strategy import ROOM_KNOB, Assignment, held_batch
from tui.retune.preflight import Preflight

RUNNING = "max_running_requests"
POOL = "max_mamba_cache_size"
RATIO = "mamba_full_memory_ratio"

Predict = Callable[[Candidate], Awaitable[Preflight | None]]
"""The preflight of a candidate on the canary GPU (None: its profile does not validate)."""


def _at_or_above(values: tuple[KnobValue, ...], start: KnobValue | None) -> list[KnobValue]:
    return sorted(v for v in values if start is None or v >= start)


async def _pool_for(
    space: SearchSpace, knobs: Assignment, current: Preflight, target: int, predict: Predict
) -> dict[str, KnobValue] | None:
    """The pool setting that runs ``target`` requests ({} when the pool does not cap them, None
    when no value of the space does)."""
    per_request = current.plan.mamba_slots_per_request
    if per_request <= 0:
        return {}  # not a hybrid Mamba model: nothing caps the batch but the KV pool
    names = space.knobs()
    if knobs.get(POOL) is not None:
        if POOL not in names:
            return None
        fits = [v for v in sorted(space.values_of(POOL)) if v >= target * per_request]
        if not fits:
            return None
        return {} if fits[0] == knobs.get(POOL) else {POOL: fits[0]}
    if RATIO not in names:
        return None
    for ratio in _at_or_above(space.values_of(RATIO), knobs.get(RATIO)):
        move = Candidate.of({RUNNING: target, RATIO: ratio})
        prediction = await predict(move)
        if prediction is not None and prediction.max_running_effective >= target:
            return {} if ratio == knobs.get(RATIO) else {RATIO: ratio}
    return None


async def whole_moves(
    space: SearchSpace,
    knobs: Assignment,
    current: Preflight,
    predict: Predict,
    mean_output_tokens: int,
) -> list[Candidate]:
    """One whole move for each running batch of the space above the incumbent's.

    Args:
        space: The knobs and their values (without ``max_running_requests``: no moves).
        knobs: The incumbent's value of every knob of the space.
        current: The incumbent's preflight on the canary GPU.
        predict: The preflight of a candidate.
        mean_output_tokens: The job's mean output length (the KV pool must hold the batch).

    Returns:
        The moves, smallest batch first (the ranking orders them); a batch no setting of the
        space can run (the pool or its memory cannot), or hold beyond the incumbent's batch
        (its KV pool), has none.
    """
    if RUNNING not in space.knobs():
        return []
    out: list[Candidate] = []
    for target in sorted(int(v) for v in space.values_of(RUNNING)):
        if target <= current.max_running_effective:
            continue
        pool = await _pool_for(space, knobs, current, target, predict)
        if pool is None:
            continue
        fractions: list[KnobValue | None] = [knobs.get(ROOM_KNOB)]
        if ROOM_KNOB in space.knobs() and knobs.get(ROOM_KNOB) is not None:
            fractions = list(_at_or_above(space.values_of(ROOM_KNOB), knobs.get(ROOM_KNOB)))
        best: tuple[float, Candidate] | None = None
        for fraction in fractions:
            room = (
                {}
                if fraction == knobs.get(ROOM_KNOB) or fraction is None
                else {ROOM_KNOB: fraction}
            )
            move = Candidate.of({**pool, **room, RUNNING: target})
            prediction = await predict(move)
            if prediction is None or not prediction.fits:
                continue
            held = held_batch(prediction, mean_output_tokens)
            if best is None or held > best[0]:
                best = (held, move)
            if held >= prediction.max_running_effective:
                break  # the smallest fraction that holds the whole batch: the rest stays KV
        # A batch no fraction holds beyond what the incumbent holds is not proposed: its KV
        # pool would retract what its pools let run (skipped as such if it were).
        if best is not None and best[0] > held_batch(current, mean_output_tokens):
            out.append(best[1])
    return out
