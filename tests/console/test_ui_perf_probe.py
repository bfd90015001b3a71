"""The console's probe cost: one request per ready server per poll while /metrics answers."""

from __future__ import annotations

from typing import Any

import pytest
from servers_helpers import (
    OK,
    REMOTE,
    UNAVAILABLE,
    FakeClock,
    Route,
    canned_server,
    five_polls_of_a_loaded_server,
    idle_metrics_reply,
    json_reply,
    polled_state,
)

from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.source import NoGpuSource
from tui.servers.keepalive import KeepAliveTransport


async def test_metrics_stand_for_readiness_between_ready_probes() -> None:
    routes: dict[str, Route] = {
        "/health_generate": OK,
        "/ready": OK,
        "/metrics": idle_metrics_reply(),
        "/server_info": json_reply('{"max_running_requests": 64}'),
    }
    clock = FakeClock()
    with canned_server(routes, host=REMOTE) as server:
        spec = FleetSpec((ServerSpec(0, server.port, host=REMOTE),))
        monitor = FleetMonitor(
            spec, NoGpuSource("none"), probe_timeout=2.0, ready_interval=10.0, clock=clock
        )
        try:
            assert await polled_state(monitor) is ServerState.READY
            for _ in range(9):  # within ready_interval: /metrics only
                clock.now += 1.0
                assert await polled_state(monitor) is ServerState.READY
            assert server.hits["/ready"] == 1  # the first poll's readiness
            assert server.hits["/metrics"] == 10
            assert server.hits.get("/health_generate", 0) <= 1  # in the background, if at all
            clock.now += 1.0  # ready_interval reached: readiness is asked again
            assert await polled_state(monitor) is ServerState.READY
            assert server.hits["/ready"] == 2
            routes["/metrics"] = UNAVAILABLE  # load stops answering: readiness the same poll
            routes["/ready"] = UNAVAILABLE
            routes["/health_generate"] = UNAVAILABLE
            clock.now += 1.0
            assert await polled_state(monitor) is not ServerState.READY
            assert server.hits["/ready"] == 3
        finally:
            await monitor.aclose()


async def test_the_monitor_probes_through_the_lean_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every probe of the monitor's own client on the loop goes through
    ``KeepAliveTransport.fetch`` (a request built once, read with a few bytes operations), none
    through httpx's Request and Response objects; the answers are read as before."""
    fetched: list[str] = []
    through_httpx: list[int] = []
    fetch, handle = KeepAliveTransport.fetch, KeepAliveTransport.handle_async_request

    async def counted_fetch(self: KeepAliveTransport, *args: Any) -> Any:
        fetched.append(args[2])
        return await fetch(self, *args)

    async def counted_handle(self: KeepAliveTransport, request: Any) -> Any:
        through_httpx.append(1)
        return await handle(self, request)

    monkeypatch.setattr(KeepAliveTransport, "fetch", counted_fetch)
    monkeypatch.setattr(KeepAliveTransport, "handle_async_request", counted_handle)
    served, hits = await five_polls_of_a_loaded_server()
    assert served.state is ServerState.READY
    assert (served.running, served.queued, served.max_running_requested) == (14, 34, 64)
    # The first poll's reads on the loop; the four steady /metrics reads in the poll's batch
    # (tui.servers.batch_fetch), off the loop: the server saw all five.
    assert fetched.count("/metrics") == 1 and fetched.count("/ready") == 1
    assert hits["/metrics"] == 5
    assert through_httpx == []
