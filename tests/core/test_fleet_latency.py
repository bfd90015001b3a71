"""Latency percentiles over the rolling window, per server and for the fleet, each held to an
independent computation: prometheus_client's histograms scraped at known times, their bucket
increases taken apart from gpufleet's code (``latency_helpers``), a server restart counted from
zero as Prometheus's ``increase`` does; and on a live simulated server, through the monitor."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from fleet_helpers import poll_until, sim_monitor
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client import Histogram as PromHistogram
from sim_helpers import Clients, running_sim

from bench.prom_reference import client_buckets, minus, plus, reference_quantile
from tui.fleet.latency import (
    QUANTILES,
    LatencySummary,
    LatencyWindow,
    Percentiles,
    fleet_latency,
)
from tui.fleet.snapshot import FleetSnapshot, ServerState
from tui.fleet.spec import ServerSpec
from tui.servers.histogram import TTFT, parse_histograms

BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40)


class Server:
    """One process's TTFT histogram in its own registry (a restart is a new Server)."""

    def __init__(self, seed: int) -> None:
        self.registry = CollectorRegistry()
        self.ttft = PromHistogram(TTFT, "ttft", ["is_streaming"], buckets=BUCKETS,
                                  registry=self.registry)  # fmt: skip
        self.rng = random.Random(seed)

    def serve(self, count: int, scale: float) -> None:
        for i in range(count):
            self.ttft.labels("true" if i % 2 else "false").observe(
                self.rng.lognormvariate(0, 0.5) * scale
            )

    def scrape(self) -> str:
        return generate_latest(self.registry).decode()


def expected(buckets: list[tuple[float, float]], window_s: float | None) -> Percentiles:
    p50, p90, p99 = (reference_quantile(q, buckets) for q in QUANTILES)
    return Percentiles(p50, p90, p99, round(buckets[-1][1]))


def approx(found: Percentiles | None, want: Percentiles) -> None:
    assert found is not None
    assert found.count == want.count
    for name in ("p50", "p90", "p99"):
        assert getattr(found, name) == pytest.approx(getattr(want, name), rel=1e-9), name


def test_the_window_is_the_increase_over_its_last_five_minutes() -> None:
    """Slow requests in the first ten minutes, fast ones after: five minutes on, the window
    holds only the fast ones (its base is the reading five minutes back)."""
    server = Server(1)
    window = LatencyWindow()
    scrapes = {}
    for t in range(0, 901, 5):
        server.serve(20, scale=8.0 if t < 600 else 0.3)
        scrapes[t] = server.scrape()
        window.add(float(t), parse_histograms(scrapes[t].encode()), epoch=1)
    summary = window.summary
    assert summary is not None and summary.window_s == 300
    increase = minus(client_buckets(scrapes[900], TTFT), client_buckets(scrapes[600], TTFT))
    approx(summary.ttft, expected(increase, 300))
    assert summary.ttft is not None and summary.ttft.p99 is not None and summary.ttft.p99 < 2
    assert summary.itl is None  # a family the server does not export: none, not zero


def test_one_reading_is_every_observation_since_the_start_and_says_so() -> None:
    server = Server(2)
    server.serve(50, 1.0)
    window = LatencyWindow()
    window.add(0.0, parse_histograms(server.scrape().encode()), epoch=7)
    summary = window.summary
    assert summary is not None and summary.window_s is None
    approx(summary.ttft, expected(client_buckets(server.scrape(), TTFT), None))


@pytest.mark.parametrize("same_pid", [False, True])
def test_a_restart_counts_the_new_process_from_zero(same_pid: bool) -> None:
    """The old process's increase up to its last reading, plus everything the new one observed:
    told apart by its pid, or (a remote server, no pid) by a bucket that went down."""
    old, new = Server(3), Server(4)
    window = LatencyWindow()
    old.serve(100, 1.0)
    first = old.scrape()
    window.add(0.0, parse_histograms(first.encode()), epoch=10)
    old.serve(40, 2.0)
    last_old = old.scrape()
    window.add(60.0, parse_histograms(last_old.encode()), epoch=10)
    new.serve(30, 0.5)
    after = new.scrape()
    window.add(120.0, parse_histograms(after.encode()), epoch=10 if same_pid else 11)
    want = plus(
        minus(client_buckets(last_old, TTFT), client_buckets(first, TTFT)),
        client_buckets(after, TTFT),
    )
    summary = window.summary
    assert summary is not None and summary.window_s == 120
    approx(summary.ttft, expected(want, 120))
    assert summary.ttft is not None and summary.ttft.count == 70


def test_a_reading_is_parsed_only_when_due() -> None:
    server = Server(5)
    server.serve(10, 1.0)
    body = server.scrape().encode()
    calls = []

    def read() -> dict:
        calls.append(1)
        return parse_histograms(body)

    window = LatencyWindow(thin_s=5.0)
    for t in (0.0, 1.0, 2.0, 4.9, 5.0, 6.0):
        window.offer(t, read, epoch=1)
    assert len(calls) == 2  # at 0 and 5 s: the other scrapes are never parsed
    window.offer(6.5, read, epoch=2)  # a new process: read at once
    assert len(calls) == 3


def test_the_fleet_is_the_servers_increases_summed() -> None:
    servers = [Server(10 + i) for i in range(3)]
    windows = [LatencyWindow() for _ in servers]
    firsts: list[str] = []
    lasts: list[str] = []
    for t in (0.0, 30.0):
        for i, (server, window) in enumerate(zip(servers, windows, strict=True)):
            server.serve(25, scale=1.0 + i)
            text = server.scrape()
            (firsts if t == 0 else lasts).append(text)
            window.add(t, parse_histograms(text.encode()), epoch=i)
    want = [(le, 0.0) for le, _ in client_buckets(lasts[0], TTFT)]
    for first, last in zip(firsts, lasts, strict=True):
        want = plus(want, minus(client_buckets(last, TTFT), client_buckets(first, TTFT)))
    fleet = fleet_latency(windows)
    assert fleet is not None and fleet.window_s == 30
    approx(fleet.ttft, expected(want, 30))
    # A server whose window has not begun (one reading) is left out of a begun fleet window.
    late = LatencyWindow()
    late.add(30.0, parse_histograms(Server(99).scrape().encode()), epoch=99)
    assert fleet_latency([*windows, late]) == fleet
    assert fleet_latency([LatencyWindow()]) is None


def test_no_observation_is_none_not_zero() -> None:
    server = Server(6)
    server.ttft.labels("false")  # exported, nothing observed yet
    window = LatencyWindow()
    window.add(0.0, parse_histograms(server.scrape().encode()), epoch=1)
    summary = window.summary
    assert summary == LatencySummary(None, ttft=Percentiles(None, None, None, 0))
    assert summary is not None and summary.ttft is not None and summary.ttft.p50 is None


async def test_the_monitor_shows_a_live_servers_percentiles(tmp_path: Path) -> None:
    """A simulated server serving requests: its panel's percentiles, and the fleet's (its one
    server's), are those of its own /metrics histograms."""
    args = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics"]
    with running_sim(args, tmp_path) as sim:
        spec = ServerSpec(gpu_index=0, port=sim.port)
        async with sim_monitor(spec) as monitor:

            def served(snap: FleetSnapshot) -> bool:
                server = snap.panels[0].server
                return (
                    server is not None
                    and server.state is ServerState.READY
                    and server.latency is not None
                    and server.latency.ttft is not None
                    and server.latency.ttft.count is not None
                    and server.latency.ttft.count >= 4
                    # the fleet's is recomputed at most every THIN_S: wait for it to catch up
                    and snap.latency == server.latency
                )

            await poll_until(monitor, lambda s: s.panels[0].server is not None
                             and s.panels[0].server.state is ServerState.READY)  # fmt: skip
            assert Clients(sim.url, 4, 32).join(60) == [200] * 4
            snap = await poll_until(monitor, served, 30)
    server = snap.panels[0].server
    assert server is not None and server.latency is not None
    assert server.latency.window_s is not None  # begun: a reading before the requests
    for part in ("ttft", "itl", "e2e", "queue"):
        found = getattr(server.latency, part)
        assert found is not None and found.count > 0 and found.p50 is not None, part
    assert snap.latency == server.latency  # one server: the fleet's is its own


def test_the_percentiles_and_the_draft_cross_the_agents_api() -> None:
    """A console over many nodes rebuilds the snapshot from the agent's JSON: the new readings
    come back as the same typed values."""
    import json

    from tui.agent.codec import decode, encode
    from tui.fleet.snapshot import GpuPanel, ServerSnapshot
    from tui.fleet.speculative import SpecDecode

    summary = LatencySummary(300.0, ttft=Percentiles(0.1, None, 0.3, 5))
    server = ServerSnapshot(
        1, ServerState.READY, spec=SpecDecode("EAGLE", 2.0, 0.5, 3, 4), latency=summary,
        swa_usage=0.0, cache_hit_rate=0.25,
    )  # fmt: skip
    snap = FleetSnapshot(panels=(GpuPanel(0, None, server),), latency=summary)
    assert decode(json.loads(json.dumps(encode(snap))), FleetSnapshot) == snap
