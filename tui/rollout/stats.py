"""Paired per-interval statistics of a canary: canary GPU vs the mean of the control GPUs.

Each interval gives one pair (canary rate, mean control rate) measured over the same seconds, so
workload drift that moves every GPU alike cancels in the pair. The relative effect is the ratio
estimator R - 1, R = mean(canary) / mean(control), with the ratio's paired standard error
se(R) = sd(canary_i - R * control_i) / (sqrt(n) * mean(control)), on n - 1 degrees of freedom.
The interval is taken on log R (se(log R) = se(R) / R, the delta method) and turned back
(``tui.retune.verdict.ratio_interval``): a throughput ratio is positive, so the interval of
the change stays in (-100%, +inf) (one symmetric around R - 1 read -108% .. -0.6% when the job
ended during a window). The absolute effect is the control mean times the relative one, its
interval likewise (never below the control's whole rate lost).

Repeated looks: the canary checks after every interval. To keep the family-wise error at most
``1 - level`` over all looks it may take, each look uses the Bonferroni level
``1 - (1 - level) / looks`` (conservative, simple, and valid whatever the correlation between
looks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, stdev

from tui.retune.events import Verdict
from tui.retune.verdict import ratio_interval, t_quantile, t_two_sided_p


@dataclass(frozen=True, slots=True)
class PairedEstimate:
    """Canary vs control over the same intervals, with intervals at one confidence level."""

    n: int
    """Number of paired intervals."""
    canary_mean: float
    """Mean canary rate (per GPU)."""
    control_mean: float
    """Mean of the control GPUs' mean rate (per GPU)."""
    abs_diff: float
    """canary_mean - control_mean (per GPU, in the rate's unit)."""
    abs_low: float
    """Lower bound of the absolute difference."""
    abs_high: float
    """Upper bound of the absolute difference."""
    relative: float
    """canary_mean / control_mean - 1."""
    rel_low: float
    """Lower bound of the relative difference."""
    rel_high: float
    """Upper bound of the relative difference."""
    level: float
    """Two-sided confidence level of both intervals."""
    se_rel: float
    """Standard error of the relative difference (of the ratio)."""
    df: int
    """Degrees of freedom (n - 1)."""
    sureness: float
    """1 - p of the paired t test of 'no difference' (on the log ratio)."""

    @property
    def se_log(self) -> float:
        """Standard error of log(ratio) (the scale the interval is taken on)."""
        return self.se_rel / (self.relative + 1.0)

    @property
    def log_ratio(self) -> float:
        """log(canary_mean / control_mean)."""
        return math.log(self.relative + 1.0)


def paired(
    canary: Sequence[float], control: Sequence[float], level: float = 0.95
) -> PairedEstimate | None:
    """Estimate the canary's effect from paired per-interval rates.

    Args:
        canary: The canary GPU's rate in each interval.
        control: The mean rate of the control GPUs in the same intervals.
        level: Two-sided confidence level, in (0, 1).

    Returns:
        The estimate, or None with fewer than 3 pairs, no control throughput or no canary
        throughput (a ratio of 0 has no interval on its log: the caller says why).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level!r}: must be in (0, 1)")
    if len(canary) != len(control):
        raise ValueError(f"canary has {len(canary)} samples, control {len(control)}: must match")
    n = len(canary)
    if n < 3:
        return None
    mc, mk = fmean(canary), fmean(control)
    if mk <= 0.0 or mc <= 0.0:
        return None
    ratio = mc / mk
    residuals = [c - ratio * k for c, k in zip(canary, control, strict=True)]
    sd_e = stdev(residuals)
    df = n - 1
    t = t_quantile(level, df)
    se_rel = sd_e / (math.sqrt(n) * mk)
    se_log = se_rel / ratio
    rel = ratio - 1.0
    low, high = ratio_interval(ratio, se_log, t)
    no_spread = 0.0 if rel == 0.0 else 1.0
    sure = 1.0 - t_two_sided_p(math.log(ratio) / se_log, df) if se_log > 0.0 else no_spread
    return PairedEstimate(
        n,
        mc,
        mk,
        mc - mk,
        low * mk,
        high * mk,
        rel,
        low,
        high,
        level,
        se_rel,
        df,
        sure,
    )


def look_level(level: float, looks: int) -> float:
    """The per-look level that keeps the family-wise level over ``looks`` looks (Bonferroni)."""
    if looks < 1:
        raise ValueError(f"looks={looks}: must be >= 1")
    return 1.0 - (1.0 - level) / looks


def intervals_needed(est: PairedEstimate, target: float) -> int | None:
    """Pairs needed for the interval's half-width on the log ratio to shrink below ``target``.

    Assumes the per-interval spread stays as observed: half-width = t * s / sqrt(n).

    Args:
        est: The current estimate.
        target: Wanted half-width on the log-ratio scale (> 0; ``log1p(0.03)`` is about 3%).

    Returns:
        The total number of pairs needed (>= est.n), or None when ``target`` <= 0.
    """
    if target <= 0.0:
        return None
    spread = est.se_log * math.sqrt(est.n)
    t = t_quantile(est.level, max(est.df, 1))
    return max(est.n, math.ceil((t * spread / target) ** 2))


@dataclass(frozen=True, slots=True)
class Decision:
    """What one look concludes."""

    verdict: Verdict
    """better / worse / no measurable difference / not measured."""
    final: bool
    """True when the answer is clear (stop measuring)."""
    reason: str
    """Why, in words."""
    more_intervals_to_exclude_zero: int | None
    """Further pairs for the interval to exclude 0 at the observed effect (None if no effect)."""
    more_intervals_to_bound: int | None
    """Further pairs for the interval to fit within +/- margin (None if |effect| >= margin)."""
    estimate: PairedEstimate | None = None
    """The estimate and interval this look decided on (None: too few pairs)."""


def decide(est: PairedEstimate | None, margin: float) -> Decision:
    """The verdict of one look (the caller picks the look's level and when to give up).

    Args:
        est: The estimate at the look's level (None: too few pairs).
        margin: Relative half-width within which 'no difference' counts as shown (e.g. 0.03).

    Returns:
        better/worse when the interval excludes 0; 'no measurable difference' (final) when it
        lies within +/- margin; otherwise 'no measurable difference', not final.
    """
    if est is None:
        return Decision("not measured", False, "too few intervals", None, None)
    log_r = est.log_ratio
    to_zero = intervals_needed(est, abs(log_r)) if log_r != 0.0 else None
    # Within +/- margin on the ratio: log(1 - margin) < log R - h and log R + h < log(1 + margin).
    to_bound = intervals_needed(est, min(math.log1p(margin) - log_r, log_r - math.log1p(-margin)))
    more_zero = None if to_zero is None else to_zero - est.n
    more_bound = None if to_bound is None else to_bound - est.n
    if est.rel_low > 0.0:
        return Decision("better", True, "interval above 0", 0, more_bound, est)
    if est.rel_high < 0.0:
        return Decision("worse", True, "interval below 0", 0, more_bound, est)
    if -margin < est.rel_low and est.rel_high < margin:
        return Decision(
            "no measurable difference", True, f"interval within +/-{margin:.1%}", more_zero, 0, est
        )
    return Decision(
        "no measurable difference", False, "interval spans 0", more_zero, more_bound, est
    )
