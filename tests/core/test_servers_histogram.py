"""Latency histograms: read from /metrics, differenced between scrapes, and their quantiles,
each held to an independent computation: prometheus_client's own parser of the exposition and a
re-implementation of Prometheus's histogram_quantile written here from its documented rules."""

from __future__ import annotations

import math
import random

import httpx
import pytest
import repo_paths
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client import Histogram as PromHistogram

from bench.prom_reference import client_buckets, reference_quantile
from tui.servers.histogram import (
    LATENCY_FAMILIES,
    QUEUE,
    TTFT,
    Histogram,
    histogram_quantile,
    merged,
    parse_histograms,
    quantiles,
)
from tui.servers.keepalive import Answer
from tui.servers.probe import ServerProbe

FIXTURES = repo_paths.FIXTURES / "real_sglang" / "0.5.17"
RECORDED = ("base", "cap", "spec")
QS = (0.5, 0.9, 0.99)


@pytest.mark.parametrize("scenario", RECORDED)
def test_recorded_real_histograms_read_as_prometheus_client_reads_them(scenario: str) -> None:
    body = (FIXTURES / scenario / "metrics.txt").read_bytes()
    ours = parse_histograms(body)
    assert set(ours) == set(LATENCY_FAMILIES)
    for family, histogram in ours.items():
        theirs = client_buckets(body.decode(), family)
        assert list(zip(histogram.bounds, histogram.counts, strict=True)) == theirs, family
        assert histogram.count > 0
        for q in QS:
            assert histogram_quantile(q, histogram) == pytest.approx(
                reference_quantile(q, theirs), rel=1e-12
            ), (family, q)


def test_recorded_ttft_p90_is_the_real_servers_figure() -> None:
    """The spec scenario's 11 requests: 2 within 0.6 s, 10 within 2 s, 11 within 6 s; rank 9.9
    falls in (1, 2] with 2 below: 1 + (9.9 - 2) / 8."""
    histogram = parse_histograms((FIXTURES / "spec" / "metrics.txt").read_bytes())[TTFT]
    assert histogram.count == 11
    assert histogram_quantile(0.9, histogram) == pytest.approx(1 + 7.9 / 8)


def scrape(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)


def test_the_window_is_the_increase_between_two_scrapes() -> None:
    """Observations made between two scrapes, read by differencing ours, give the quantiles the
    reference gives on prometheus_client's own bucket increases; and each estimate lies in the
    bucket that holds the true quantile of the values observed in the window."""
    registry = CollectorRegistry()
    buckets = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40)
    ttft = PromHistogram(
        "sglang:time_to_first_token_seconds",
        "ttft",
        ["is_streaming"],
        buckets=buckets,
        registry=registry,
    )
    rng = random.Random(7)
    for _ in range(500):  # before the window: slow requests it must not count
        ttft.labels("false").observe(rng.uniform(10, 30))
    first = scrape(registry)
    window = [rng.lognormvariate(0, 0.6) for _ in range(2000)]
    for i, value in enumerate(window):
        ttft.labels("true" if i % 3 else "false").observe(value)
    second = scrape(registry)

    older, newer = parse_histograms(first)[TTFT], parse_histograms(second)[TTFT]
    increase = newer.since(older)
    assert increase is not None and increase.count == 2000
    before = dict(client_buckets(first.decode(), TTFT))
    after = client_buckets(second.decode(), TTFT)
    reference = [(le, count - before[le]) for le, count in after]
    ordered = sorted(window)
    for q in QS:
        estimate = histogram_quantile(q, increase)
        assert estimate == pytest.approx(reference_quantile(q, reference), rel=1e-12)
        true = ordered[math.ceil(q * len(ordered)) - 1]
        upper = next(b for b in (*buckets, math.inf) if true <= b)
        lower = max((b for b in buckets if b < upper), default=0.0)
        assert lower <= estimate <= upper, (q, true, estimate)


def test_a_bucket_going_down_is_a_restart_not_an_increase() -> None:
    older = Histogram((0.5, 1.0, math.inf), (10.0, 20.0, 25.0))
    restarted = Histogram((0.5, 1.0, math.inf), (1.0, 2.0, 30.0))
    assert restarted.since(older) is None
    assert Histogram((0.5, math.inf), (1.0, 1.0)).since(older) is None  # other bounds


def test_quantile_edge_cases_follow_prometheus() -> None:
    bounds = (0.0, 0.001, 0.005, math.inf)
    # Rank within the first bucket whose bound is 0: that bound, no interpolation below it.
    assert histogram_quantile(0.5, Histogram(bounds, (8.0, 9.0, 10.0, 10.0))) == 0.0
    # Rank in +Inf: the highest finite bound.
    assert histogram_quantile(0.99, Histogram(bounds, (0.0, 1.0, 2.0, 10.0))) == 0.005
    # No observations, no +Inf bucket, a single bucket: NaN; q outside 0..1: -inf/+inf.
    assert math.isnan(histogram_quantile(0.5, Histogram(bounds, (0.0, 0.0, 0.0, 0.0))))
    assert math.isnan(histogram_quantile(0.5, Histogram((1.0, 2.0), (1.0, 2.0))))
    assert math.isnan(histogram_quantile(0.5, Histogram((math.inf,), (3.0,))))
    assert histogram_quantile(-0.1, Histogram(bounds, (1.0, 1.0, 1.0, 1.0))) == -math.inf
    assert histogram_quantile(1.1, Histogram(bounds, (1.0, 1.0, 1.0, 1.0))) == math.inf
    # A bucket below its neighbour (inconsistent data) is lifted, as ensureMonotonic does.
    lifted = Histogram((1.0, 2.0, 3.0, math.inf), (4.0, 2.0, 6.0, 8.0))
    assert histogram_quantile(0.5, lifted) == pytest.approx(1.0)
    assert quantiles(Histogram(bounds, (0.0,) * 4), QS) == {q: None for q in QS}


def test_labels_in_any_order_and_one_ending_in_le_are_read() -> None:
    body = (
        b"# TYPE sglang:queue_time_seconds histogram\n"
        b'sglang:queue_time_seconds_bucket{rule="x",le="0.5",tp_rank="0"} 3.0\n'
        b'sglang:queue_time_seconds_bucket{le="+Inf",rule="x",tp_rank="0"} 4.0\n'
        b'sglang:queue_time_seconds_bucket{rule="x",tp_rank="1",le="0.5"} 1.0\n'
        b'sglang:queue_time_seconds_bucket{rule="x",tp_rank="1",le="+Inf"} 1.0\n'
        b"sglang:queue_time_seconds_count 5.0\n"
        b"# HELP sglang:other_seconds x\n"
        b'sglang:time_to_first_token_seconds_bucket{le="1.0"} 9.0\n'
    )
    found = parse_histograms(body)
    assert found == {QUEUE: Histogram((0.5, math.inf), (4.0, 5.0))}  # TTFT has no +Inf bucket


def test_fleet_sum_leaves_out_other_bounds() -> None:
    a = Histogram((1.0, math.inf), (1.0, 2.0))
    b = Histogram((1.0, math.inf), (3.0, 3.0))
    other = Histogram((2.0, math.inf), (5.0, 5.0))
    assert merged([a, other, b]) == Histogram((1.0, math.inf), (4.0, 5.0))
    assert merged([]) is None


def test_the_probe_reads_its_last_bodys_histograms_on_demand_once() -> None:
    probe = ServerProbe(httpx.AsyncClient(), 1)
    assert probe.latency_histograms() == {}
    body = (FIXTURES / "spec" / "metrics.txt").read_bytes()
    assert probe.read_load(Answer(200, (), body)) is not None
    first = probe.latency_histograms()
    assert first == parse_histograms(body) and first[TTFT].count == 11
    assert probe.latency_histograms() is first  # the same body is not scanned again
    probe.read_load(Answer(200, (), body.replace(b"} 11.0\n", b"} 12.0\n")))
    assert probe.latency_histograms()[TTFT].count == 12
