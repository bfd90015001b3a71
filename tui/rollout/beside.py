"""What a verdict reports beside throughput: TTFT p90, ITL p90 and output tokens per joule,
one side against the other (a canary against its controls over the same seconds; a rollout's
fleet after against before), each with its interval where the samples allow.

A retune that raises throughput and doubles the time to first token is not a plain win, nor one
that buys 5 % more tokens with 20 % more power: the operator sees all three.

**The figures of one side** come from the sampler's observed readings (``tui.rollout.sampling``):

* TTFT and ITL p90: the side's servers' histograms, each one's increase over the window summed
  bucket by bucket (``sum by (le) (increase(...))``), then Prometheus's ``histogram_quantile``
  (``tui.servers.histogram``). With fewer than ``MIN_OBSERVATIONS`` requests (tokens, for the
  ITL) on a side, no number: ``too few requests (canary n=3, control n=420)``;
* tokens per joule: the side's output tokens over the window over its GPUs' joules
  (``tui.rollout.joules``), for a side of several GPUs the ratio of their sums.

**The interval** is a bootstrap over the window's intervals (between two observed readings,
``tui.rollout.bootstrap``), the ratio of the two sides' window figures recomputed on each
resample, its percentiles the interval of the change. Why not the throughput's paired t on
per-interval figures: a p90 is not a mean, and one 5 s interval's p90 rests on a handful of
requests (mostly that interval's slowest; none at all in some), so a per-interval series of
p90s is biased and full of holes.
The bootstrap recomputes the window's own statistic from whole intervals: a canary's intervals
are resampled in pairs (the canary's and its controls' of the same seconds together, so what
moved every GPU alike cancels, as in the throughput's pairs), a rollout's before and after
windows each on its own (different seconds). Ratios of positive figures: the interval stays
inside (-100 %, +inf), like the throughput's. What it does not hold: the bucket's resolution (a
p90 interpolated within one bucket moves with the requests inside it, not with the latencies
inside it) and the intervals' correlation (a queue carries over from one to the next); with
fewer than ``MIN_INTERVALS`` intervals it gives no interval at all, only the figure.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tui.retune.verdict import effect_words
from tui.rollout.bootstrap import MIN_INTERVALS, bootstrap
from tui.rollout.sampling import Reading
from tui.servers.histogram import ITL, TTFT, Histogram, quantiles

MIN_OBSERVATIONS = 20
"""Requests (for the ITL: tokens) a side needs in the window for a p90: with fewer, the p90 is
its slowest one or two, not a percentile."""
QUANTILE = 0.9
"""The percentile reported."""


@dataclass(frozen=True, slots=True)
class Step:
    """What one interval between two observed readings added on one side."""

    ttft: Histogram | None
    """The TTFT histogram's increase, summed over the side's GPUs (None: none read)."""
    itl: Histogram | None
    """The ITL histogram's increase, likewise."""
    tokens: float
    """Output tokens made."""
    joules: float | None
    """Joules used (None: a GPU of the side was not metered over the interval)."""


@dataclass(frozen=True, slots=True)
class Side:
    """One side's figures over its window (the journal keeps these, per side)."""

    name: str
    """canary, control, before or after."""
    gpus: tuple[int, ...]
    """Its GPUs."""
    window: tuple[float, float]
    """time.time() of the window's first and last observed reading (its figures lie between)."""
    ttft_p90_s: float | None
    """TTFT p90, seconds (None: too few requests, or no histogram read)."""
    ttft_requests: int
    """Requests whose first token came in the window (the TTFT observations)."""
    itl_p90_s: float | None
    """Inter-token latency p90, seconds (None: too few tokens, or no histogram read)."""
    itl_tokens: int
    """ITL observations in the window (one per output token after the first)."""
    tokens: float
    """Output tokens made in the window."""
    joules: float | None
    """Joules its GPUs used in the window (None: not metered)."""
    tokens_per_joule: float | None
    """tokens / joules (None: not metered, or no energy used)."""


@dataclass(frozen=True, slots=True)
class Change:
    """One figure's change from the reference side to the measured one."""

    relative: float | None
    """measured / reference - 1 (None: no number; ``note`` says why)."""
    low: float | None = None
    """The interval's low end (None: no interval)."""
    high: float | None = None
    """Its high end."""
    level: float | None = None
    """Its confidence level."""
    note: str = ""
    """Why there is no number, or no interval."""


@dataclass(frozen=True, slots=True)
class Beside:
    """The figures beside throughput: both sides and each figure's change."""

    measured: Side
    """The canary (or the fleet after)."""
    reference: Side
    """Its controls (or the fleet before)."""
    ttft_p90: Change
    """TTFT p90's change."""
    itl_p90: Change
    """ITL p90's change."""
    tokens_per_joule: Change
    """Tokens per joule's change."""
    intervals: int
    """Intervals of the window (the measured side's, for a rollout)."""

    def words(self) -> str:
        """One line: ``TTFT p90 +140.0% (95% CI +98.2% .. +190.5%; 0.84 vs 0.35 s), ITL p90
        +2.1% (...), tokens/J -12.0% (...; 1.52 vs 1.73)``; a figure with no number says why
        (``TTFT p90: too few requests (canary n=3, control n=420)``)."""
        m, r = self.measured, self.reference
        return ", ".join(
            (
                _figure("TTFT p90", self.ttft_p90, m.ttft_p90_s, r.ttft_p90_s, "s"),
                _figure("ITL p90", self.itl_p90, m.itl_p90_s, r.itl_p90_s, "s"),
                _figure("tokens/J", self.tokens_per_joule, m.tokens_per_joule,
                        r.tokens_per_joule, ""),
            )
        )  # fmt: skip

    def short(self) -> str:
        """The figures without their intervals, for a line of a table: ``TTFT p90 0.84 vs
        0.35 s (+140.0%), tokens/J 1.52 vs 1.73 (-12.0%)``."""
        m, r = self.measured, self.reference
        parts = []
        for label, change, a, b, unit in (
            ("TTFT p90", self.ttft_p90, m.ttft_p90_s, r.ttft_p90_s, " s"),
            ("tokens/J", self.tokens_per_joule, m.tokens_per_joule, r.tokens_per_joule, ""),
        ):
            if a is None or b is None:
                parts.append(f"{label} not measured")
                continue
            rel = f" ({change.relative:+.1%})" if change.relative is not None else ""
            parts.append(f"{label} {a:.3g} vs {b:.3g}{unit}{rel}")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready: each side's figures under its name, and each change."""
        from dataclasses import asdict

        return {
            self.measured.name: asdict(self.measured),
            self.reference.name: asdict(self.reference),
            "ttft_p90": asdict(self.ttft_p90),
            "itl_p90": asdict(self.itl_p90),
            "tokens_per_joule": asdict(self.tokens_per_joule),
            "intervals": self.intervals,
            "words": self.words(),
            "short": self.short(),
        }


def _figure(label: str, change: Change, a: float | None, b: float | None, unit: str) -> str:
    if change.relative is None or a is None or b is None:
        return f"{label}: {change.note or 'not measured'}"
    places = ".3g" if unit == "s" else ",.2f"
    values = f"{a:{places}} vs {b:{places}}{' ' + unit if unit else ''}"
    if change.low is None or change.high is None:
        return f"{label} {change.relative:+.1%} ({values}; no interval: {change.note})"
    effect = effect_words(change.relative, change.low, change.high, change.level)
    return f"{label} {effect[:-1]}; {values})"


# --- the window's steps -----------------------------------------------------------------------


def steps(
    readings: Sequence[Reading], gpus: Sequence[int], start: float, end: float
) -> list[Step] | None:
    """The side ``gpus``' steps between consecutive observed readings inside [start, end].

    A server that restarted within a step (its token counter or a bucket went down) counts its
    new process from zero, as Prometheus's ``increase`` does; one that did not answer at either
    end of a step adds nothing to it (its histograms and tokens are unknown there) and, when
    metered, makes the step's joules unknown.

    Returns:
        The steps; None when no reading of the window was observed (a sampler without them).
    """
    marks = [r for r in readings if r.observed and start - 1e-9 <= r.t <= end + 1e-9]
    if not marks:
        return None
    out = []
    for older, newer in itertools.pairwise(marks):
        ttft: list[Histogram] = []
        itl: list[Histogram] = []
        tokens = 0.0
        joules: float | None = 0.0
        for gpu in gpus:
            before, after = older.values.get(gpu), newer.values.get(gpu)
            if before is not None and after is not None:
                tokens += after[0] - before[0] if after[0] >= before[0] else after[0]
                old_h, new_h = older.latency.get(gpu, {}), newer.latency.get(gpu, {})
                for family, into in ((TTFT, ttft), (ITL, itl)):
                    grown = _increase(old_h.get(family), new_h.get(family))
                    if grown is not None:
                        into.append(grown)
            j0, j1 = older.joules.get(gpu), newer.joules.get(gpu)
            joules = None if joules is None or j0 is None or j1 is None else joules + j1 - j0
        out.append(Step(_summed(ttft), _summed(itl), tokens, joules))
    return out


def _increase(older: Histogram | None, newer: Histogram | None) -> Histogram | None:
    if newer is None:
        return None
    if older is None:
        return None  # not read at the step's start: its increase is unknown
    return newer.since(older) or newer  # a bucket went down: a new process, from zero


def _summed(parts: Sequence[Histogram]) -> Histogram | None:
    total: Histogram | None = None
    for part in parts:
        total = part if total is None else total.plus(part) or total
    return total


# --- the two sides ------------------------------------------------------------------------------


def side_of(
    name: str, gpus: Sequence[int], window: Sequence[Step], wall: tuple[float, float]
) -> Side:
    """One side's figures from its steps (``wall``: the window's time.time() ends)."""
    ttft, itl = _hist([s.ttft for s in window]), _hist([s.itl for s in window])
    tokens = sum(s.tokens for s in window)
    metered = bool(window) and all(s.joules is not None for s in window)
    joules = sum(s.joules or 0.0 for s in window) if metered else None
    return Side(
        name,
        tuple(gpus),
        (round(wall[0], 3), round(wall[1], 3)),
        _p90(ttft),
        _count(ttft),
        _p90(itl),
        _count(itl),
        round(tokens, 3),
        None if joules is None else round(joules, 3),
        tokens / joules if joules else None,
    )


def _hist(parts: Sequence[Histogram | None]) -> Histogram | None:
    return _summed([p for p in parts if p is not None])


def _count(h: Histogram | None) -> int:
    return round(h.count) if h is not None else 0


def _p90(h: Histogram | None) -> float | None:
    if h is None or h.count < MIN_OBSERVATIONS:
        return None
    return quantiles(h, (QUANTILE,))[QUANTILE]


Statistic = Callable[[Sequence[Step], Sequence[Step]], float | None]
"""A ratio of the two sides' figures over some steps (None: no value on those)."""
Boot = Callable[[Statistic], tuple[float | None, float | None]]
"""A statistic's bootstrap interval (None, None: none)."""


def compare_sides(
    measured: tuple[Side, Sequence[Step]],
    reference: tuple[Side, Sequence[Step]],
    level: float,
    paired: bool,
) -> Beside:
    """Each figure's change from ``reference`` to ``measured``, with its bootstrap interval.

    Args:
        measured: The canary's (or the fleet after's) figures and steps.
        reference: The controls' (or the fleet before's).
        level: The intervals' two-sided confidence level.
        paired: The sides' steps are the same seconds (a canary): resampled together.
    """
    (m, m_steps), (r, r_steps) = measured, reference
    n = min(len(m_steps), len(r_steps)) if paired else len(m_steps)

    def boot(stat: Statistic) -> tuple[float | None, float | None]:
        return bootstrap(m_steps, r_steps, stat, level, paired)

    names = (m.name, r.name)
    ttft = _latency_change(
        "requests", (m.ttft_p90_s, r.ttft_p90_s), (m.ttft_requests, r.ttft_requests), names,
        lambda s: s.ttft, boot, level, m_steps,
    )  # fmt: skip
    itl = _latency_change(
        "tokens", (m.itl_p90_s, r.itl_p90_s), (m.itl_tokens, r.itl_tokens), names,
        lambda s: s.itl, boot, level, m_steps,
    )  # fmt: skip
    return Beside(m, r, ttft, itl, _energy_change(m, r, boot, level), n)


def _latency_change(
    what: str,
    p90s: tuple[float | None, float | None],
    counts: tuple[int, int],
    names: tuple[str, str],
    pick: Callable[[Step], Histogram | None],
    boot: Boot,
    level: float,
    steps_of: Sequence[Step],
) -> Change:
    """One latency's change (``what`` its observations are: requests, tokens)."""
    (a, b), (n_a, n_b) = p90s, counts
    if a is None or b is None:
        if not n_a and not n_b:
            return Change(None, note="none observed (no histogram read, or none in the window)")
        return Change(
            None, note=f"too few {what} ({names[0]} n={n_a}, {names[1]} n={n_b}; "
            f"a p90 needs {MIN_OBSERVATIONS})"
        )  # fmt: skip
    if b <= 0:
        return Change(None, note=f"the {names[1]}'s p90 is 0")
    bucket = _same_bucket(a, b, [pick(st) for st in steps_of])
    if bucket is not None:
        # Within one bucket the interpolation ranks requests, it does not time them: the ratio
        # of two such p90s says where the 90th request falls in the bucket, not how much slower.
        return Change(None, note=f"both p90s in the {bucket} bucket: no finer reading")

    def stat(ms: Sequence[Step], rs: Sequence[Step]) -> float | None:
        pa, pb = _p90(_hist([pick(s) for s in ms])), _p90(_hist([pick(s) for s in rs]))
        return pa / pb if pa is not None and pb and pb > 0 else None

    return _with_interval(a / b, boot(stat), level)


def _same_bucket(a: float, b: float, parts: Sequence[Histogram | None]) -> str | None:
    """'0 .. 0.002 s' when both values lie in one bucket of the histograms' bounds."""
    bounds = next((p.bounds for p in parts if p is not None), None)
    if bounds is None:
        return None
    i, j = bisect.bisect_left(bounds, a), bisect.bisect_left(bounds, b)
    if i != j or i >= len(bounds) - 1:
        return None
    return f"{bounds[i - 1] if i else 0:g} .. {bounds[i]:g} s"


def _energy_change(m: Side, r: Side, boot: Boot, level: float) -> Change:
    if m.tokens_per_joule is None or r.tokens_per_joule is None:
        unmetered = [s.name for s in (m, r) if s.joules is None]
        why = (
            f"not metered on the {' and '.join(unmetered)} (no energy reading: no GPU source, "
            "or a card two servers share)"
            if unmetered
            else "no energy used in the window"
        )
        return Change(None, note=why)
    if r.tokens_per_joule <= 0:
        return Change(None, note=f"the {r.name} made no tokens")

    def stat(ms: Sequence[Step], rs: Sequence[Step]) -> float | None:
        a, b = _per_joule(ms), _per_joule(rs)
        return a / b if a is not None and b else None

    return _with_interval(m.tokens_per_joule / r.tokens_per_joule, boot(stat), level)


def _per_joule(window: Sequence[Step]) -> float | None:
    joules = sum(s.joules or 0.0 for s in window)
    return sum(s.tokens for s in window) / joules if joules > 0 else None


def _with_interval(ratio: float, bounds: tuple[float | None, float | None], level: float) -> Change:
    low, high = bounds
    if low is None or high is None:
        return Change(ratio - 1.0, note=f"fewer than {MIN_INTERVALS} intervals")
    # A percentile interval need not hold its own point when the resamples are lopsided
    # (a handful of intervals): widened to hold it, never a figure outside its interval.
    return Change(ratio - 1.0, min(low, ratio) - 1.0, max(high, ratio) - 1.0, level)


def measured_beside(
    readings: Sequence[Reading],
    measured: tuple[str, Sequence[int], tuple[float, float]],
    reference: tuple[str, Sequence[int], tuple[float, float]],
    level: float,
) -> Beside | None:
    """The figures beside throughput of two sides, each (name, GPUs, (start, end)) on the
    sampler's monotonic clock; same windows: paired (a canary), else two windows (a rollout).

    Returns:
        None when the sampler observed nothing in a window (no histograms, no energy read:
        the agents' counters of a many-node canary).
    """
    m_name, m_gpus, m_window = measured
    r_name, r_gpus, r_window = reference
    m_steps = steps(readings, m_gpus, *m_window)
    r_steps = steps(readings, r_gpus, *r_window)
    if not m_steps or not r_steps:
        return None
    m = side_of(m_name, m_gpus, m_steps, _wall(readings, m_window))
    r = side_of(r_name, r_gpus, r_steps, _wall(readings, r_window))
    return compare_sides((m, m_steps), (r, r_steps), level, paired=m_window == r_window)


def _wall(readings: Sequence[Reading], window: tuple[float, float]) -> tuple[float, float]:
    marks = [r.wall for r in readings if r.observed and window[0] - 1e-9 <= r.t <= window[1] + 1e-9]
    return (marks[0], marks[-1]) if marks else (0.0, 0.0)
