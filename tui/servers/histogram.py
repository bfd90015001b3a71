"""SGLang's latency histograms from ``/metrics``: read, differenced, and their quantiles.

A Prometheus histogram is a family of cumulative counters, one per upper bound ``le`` (the last
``+Inf``, the count of every observation). A percentile over a window is read the way Prometheus
reads it (``histogram_quantile(0.9, sum by (le) (increase(..._bucket[5m])))``): the buckets'
increase between two scrapes, summed over the label sets (``is_streaming``, DP ranks), then
:func:`histogram_quantile`, which is ``promql/quantile.go``'s ``bucketQuantile`` line for line:

* linear interpolation within the bucket the rank falls in, from the bucket below's bound (0 for
  the first bucket when its bound is positive);
* a rank in the ``+Inf`` bucket gives the highest finite bound (the value is above it);
* a first bucket whose bound is <= 0 (``queue_time_seconds`` has ``le="0.0"``) gives that bound;
* no observations, fewer than two buckets, or no ``+Inf`` bucket: NaN (the caller shows none);
* counts made monotonic (a bucket below its neighbour takes its neighbour's count) after float
  noise of at most 1e-12 relative is ignored, as Prometheus does.

Reading scans the body's bytes with regular expressions (``parse_histograms``), like
``tui.servers.payloads``' gauges, each family only within its own block of lines: the four
families' ~110 bucket lines of a 60 KB body.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tui.sglang.releases import CONSOLE_HISTOGRAMS

LATENCY_FAMILIES = CONSOLE_HISTOGRAMS
"""The histograms the console reads: in every release 0.5.17-0.5.23 (the ``console_metrics``
claim of ``tui.sglang.releases`` holds each release's source to them)."""
TTFT, ITL, E2E, QUEUE = LATENCY_FAMILIES
"""Time to first token (tokenizer side, labelled ``is_streaming``); inter-token latency (each
output chunk's interval over its tokens); end-to-end request latency (labelled
``is_streaming``); time a request waited in the scheduler's queue (scheduler side)."""

PRECISION_TOLERANCE = 1e-12
"""Relative difference between neighbouring buckets that is float noise (Prometheus's)."""


@dataclass(frozen=True, slots=True)
class Histogram:
    """One histogram's cumulative bucket counts, summed over its label sets."""

    bounds: tuple[float, ...]
    """Upper bounds, ascending; the last is ``inf``."""
    counts: tuple[float, ...]
    """Observations at or below each bound (cumulative, as exposed)."""

    @property
    def count(self) -> float:
        """Every observation (the ``+Inf`` bucket)."""
        return self.counts[-1] if self.counts else 0.0

    def since(self, older: Histogram) -> Histogram | None:
        """The observations made after ``older`` (this scrape minus that one).

        Returns:
            The difference; None when the two cannot be differenced: other bounds (another
            release or a ``--bucket-*`` flag), or a bucket that went down (the server restarted
            and its counters began again: the caller counts this scrape from zero, as
            Prometheus's ``increase`` does across a reset).
        """
        if older.bounds != self.bounds:
            return None
        counts = tuple(new - old for new, old in zip(self.counts, older.counts, strict=True))
        if any(c < 0 for c in counts):
            return None
        return Histogram(self.bounds, counts)

    def plus(self, other: Histogram) -> Histogram | None:
        """The two summed bucket by bucket (a fleet's ``sum by (le)``); None for other bounds."""
        if other.bounds != self.bounds:
            return None
        return Histogram(
            self.bounds, tuple(a + b for a, b in zip(self.counts, other.counts, strict=True))
        )


def histogram_quantile(q: float, histogram: Histogram) -> float:
    """The ``q`` quantile of a histogram, as Prometheus's ``histogram_quantile`` computes it.

    Args:
        q: The quantile, 0..1 (below 0: -inf; above 1: +inf; NaN: NaN, as in PromQL).
        histogram: Cumulative bucket counts (an increase over a window, or a scrape).

    Returns:
        The value (the bounds' unit), or NaN where Prometheus gives NaN (see the module).
    """
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    bounds = histogram.bounds
    if not bounds or not math.isinf(bounds[-1]) or len(bounds) < 2:
        return math.nan
    return _ranked(q, bounds, _monotonic(list(histogram.counts)))


def _ranked(q: float, bounds: tuple[float, ...], counts: list[float]) -> float:
    """``histogram_quantile`` once the bounds are checked and the counts made monotonic."""
    observations = counts[-1]
    if observations == 0:
        return math.nan
    rank = q * observations
    # sort.Search over all but the +Inf bucket: the first whose count reaches the rank.
    b = bisect.bisect_left(counts, rank, 0, len(counts) - 1)
    if b == len(counts) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = 0.0, bounds[b], counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return start + (end - start) * (rank / count)


def _monotonic(counts: list[float]) -> list[float]:
    """Prometheus's ``correctPrecisionErrors`` then ``ensureMonotonic``, on a copy."""
    previous = counts[0]
    for i in range(1, len(counts)):
        current = counts[i]
        delta = abs(current - previous)
        if delta == 0:
            continue
        if current != 0 and delta / current <= PRECISION_TOLERANCE:
            counts[i] = previous
        else:
            previous = current
    highest = counts[0]
    for i in range(1, len(counts)):
        if counts[i] > highest:
            highest = counts[i]
        elif counts[i] < highest:
            counts[i] = highest
    return counts


def _bucket_pattern(name: str) -> re.Pattern[bytes]:
    # ``le`` is matched as a label name (first, or after a comma): ``rule="..."`` ends in le=".
    return re.compile(
        rb"\n" + re.escape(name.encode()) + rb"_bucket\{(?:[^\n]*?,)?le=\"([^\"]*)\"[^\n]*\}"
        rb"[ \t]*([^ \t\r\n]*)"
    )


_BUCKETS = {name: (b"\n" + name.encode() + b"_bucket", _bucket_pattern(name)) for name in
            LATENCY_FAMILIES}  # fmt: skip
"""Per family: where its first bucket line starts, and a bucket line's ``le`` and value."""


def parse_histograms(body: bytes) -> dict[str, Histogram]:
    """The latency histograms of a ``/metrics`` body, each summed over its label sets.

    Why per family and only within its block: the text format keeps a family's lines together
    (its ``# HELP`` and ``# TYPE``, then every sample), so each family is scanned from its first
    bucket line to the next comment, not the whole body four times (a fifth of the time).

    Args:
        body: The exposition's bytes.

    Returns:
        By family name (``LATENCY_FAMILIES``), the families that have a ``+Inf`` bucket.

    Raises:
        ValueError: a bucket line's bound or value is not a number.
    """
    text = b"\n" + body if body[:7] == b"sglang:" else body
    histograms = {}
    for name, (first, pattern) in _BUCKETS.items():
        start = text.find(first)
        if start < 0:
            continue
        end = text.find(b"\n# ", start)
        buckets: dict[float, float] = {}
        for le, value in pattern.findall(text, start, end if end >= 0 else len(text)):
            if not value:
                raise ValueError(f"histogram bucket without a value: {name!r}")
            bound = float(le)
            buckets[bound] = buckets.get(bound, 0.0) + float(value)
        bounds = tuple(sorted(buckets))
        if not bounds or not math.isinf(bounds[-1]):
            continue  # Prometheus answers NaN for such a family: nothing to read
        histograms[name] = Histogram(bounds, tuple(buckets[b] for b in bounds))
    return histograms


def merged(histograms: Iterable[Histogram]) -> Histogram | None:
    """Histograms summed bucket by bucket (the fleet's); those whose bounds differ from the
    first one's are left out, None when there is none."""
    total: Histogram | None = None
    for histogram in histograms:
        total = histogram if total is None else total.plus(histogram) or total
    return total


def quantiles(histogram: Histogram, qs: Iterable[float]) -> Mapping[float, float | None]:
    """Each quantile of ``qs`` (each in 0..1), None where Prometheus gives NaN (no observation).

    Why not ``histogram_quantile`` per q: the counts are made monotonic once for them all (the
    monitor computes twelve a window reading, seven servers and the fleet's)."""
    bounds = histogram.bounds
    valid = bool(bounds) and math.isinf(bounds[-1]) and len(bounds) >= 2
    counts = _monotonic(list(histogram.counts)) if valid else []
    out: dict[float, float | None] = {}
    for q in qs:
        value = _ranked(q, bounds, counts) if valid and 0 <= q <= 1 else math.nan
        out[q] = None if math.isnan(value) else value
    return out
