"""Probe cost on a ready server: /health_generate (a generation) every ~30 s, /ready between."""

from __future__ import annotations

from servers_helpers import (
    OK,
    REMOTE,
    UNAVAILABLE,
    CannedServer,
    FakeClock,
    canned_server,
    json_reply,
    metrics_reply,
    polled_state,
)

from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.source import NoGpuSource


def _monitor(server: CannedServer, clock: FakeClock) -> FleetMonitor:
    # A remote-looking host: the test is about HTTP, not about finding processes.
    spec = FleetSpec((ServerSpec(0, server.port, host=REMOTE),))
    # ready_interval=0: these tests are about the /ready vs generation schedule; skipping
    # /ready while /metrics answers is tested in test_ui_perf_probe.py.
    return FleetMonitor(
        spec, NoGpuSource("none"), probe_timeout=2.0, ready_interval=0.0, clock=clock
    )


def _routes() -> dict[str, object]:
    return {
        "/health_generate": OK,
        "/health": OK,
        "/ready": OK,
        "/metrics": metrics_reply(),
        "/server_info": json_reply('{"max_running_requests": 64}'),
    }


async def test_ready_server_gets_ready_each_poll_and_a_generation_every_interval() -> None:
    clock = FakeClock()
    with canned_server(_routes(), host=REMOTE) as server:  # type: ignore[arg-type]
        monitor = _monitor(server, clock)
        try:
            assert await polled_state(monitor) is ServerState.READY
            assert server.hits.get("/health_generate") == 1
            for _ in range(10):
                clock.now += 1.0
                assert await polled_state(monitor) is ServerState.READY
            assert server.hits.get("/health_generate") == 1
            assert server.hits.get("/ready") == 10
            assert server.hits.get("/metrics") == 11
            assert "/health" not in server.hits

            clock.now += 25.0  # 35 s since the generation
            assert await polled_state(monitor) is ServerState.READY
            assert server.hits["/health_generate"] == 2
            assert server.hits["/ready"] == 10

            server.routes["/ready"] = UNAVAILABLE  # paused or unhealthy: ask the truth now
            clock.now += 1.0
            assert await polled_state(monitor) is ServerState.READY
            assert (server.hits["/ready"], server.hits["/health_generate"]) == (11, 3)

            server.routes["/health_generate"] = UNAVAILABLE
            clock.now += 1.0
            assert await polled_state(monitor) is ServerState.STARTING
            for _ in range(3):  # not ready: the generating probe every poll, /ready not asked
                clock.now += 1.0
                await monitor.poll()
            assert (server.hits["/ready"], server.hits["/health_generate"]) == (12, 7)
        finally:
            await monitor.aclose()


async def test_starting_server_gets_the_generating_probe_then_ready_after() -> None:
    clock = FakeClock()
    routes = _routes()
    routes["/health_generate"] = [UNAVAILABLE, UNAVAILABLE, OK]
    with canned_server(routes, host=REMOTE) as server:  # type: ignore[arg-type]
        monitor = _monitor(server, clock)
        try:
            states = []
            for _ in range(5):
                states.append(await polled_state(monitor))
                clock.now += 1.0
        finally:
            await monitor.aclose()
    assert states == [ServerState.STARTING] * 2 + [ServerState.READY] * 3
    assert server.hits["/health_generate"] == 3
    assert server.hits["/ready"] == 2
    assert "/metrics" in server.hits and server.hits["/metrics"] == 3


async def test_without_ready_endpoint_falls_back_to_health() -> None:
    clock = FakeClock()
    routes = _routes()
    del routes["/ready"]
    with canned_server(routes, host=REMOTE) as server:  # type: ignore[arg-type]
        monitor = _monitor(server, clock)
        try:
            for _ in range(4):
                assert await polled_state(monitor) is ServerState.READY
                clock.now += 1.0
        finally:
            await monitor.aclose()
    assert server.hits["/ready"] == 1  # its 404 is remembered
    assert server.hits["/health"] == 3
    assert server.hits["/health_generate"] == 1
