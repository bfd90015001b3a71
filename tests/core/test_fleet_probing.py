"""The monitor's probe schedule: the refresh uses /ready (cheap), never awaits SGLang's
generating /health_generate (>= 1 s in 0.5.23), which runs in the background every interval."""

from __future__ import annotations

import asyncio
import time

from servers_helpers import (
    OK,
    REMOTE,
    UNAVAILABLE,
    CannedServer,
    FakeClock,
    Route,
    canned_server,
    idle_metrics_reply,
    json_reply,
    polled_state,
)

from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.source import NoGpuSource


def _monitor(server: CannedServer, clock: FakeClock, probe_timeout: float = 2.0) -> FleetMonitor:
    # A remote-looking host: the test is about HTTP, not about finding processes.
    spec = FleetSpec((ServerSpec(0, server.port, host=REMOTE),))
    # ready_interval=0: these tests are about /ready vs the generation; skipping /ready while
    # /metrics answers is tested in test_ui_perf_probe.py.
    return FleetMonitor(
        spec, NoGpuSource("none"), probe_timeout=probe_timeout, ready_interval=0.0, clock=clock
    )


def _routes() -> dict[str, Route]:
    return {
        "/health_generate": OK,
        "/health": OK,
        "/ready": OK,
        "/metrics": idle_metrics_reply(),
        "/server_info": json_reply('{"max_running_requests": 64}'),
    }


async def _settle() -> None:
    """Let a background generating probe (a loopback request) finish."""
    for _ in range(50):
        await asyncio.sleep(0.01)


async def test_ready_server_gets_ready_each_poll_and_a_background_generation_per_interval() -> None:
    clock = FakeClock()
    with canned_server(_routes(), host=REMOTE) as server:
        monitor = _monitor(server, clock)
        try:
            assert await polled_state(monitor) is ServerState.READY
            await _settle()
            for _ in range(10):
                clock.now += 1.0
                assert await polled_state(monitor) is ServerState.READY
                await _settle()
            assert server.hits.get("/health_generate") == 1  # started once it was ready
            assert server.hits["/ready"] == 11
            assert "/health" not in server.hits

            clock.now += 25.0  # 35 s since the generation: another one, in the background
            assert await polled_state(monitor) is ServerState.READY
            await _settle()
            assert server.hits["/health_generate"] == 2

            server.routes["/ready"] = UNAVAILABLE  # draining, paused or UnHealthy
            clock.now += 1.0
            assert await polled_state(monitor) is ServerState.STARTING
            assert server.hits["/health_generate"] == 2  # a 503 from /ready is the answer
        finally:
            await monitor.aclose()


async def test_the_refresh_never_waits_for_the_generating_probe() -> None:
    clock = FakeClock()
    with canned_server(_routes(), host=REMOTE) as server:
        server.routes["/health_generate"] = server.slow(OK)  # a hung scheduler's 20 s
        monitor = _monitor(server, clock, probe_timeout=0.8)
        try:
            for _ in range(5):
                started = time.monotonic()
                assert await polled_state(monitor) is ServerState.READY
                assert time.monotonic() - started < 0.5
                clock.now += 40.0  # a generation due every poll: still one in flight at most
            assert server.hits["/health_generate"] == 1
        finally:
            await monitor.aclose()


async def test_starting_server_is_read_from_ready_alone() -> None:
    clock = FakeClock()
    routes = _routes()
    routes["/ready"] = [UNAVAILABLE, UNAVAILABLE, OK]
    with canned_server(routes, host=REMOTE) as server:
        monitor = _monitor(server, clock)
        try:
            states = []
            for _ in range(5):
                states.append(await polled_state(monitor))
                clock.now += 1.0
        finally:
            await monitor.aclose()
    assert states == [ServerState.STARTING] * 2 + [ServerState.READY] * 3
    assert server.hits["/ready"] == 5
    assert server.hits.get("/health_generate", 0) <= 1  # only once ready, in the background
    assert server.hits["/metrics"] == 3


async def test_without_ready_endpoint_the_background_health_is_the_readiness() -> None:
    clock = FakeClock()
    routes = _routes()
    del routes["/ready"], routes["/health_generate"]
    with canned_server(routes, host=REMOTE) as server:
        monitor = _monitor(server, clock)
        try:
            assert await polled_state(monitor) is ServerState.STARTING  # not answered yet
            await _settle()
            for _ in range(3):
                clock.now += 1.0
                assert await polled_state(monitor) is ServerState.READY
                await _settle()
        finally:
            await monitor.aclose()
    assert server.hits["/ready"] == 1  # its 404 is remembered
    assert server.hits["/health_generate"] == 1
    assert server.hits["/health"] >= 3


async def test_no_generating_probe_is_sent_to_a_server_being_stopped() -> None:
    """SGLang's drain waits for a generating probe as for a client's request (its
    ``HEALTH_CHECK_`` rid): one started as the stop begins holds the drain."""
    clock = FakeClock()
    with canned_server(_routes(), host=REMOTE) as server:
        monitor = _monitor(server, clock)
        try:
            assert await polled_state(monitor) is ServerState.READY
            clock.now += 1.0
            assert await polled_state(monitor) is ServerState.READY  # ready: its first is due
            await _settle()
            assert server.hits["/health_generate"] == 1
            monitor.mark_stopping(0)
            clock.now += 35.0  # a generation would be due
            await monitor.poll()
            await _settle()
            assert server.hits["/health_generate"] == 1
            monitor.mark_stopping(0, False)  # the stop was cancelled: due again
            clock.now += 1.0
            await monitor.poll()
            await _settle()
            assert server.hits["/health_generate"] == 2
        finally:
            await monitor.aclose()
