"""Better, worse or no measurable difference: Welch's t interval on the throughput ratio.

Samples are per-interval output tokens/s. The relative change is mean(after)/mean(before) - 1.
Its interval is taken on the log of the ratio and turned back (``ratio_interval``): a ratio is
positive, so the interval of the change stays inside (-100%, +inf) whatever the spread (an
interval on the change itself, symmetric around it, reached -108% when the job ended during a
window: an impossible throughput). The log ratio's standard error comes from the delta method
(``var(log m) = var(m) / m**2``), its degrees of freedom from Welch-Satterthwaite. No scipy:
the Student t distribution is computed from the regularized incomplete beta function.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import fmean, variance

from tui.retune.events import ThroughputComparison, Verdict

MIN_SAMPLES = 3
"""Fewer per-interval samples than this on either side gives 'not measured'."""
MIN_LOADED_SHARE = 0.5
"""A side whose intervals produced tokens less than this share of the time had no load: the
job had ended (or not begun), and comparing its tail with nothing measures the job, not the
profile (a 0 tok/s window after one straggler gave a 95% CI of -297% .. +297%)."""


def effect_words(
    relative: float, low: float | None, high: float | None, level: float | None = None
) -> str:
    """An estimate with its interval: ``+27.5% (95% CI -30.1% .. +85.1%)``.

    An estimate alone reads as a finding; next to 'no measurable difference' it read as a
    contradiction (``+27.5%: no measurable difference``) until the interval said why.

    Args:
        relative: The estimated relative change.
        low: The interval's low end (None: no interval).
        high: Its high end.
        level: Its confidence level, when known.

    Returns:
        The words.
    """
    if low is None or high is None:
        return f"{relative:+.1%}"
    # 95%, 99.5%, 99.38%: a per-look level rounded to whole percent read as '100% CI'.
    ci = f"{level * 100:.4g}% CI" if level is not None else "CI"
    return f"{relative:+.1%} ({ci} {low:+.1%} .. {high:+.1%})"


def verdict_words(
    verdict: str,
    relative: float | None = None,
    low: float | None = None,
    high: float | None = None,
    level: float | None = None,
) -> str:
    """A verdict and what it rests on, one wording wherever a verdict is shown:
    ``no measurable difference: +27.5% (95% CI -30.1% .. +85.1%)``; the verdict alone when
    nothing was estimated.

    Args:
        verdict: better / worse / no measurable difference / not measured.
        relative: The estimated relative change (None: none).
        low: The interval's low end.
        high: Its high end.
        level: Its confidence level, when known.

    Returns:
        The words.
    """
    if relative is None:
        return verdict
    return f"{verdict}: {effect_words(relative, low, high, level)}"


def _loaded(samples: Sequence[float]) -> bool:
    """At least MIN_SAMPLES intervals, and MIN_LOADED_SHARE of them, produced tokens."""
    busy = sum(1 for s in samples if s > 0.0)
    return busy >= MIN_SAMPLES and busy >= MIN_LOADED_SHARE * len(samples)


def no_load_note(before: Sequence[float], after: Sequence[float]) -> str | None:
    """'no load before', 'no load after', 'no load before or after', or None when both had it.

    Args:
        before: Output tokens/s per interval before the change.
        after: Output tokens/s per interval after it.

    Returns:
        The note of a comparison that must not be made, or None.
    """
    idle = [side for side, s in (("before", before), ("after", after)) if not _loaded(s)]
    return f"no load {' or '.join(idle)}" if idle else None


def _betacf(a: float, b: float, x: float) -> float:
    # Continued fraction of the incomplete beta (Numerical Recipes, modified Lentz).
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-12:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(ln_front + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """Two-sided p-value of Student's t statistic ``t`` with ``df`` degrees of freedom."""
    return _betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(level: float, df: float) -> float:
    """The t whose two-sided interval has coverage ``level`` (0.95 -> ~1.96 at large df)."""
    lo, hi = 0.0, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_two_sided_p(mid, df) > 1.0 - level:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def ratio_interval(ratio: float, se_log: float, t: float) -> tuple[float, float]:
    """The interval of ``ratio - 1`` from a t interval on ``log(ratio)``, turned back.

    Args:
        ratio: The estimated ratio (> 0).
        se_log: The standard error of ``log(ratio)``.
        t: The t quantile of the interval's level.

    Returns:
        (low, high) of the relative change: both in (-1, +inf), ``low <= ratio - 1 <= high``.
    """
    half = t * se_log
    # exp() of a huge half-width overflows; past ~700 the high end is simply unbounded.
    return ratio * math.exp(-min(half, 700.0)) - 1.0, ratio * math.exp(min(half, 700.0)) - 1.0


def compare(
    before: Sequence[float], after: Sequence[float], level: float = 0.95
) -> ThroughputComparison:
    """Compare two sets of per-interval throughput samples.

    Args:
        before: Output tokens/s per interval before the change.
        after: Output tokens/s per interval after the change (warm-up already excluded).
        level: Two-sided confidence level of the interval, in (0, 1).

    Returns:
        'better' when the whole interval on the relative change is above 0, 'worse' when below,
        otherwise 'no measurable difference'; 'not measured' with a note when data are too thin
        or a side had no load (``no_load_note``): never a verdict from an idle window.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level!r}")
    b_s, a_s = tuple(before), tuple(after)
    if len(b_s) < MIN_SAMPLES or len(a_s) < MIN_SAMPLES:
        note = (
            f"need at least {MIN_SAMPLES} samples each side, "
            f"got {len(b_s)} before, {len(a_s)} after"
        )
        return ThroughputComparison(b_s, a_s, "not measured", confidence_level=level, note=note)
    idle = no_load_note(b_s, a_s)
    if idle is not None:
        return ThroughputComparison(b_s, a_s, "not measured", confidence_level=level, note=idle)
    mb, ma = fmean(b_s), fmean(a_s)
    vb, va = variance(b_s) / len(b_s), variance(a_s) / len(a_s)
    rel = ma / mb - 1.0
    # Delta method on the log of each mean: var(log m) = var(m) / m**2 (both means > 0: each
    # side had load).
    lb, la = vb / mb**2, va / ma**2
    se = math.sqrt(lb + la)
    if se == 0.0:
        verdict: Verdict = (
            "no measurable difference" if rel == 0.0 else ("better" if rel > 0 else "worse")
        )
        return ThroughputComparison(
            b_s, a_s, verdict, rel, rel, rel, level, 0.0 if rel == 0.0 else 1.0
        )
    num = (la + lb) ** 2
    den = (la**2 / (len(a_s) - 1) if la else 0.0) + (lb**2 / (len(b_s) - 1) if lb else 0.0)
    df = num / den if den > 0 else float(len(a_s) + len(b_s) - 2)
    log_ratio = math.log(ma / mb)
    low, high = ratio_interval(ma / mb, se, t_quantile(level, df))
    sureness = 1.0 - t_two_sided_p(log_ratio / se, df)
    outcome: Verdict
    if low > 0.0:
        outcome = "better"
    elif high < 0.0:
        outcome = "worse"
    else:
        outcome = "no measurable difference"
    return ThroughputComparison(b_s, a_s, outcome, rel, low, high, level, sureness)
