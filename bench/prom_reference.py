"""An independent reading of Prometheus histograms, to hold gpufleet's own to (the tests and the
real-server harness, ``bench.real_sglang.observe``).

``client_buckets`` reads an exposition with prometheus_client's parser (each ``le``'s count
summed over the label sets); ``reference_quantile`` is histogram_quantile as the Prometheus
documentation states it, written apart from ``tui.servers.histogram``.
"""

from __future__ import annotations

import math

from prometheus_client.parser import text_string_to_metric_families


def client_buckets(text: str, family: str) -> list[tuple[float, float]]:
    """prometheus_client's reading: each ``le``'s count summed over the label sets."""
    name = family.removeprefix("sglang:")
    sums: dict[float, float] = {}
    for metric in text_string_to_metric_families(text):
        if metric.name not in (family, name):
            continue
        for sample in metric.samples:
            if sample.name.endswith("_bucket"):
                le = float(sample.labels["le"])
                sums[le] = sums.get(le, 0.0) + sample.value
    return sorted(sums.items())


def minus(
    newer: list[tuple[float, float]], older: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """The buckets' increase from ``older`` to ``newer`` (same bounds)."""
    before = dict(older)
    return [(le, count - before.get(le, 0.0)) for le, count in newer]


def plus(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Two bucket lists summed (same bounds)."""
    other = dict(b)
    return [(le, count + other.get(le, 0.0)) for le, count in a]


def reference_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """histogram_quantile as the Prometheus docs state it: linear within the bucket, from 0 in
    the first one (its bound when that is <= 0), the second-highest bound in +Inf; NaN
    without observations."""
    total = buckets[-1][1]
    if total == 0:
        return math.nan
    rank = q * total
    for i, (le, cumulative) in enumerate(buckets):
        if cumulative < rank:
            continue
        if math.isinf(le):
            return buckets[i - 1][0]
        if i == 0:
            return le if le <= 0 else le * rank / cumulative
        lower, below = buckets[i - 1]
        return lower + (le - lower) * (rank - below) / (cumulative - below)
    return buckets[-2][0]
