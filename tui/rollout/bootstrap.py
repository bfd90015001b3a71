"""A percentile bootstrap over a window's intervals: the interval of a ratio of two sides'
figures that are not means (a p90 of summed histograms, tokens over joules), where the
throughput's t interval does not apply (``tui.rollout.beside`` says why).

Whole intervals are resampled (what happened within one stays together); paired sides (a canary
and its controls over the same seconds) are resampled by the same draws, so what moved both
cancels, as in the throughput's pairs; unpaired sides (a rollout's before and after) each on
its own. Seeded: one window gives one interval however often it is described.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

MIN_INTERVALS = 6
"""Intervals the bootstrap needs for an interval (with 3 it has 10 distinct resamples)."""
DRAWS = 1000
"""Resamples (the ends of a 95 % interval rest on 25 each)."""
SEED = 38
"""The resampling's seed."""


def bootstrap(
    m_steps: Sequence[T],
    r_steps: Sequence[T],
    stat: Callable[[Sequence[T], Sequence[T]], float | None],
    level: float,
    paired: bool,
) -> tuple[float | None, float | None]:
    """The percentile interval of ``stat`` (a ratio) over resampled intervals.

    Args:
        m_steps: The measured side's intervals.
        r_steps: The reference side's (the same seconds as ``m_steps`` when ``paired``).
        stat: The ratio of the two sides' figures over some intervals (None: none there).
        level: Two-sided confidence level.
        paired: Resample both sides by the same draws.

    Returns:
        (low, high) of the ratio; (None, None) with fewer than ``MIN_INTERVALS`` intervals, or
        when a tenth of the resamples have no value (a side empty in most of them).
    """
    n_m, n_r = len(m_steps), len(r_steps)
    if min(n_m, n_r) < MIN_INTERVALS:
        return None, None
    rng = random.Random(SEED)
    values = []
    for _ in range(DRAWS):
        if paired:
            picks = rng.choices(range(min(n_m, n_r)), k=min(n_m, n_r))
            ms, rs = [m_steps[i] for i in picks], [r_steps[i] for i in picks]
        else:
            ms = rng.choices(m_steps, k=n_m)
            rs = rng.choices(r_steps, k=n_r)
        value = stat(ms, rs)
        if value is not None:
            values.append(value)
    if len(values) < 0.9 * DRAWS:
        return None, None
    values.sort()
    tail = (1.0 - level) / 2.0
    return percentile(values, tail), percentile(values, 1.0 - tail)


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values, linear between the two nearest."""
    at = q * (len(ordered) - 1)
    i = int(at)
    j = min(i + 1, len(ordered) - 1)
    return ordered[i] + (ordered[j] - ordered[i]) * (at - i)
