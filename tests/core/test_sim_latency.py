"""The simulated server exports SGLang's four latency histograms, with values that hold together:
read by prometheus_client's own parser, counted once per request (per token for inter-token
latency), an end-to-end time that is the first token's plus the decode's, and a ``slow`` fault
that slows every step by its factor."""

from __future__ import annotations

import math
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sim_helpers import Clients, running_sim

from tui.servers.histogram import (
    E2E,
    ITL,
    LATENCY_FAMILIES,
    QUEUE,
    TTFT,
    histogram_quantile,
    parse_histograms,
)
from tui.sim.latency import Recorded

FAST = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics"]
TOKENS = 64


def families(text: str) -> dict[str, dict[str, float]]:
    """prometheus_client's reading: per histogram family, its _count and _sum (over labels)."""
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.type != "histogram":
            continue
        sums = out.setdefault(family.name, {"count": 0.0, "sum": 0.0})
        for sample in family.samples:
            for part in ("count", "sum"):
                if sample.name.endswith("_" + part):
                    sums[part] += sample.value
    return out


def test_recorded_buckets_are_cumulative_whole_observations() -> None:
    recorded = Recorded((0.1, 1.0))
    recorded.observe(0.05)
    recorded.observe(0.5, 2.5)  # a speculative step's mean accept length of tokens
    recorded.observe(5.0)
    assert recorded.buckets() == [("0.1", 1.0), ("1.0", 3.0), ("+Inf", 4.0)]
    assert recorded.total == pytest.approx(0.05 + 1.25 + 5.0)


def sequential(url: str, count: int) -> None:
    """``count`` requests one after the other: every decode step has a batch of one."""
    for _ in range(count):
        assert Clients(url, 1, TOKENS).join(60) == [200]


def scrape(url: str) -> str:
    return httpx.get(url + "/metrics", timeout=5).text


@pytest.mark.parametrize("build", ["0.5.23", "0.5.17"])
def test_a_simulated_server_exports_the_latency_histograms(tmp_path: Path, build: str) -> None:
    # 0.5.17 has no /ready: its ready line says it.
    legacy = build == "0.5.17"
    with running_sim([*FAST, "--sim-build", build], tmp_path, wait_healthy=not legacy) as sim:
        assert not legacy or sim.wait_log("fired up and ready to roll", 30), sim.log()[-2000:]
        clients = Clients(sim.url, 6, TOKENS)
        assert clients.join(60) == [200] * 6
        text = scrape(sim.url)
    theirs = families(text)
    ours = parse_histograms(text.encode())
    assert set(ours) == set(LATENCY_FAMILIES)
    requests = sum(
        s.value
        for f in text_string_to_metric_families(text)
        if f.name == "sglang:num_requests"
        for s in f.samples
    )
    assert requests >= 6  # the warmup's request counts too, as in SGLang
    for family in (TTFT, E2E, QUEUE):
        assert theirs[family]["count"] == ours[family].count == requests, family
    # Inter-token latency counts each decoded token (floored over a speculative step's mean).
    assert theirs[ITL]["count"] == ours[ITL].count >= 6 * (TOKENS - 1)
    mean = {f: theirs[f]["sum"] / theirs[f]["count"] for f in LATENCY_FAMILIES}
    assert mean[QUEUE] <= mean[TTFT] <= mean[E2E]
    for family in LATENCY_FAMILIES:
        p50, p99 = (histogram_quantile(q, ours[family]) for q in (0.5, 0.99))
        assert 0 <= p50 <= p99 and not math.isnan(p99), family


def test_end_to_end_is_the_first_token_plus_the_decode(tmp_path: Path) -> None:
    """Every request's end-to-end time is its first token's plus its decode's (each output's
    interval, what inter-token latency sums): summed over the requests by the server, three
    histograms kept apart."""
    with running_sim(FAST, tmp_path) as sim:
        sequential(sim.url, 3)
        found = families(scrape(sim.url))
    ttft, e2e, itl = found[TTFT], found[E2E], found[ITL]
    assert itl["count"] >= 3 * (TOKENS - 1)
    assert e2e["sum"] == pytest.approx(ttft["sum"] + itl["sum"], rel=0.05)


def test_a_slow_fault_slows_every_step_by_its_factor(tmp_path: Path) -> None:
    """The same requests, one at a time (a batch of one: each step's time is fixed), on a server
    slowed 4x from its start and on a normal one: 4x the inter-token latency."""
    itl = {}
    for name, extra in (("normal", []), ("slow", ["--sim-fault", "slow:0:4"])):
        state = tmp_path / name
        state.mkdir()
        with running_sim([*FAST, *extra], state) as sim:
            sequential(sim.url, 2)
            found = families(scrape(sim.url))[ITL]
        itl[name] = found["sum"] / found["count"]
    assert itl["slow"] / itl["normal"] == pytest.approx(4.0, rel=0.05)
