"""HTTP probes against a real loopback server with canned SGLang-shaped answers."""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from servers_helpers import FIXTURES, OK, Reply, Route, canned_server, json_reply, metrics_reply

from bench.ports import free_port
from tui.servers.keepalive import KeepAliveTransport
from tui.servers.probe import (
    HEALTH_TIMEOUT_S,
    ProbeStatus,
    Readiness,
    ServerProbe,
    parse_loads_json,
    parse_metrics,
)

ClientFactory = Callable[[], httpx.AsyncClient]


_DIRECT: weakref.WeakKeyDictionary[httpx.AsyncClient, KeepAliveTransport] = (
    weakref.WeakKeyDictionary()
)
"""Clients whose probes send to their keep-alive transport straight (as the monitor's do)."""


@pytest.fixture(params=["httpcore", "keepalive", "direct"])
def make_client(request: pytest.FixtureRequest) -> ClientFactory:
    """Every probe test runs over httpx's default transport, over the monitor's own through
    the client, and over the monitor's own straight (``ServerProbe(direct=...)``)."""
    if request.param == "keepalive":
        return lambda: httpx.AsyncClient(transport=KeepAliveTransport())
    if request.param == "direct":

        def direct() -> httpx.AsyncClient:
            transport = KeepAliveTransport()
            client = httpx.AsyncClient(transport=transport)
            _DIRECT[client] = transport
            return client

        return direct
    return httpx.AsyncClient


def make_probe(client: httpx.AsyncClient, port: int, **options: Any) -> ServerProbe:
    """A probe over ``client``, straight to its transport when the fixture made it so.

    Its timeout is 10 s unless a test sets one: the monitor's 0.8 s is a deadline for a loaded
    fleet's probes, and these tests read what an answer says (under three burners on two cores,
    a canned ``/get_server_info`` came after 0.8 s and read as None)."""
    options.setdefault("timeout", 10.0)
    return ServerProbe(client, port, direct=_DIRECT.get(client), **options)


async def test_readiness_is_the_cheap_ready_endpoint(make_client: ClientFactory) -> None:
    routes: dict[str, Route] = {
        "/ready": [(503, "text/plain", ""), (503, "text/plain", ""), (200, "text/plain", "")],
        "/health_generate": (200, "text/plain", ""),
        "/model_info": json_reply('{"model_path": "Qwen/Qwen3.6-27B"}'),
    }
    with canned_server(routes) as server:
        async with make_client() as client:
            probe = make_probe(client, server.port)
            first = await probe.readiness()
            second = await probe.readiness()
            third = await probe.readiness()
    assert (first.status, first.http_status, first.endpoint) == (ProbeStatus.UP, 503, "/ready")
    assert second.status is ProbeStatus.UP
    assert (third.status, third.http_status, third.endpoint) == (ProbeStatus.READY, 200, "/ready")
    # Never the generating probe, never /model_info (which answers during warmup).
    assert "/health_generate" not in server.hits and "/model_info" not in server.hits


async def test_readiness_falls_back_to_health_and_remembers(make_client: ClientFactory) -> None:
    with canned_server({"/health": (200, "text/plain", "")}) as server:
        async with make_client() as client:
            probe = make_probe(client, server.port)
            results = [await probe.readiness() for _ in range(3)]
    assert all(r.status is ProbeStatus.READY and r.endpoint == "/health" for r in results)
    assert server.hits["/ready"] == 1  # 404 once (SGLang <= 0.4), then never asked again


async def test_model_info_alone_is_never_ready(make_client: ClientFactory) -> None:
    with canned_server({"/model_info": json_reply("{}")}) as server:
        async with make_client() as client:
            result = await make_probe(client, server.port).readiness()
    assert result.status is not ProbeStatus.READY and "/model_info" not in server.hits


async def test_refused_when_nothing_listens(make_client: ClientFactory) -> None:
    async with make_client() as client:
        result = await make_probe(client, free_port()).readiness()
    assert result.status is ProbeStatus.REFUSED


async def test_slow_server_times_out_as_stale_without_delaying_others(
    make_client: ClientFactory,
) -> None:
    import asyncio

    with (
        canned_server({"/ready": (200, "text/plain", "")}) as fast,
        canned_server({}) as slow,
    ):
        slow.routes["/ready"] = slow.slow((200, "text/plain", ""))
        async with make_client() as client:
            # 3 s: under two busy cores a loopback answer has taken 0.8 s, and the fast one
            # must come first for a reason other than luck
            slow_probe = make_probe(client, slow.port, timeout=3.0)
            fast_probe = make_probe(client, fast.port, timeout=10.0)
            finished: list[str] = []

            async def probe(name: str, p: ServerProbe) -> Readiness:
                result = await p.readiness()
                finished.append(name)
                return result

            slow_result, fast_result = await asyncio.gather(
                probe("slow", slow_probe), probe("fast", fast_probe)
            )
    assert slow_result.status is ProbeStatus.TIMEOUT
    assert "no answer within 3s" in slow_result.detail
    assert fast_result.status is ProbeStatus.READY
    # not delayed by the slow one: answered before the slow one's timeout ended it
    assert finished == ["fast", "slow"]


async def test_generating_probe_waits_past_the_cheap_timeout(make_client: ClientFactory) -> None:
    """0.5.23's /health_generate answers after >= 1 s: the generating probe waits up to
    HEALTH_TIMEOUT_S (above SGLang's 20 s), whatever the cheap probes' timeout."""
    import time

    with canned_server({}) as server:

        def slow_ok() -> Reply:
            time.sleep(1.2)  # as 0.5.23's answers: after >= 1 s
            return OK

        server.routes["/health_generate"] = slow_ok
        async with make_client() as client:
            probe = make_probe(client, server.port, timeout=0.3)
            result = await probe.health_generate()
    assert (result.status, result.endpoint) == (ProbeStatus.READY, "/health_generate")
    assert result.latency_s >= 1.2
    assert HEALTH_TIMEOUT_S > 20


async def test_load_from_metrics(make_client: ClientFactory) -> None:
    with canned_server({"/metrics": metrics_reply()}) as server:
        async with make_client() as client:
            load = await make_probe(client, server.port).load()
    assert load is not None and load.source == "/metrics"
    assert (load.running, load.queued) == (14, 34)
    assert load.gen_throughput == pytest.approx(1934.52)
    assert load.token_usage == pytest.approx(0.03)  # full-attention usage, not the max-of gauge
    assert load.mamba_usage == pytest.approx(0.81)
    assert load.accept_len == pytest.approx(3.21)
    assert load.max_total_num_tokens == 798080


async def test_load_falls_back_to_v1_loads_then_get_load(make_client: ClientFactory) -> None:
    loads = {
        "loads": [
            {"dp_rank": 0, "num_running_reqs": 3, "num_waiting_reqs": 5, "token_usage": 0.2},
            {"dp_rank": 1, "num_running_reqs": 4, "num_waiting_reqs": 1, "token_usage": 0.4},
        ]
    }
    with canned_server({"/v1/loads": json_reply(json.dumps(loads))}) as server:
        async with make_client() as client:
            load = await make_probe(client, server.port).load()
    assert load is not None and load.source == "/v1/loads"
    assert (load.running, load.queued, load.token_usage) == (7, 6, 0.4)

    # 0.5.17's /get_load (tests/fixtures/real_sglang/0.5.17/*/get_load.json's keys): num_reqs
    # counts the running and the waiting requests (``num_running_reqs + num_waiting_reqs``).
    old = [{"dp_rank": 0, "num_reqs": 9, "num_waiting_reqs": 2, "num_tokens": 0, "ts_tic": 1.0}]
    with canned_server({"/get_load": json_reply(json.dumps(old))}) as server:
        async with make_client() as client:
            load = await make_probe(client, server.port).load()
    assert load is not None and (load.source, load.running, load.queued) == ("/get_load", 7, 2)


async def test_load_reuses_the_reading_of_an_unchanged_metrics_body(
    make_client: ClientFactory,
) -> None:
    busier = (200, "text/plain", "sglang:num_running_reqs 15\nsglang:num_queue_reqs 0\n")
    with canned_server({"/metrics": [metrics_reply(), metrics_reply(), busier]}) as server:
        async with make_client() as client:
            probe = make_probe(client, server.port)
            first, same, changed = [await probe.load() for _ in range(3)]
    assert server.hits["/metrics"] == 3
    assert first is not None and (first.running, first.queued) == (14, 34)
    assert same is first  # not scanned again
    assert changed is not None and (changed.running, changed.queued) == (15, 0)


async def test_server_info_effective_values(make_client: ClientFactory) -> None:
    body = (FIXTURES / "server_info.json").read_text()
    with canned_server({"/get_server_info": json_reply(body)}) as server:
        async with make_client() as client:
            info = await make_probe(client, server.port).server_info()
    assert info is not None
    assert info.max_running_effective == 40
    assert info.max_running_requested == 64
    assert info.max_mamba_cache_size == 200
    assert info.max_total_num_tokens == 798080
    assert info.version == "0.5.23"


async def test_load_is_none_when_server_is_down(make_client: ClientFactory) -> None:
    async with make_client() as client:
        probe = make_probe(client, free_port())
        assert await probe.load() is None
        assert await probe.server_info() is None


def test_parse_metrics_sums_ranks_and_ignores_other_families() -> None:
    text = (
        'sglang:num_running_reqs{dp_rank="0"} 2\n'
        'sglang:num_running_reqs{dp_rank="1"} 5\n'
        'sglang:mamba_usage{dp_rank="0"} 0.1\n'
        'sglang:mamba_usage{dp_rank="1"} 0.7\n'
        'sglang:num_running_reqs_offline{dp_rank="0"} 100\n'
    )
    load = parse_metrics(text)
    assert load.running == 7 and load.mamba_usage == pytest.approx(0.7)
    assert load.queued is None


def test_parse_metrics_label_values_with_braces_and_timestamps() -> None:
    text = (
        'sglang:num_queue_reqs{model_name="odd} name{",dp_rank="0"} 3 1700000000000\n'
        'sglang:num_queue_reqs{model_name="a,b=\\"c\\"",dp_rank="1"} 4\n'
        "sglang:gen_throughput 12.5\n"
    )
    load = parse_metrics(text)
    assert load.queued == 7 and load.gen_throughput == pytest.approx(12.5)


def test_parse_loads_json_tolerates_junk() -> None:
    assert parse_loads_json("nonsense", "/v1/loads").running is None


def test_parse_metrics_reads_the_progress_counters() -> None:
    text = (
        'sglang:realtime_tokens_total{mode="decode"} 1200.0\n'
        'sglang:realtime_tokens_total{mode="prefill_compute"} 300.0\n'
        "sglang:generation_tokens_total 900.0\n"
        "sglang:num_requests_total 3.0\n"
        "sglang:num_running_reqs 2\n"
    )
    load = parse_metrics(text)
    assert load.progress == (1500.0, 900.0, 3.0)
    loads = parse_loads_json(
        {
            "loads": [
                {"num_running_reqs": 1, "total_prefill_uncached_tokens": 40, "num_used_tokens": 7}
            ]
        },
        "/v1/loads",
    )
    assert loads.progress == (40.0, 7.0)


def test_parse_metrics_agrees_with_prometheus_client_on_an_exposition() -> None:
    """The direct line parse reads what prometheus_client's parser reads, on a body written by
    prometheus_client itself (labels with quotes and braces, counters with _created samples,
    families the console skips, NaN and +Inf values)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.metrics_core import Metric
    from prometheus_client.parser import text_string_to_metric_families

    class Collector:
        def collect(self) -> Iterator[Metric]:
            for rank in ("0", "1"):
                labels = ['odd} {name"', rank]
                for name, value in (
                    ("num_running_reqs", 3.0 + int(rank)),
                    ("num_queue_reqs", 2.0),
                    ("gen_throughput", 41.5),
                    ("full_token_usage", 0.25 + int(rank) / 10),
                    ("mamba_usage", float("nan") if rank == "1" else 0.5),
                    ("spec_accept_length", 2.5 + int(rank)),
                    ("max_total_num_tokens", 123456.0),
                    ("num_grammar_queue_reqs", float("inf")),
                ):
                    gauge = GaugeMetricFamily(f"sglang:{name}", "doc", labels=["m", "r"])
                    gauge.add_metric(labels, value)
                    yield gauge
                counter = CounterMetricFamily("sglang:realtime_tokens", "doc", labels=["m", "r"])
                counter.add_metric(labels, 1000.0 + int(rank), created=1.7e9)
                yield counter

    registry = CollectorRegistry()
    registry.register(Collector())
    text = generate_latest(registry).decode()
    load = parse_metrics(text)
    oracle: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            oracle.setdefault(sample.name, []).append(float(sample.value))
    assert load.running == sum(oracle["sglang:num_running_reqs"]) == 7
    assert load.queued == 4
    assert load.gen_throughput == pytest.approx(sum(oracle["sglang:gen_throughput"]))
    assert load.token_usage == pytest.approx(max(oracle["sglang:full_token_usage"]))
    assert load.accept_len == pytest.approx(3.0)
    assert load.max_total_num_tokens == 123456
    assert load.progress == (sum(oracle["sglang:realtime_tokens_total"]),)


def test_parse_metrics_refuses_a_sample_without_a_value() -> None:
    with pytest.raises(ValueError, match="without a value"):
        parse_metrics('sglang:num_running_reqs{a="b"}\n')
