"""Why a plan does not fit, in gpufleet's words first where SGLang's point at the wrong knob.

SGLang's "Loaded weights leave no GPU memory for the KV cache ... Raise --mem-fraction-static
above 0.318" is computed from the weights alone; when the Mamba pool, carved first, took what the
weights left, the fraction it names may be below the one already set (0.318 at 0.88 with 900
slots of the seed's model on a B200). ``why_unfit`` then says what happened and which values of
the flags fit (each found by planning again), before SGLang's own line. The tuning form's
preflight and ``gpufleet plan`` both say it (``tui.retune.preflight``, ``tui.retune.plan_cli``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tui.sglang.models import GIB
from tui.sglang.plan_types import MemoryPlan

PlanFor = Callable[..., MemoryPlan]
"""The same plan made again with other flags (``max_mamba_cache_size=``,
``mem_fraction_static=``): ``functools.partial(plan_memory, model, total, ...)``."""


def why_unfit(plan: MemoryPlan, plan_for: PlanFor, *, explicit: bool) -> str:
    """Why ``plan`` fails: gpufleet's diagnosis, then SGLang's own line, when SGLang's text
    points at the wrong knob; else SGLang's line alone.

    Args:
        plan: a plan that fails (``plan.failure`` set).
        plan_for: the same plan with other flags (see ``PlanFor``).
        explicit: the slots were given (``--max-mamba-cache-size``): then
            ``--mamba-full-memory-ratio`` sizes nothing.

    Returns:
        One line.
    """
    assert plan.failure is not None
    ours = _mamba_took_the_rest(plan, plan_for, explicit)
    if not ours:
        return plan.failure.line
    return (
        f"{ours}. SGLang's own message, misleading here (the fraction is already "
        f"{plan.mem_fraction_static:g}): {plan.failure.line}"
    )


MAX_FRACTION_STEPS = 99
"""--mem-fraction-static must be in (0, 1) (``tui.sglang.knobs``): the advice tries 0.01 ..
0.99, the two-decimal values a profile can ask for."""


def _mamba_took_the_rest(plan: MemoryPlan, plan_for: PlanFor, explicit: bool) -> str:
    """What SGLang's "Loaded weights leave no GPU memory" does not say when the weights did
    leave some: the Mamba pool, carved first, took it all, so raising --mem-fraction-static just
    above the value it names is not enough (seen in the demo: "above 0.318" at 0.85). With the
    most slots that would fit (``plan_for`` plans again with another --max-mamba-cache-size),
    and the fraction that would fit them when one below 1 does (315 GB of Mamba pool against a
    95.5 GB budget at 0.88 on a 170 GB card: 'raise it further' sent the operator to a value
    that cannot exist); ``explicit``: the profile sets the slots (then
    --mamba-full-memory-ratio sizes nothing). Empty when that is not what happened."""
    failure = plan.failure
    if failure is None or failure.kind != "weights_leave_no_memory" or plan.rest_bytes <= 0:
        return ""
    slots = plan.max_mamba_cache_size
    if not slots or not plan.mamba_reserve_bytes:
        return ""
    budget, pool = plan.rest_bytes / GIB, plan.mamba_reserve_bytes / GIB
    most = _most_slots_that_fit(slots - 1, plan_for)
    advice = [
        f"--max-mamba-cache-size {most} or fewer fits" if most else "no --max-mamba-cache-size fits"
    ]
    if not explicit:
        advice.append("lower --mamba-full-memory-ratio")
    fractions = _fractions_that_fit(plan.mem_fraction_static, slots if explicit else None, plan_for)
    if fractions is not None:
        low, high = fractions
        upto = "or more" if high * 100 >= MAX_FRACTION_STEPS else f"to {high:.2f}"
        advice.append(f"--mem-fraction-static {low:.2f} {upto} fits")
    # Speculative decoding's intermediate caches are charged with the slots; without it there
    # are none to name.
    caches = " and their intermediate caches" if plan.intermediate_reserve_bytes else ""
    return (
        # GB as SGLang's log lines and the preflight table write it (2**30 bytes).
        f"the Mamba pool's {slots} slots{caches} take {pool:.1f} GB of "
        f"the {budget:.1f} GB static budget left after the weights: {'; or '.join(advice)}"
    )


def _fractions_that_fit(
    now: float, slots: int | None, plan_for: PlanFor
) -> tuple[float, float] | None:
    """The first run of two-decimal --mem-fraction-static values above ``now`` that fit
    ``slots`` (None: sized by the ratio, as the profile asks), as (lowest, highest); None when
    no allowed one does. Scanned up, not bisected: the top of the range fails again for want of
    room for the CUDA graphs (0.97 and up on a B200 with the demo's model); at most ~100 plans
    of arithmetic, only for a plan that does not fit."""
    run: list[float] = []
    for step in range(math.floor(now * 100) + 1, MAX_FRACTION_STEPS + 1):
        fraction = step / 100
        if plan_for(max_mamba_cache_size=slots, mem_fraction_static=fraction).ok:
            run.append(fraction)
        elif run:
            break
    return (run[0], run[-1]) if run else None


def _most_slots_that_fit(below: int, plan_for: PlanFor) -> int:
    """The largest --max-mamba-cache-size in 1..``below`` whose plan fits (0: none); fewer
    slots never need more memory, so a bisection (a plan is microseconds of arithmetic)."""
    low, high = 0, below
    while low < high:
        middle = (low + high + 1) // 2
        if plan_for(max_mamba_cache_size=middle).ok:
            low = middle
        else:
            high = middle - 1
    return low
