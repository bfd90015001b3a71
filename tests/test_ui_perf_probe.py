"""The console's probe cost: one request per ready server per poll while /metrics answers."""

from __future__ import annotations

from servers_helpers import canned_server, json_reply, metrics_reply

from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.source import NoGpuSource

OK = (200, "text/plain", "")
UNAVAILABLE = (503, "text/plain", "")
REMOTE = "127.0.0.2"
"""Loopback, but not an address the monitor treats as local (no process discovery)."""


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def _state(monitor: FleetMonitor) -> ServerState:
    snap = await monitor.poll()
    server = snap.panels[0].server
    assert server is not None
    return server.state


async def test_metrics_stand_for_readiness_between_ready_probes() -> None:
    routes: dict[str, object] = {
        "/health_generate": OK,
        "/ready": OK,
        "/metrics": metrics_reply(),
        "/server_info": json_reply('{"max_running_requests": 64}'),
    }
    clock = FakeClock()
    with canned_server(routes, host=REMOTE) as server:  # type: ignore[arg-type]
        spec = FleetSpec((ServerSpec(0, server.port, host=REMOTE),))
        monitor = FleetMonitor(
            spec, NoGpuSource("none"), probe_timeout=2.0, ready_interval=10.0, clock=clock
        )
        try:
            assert await _state(monitor) is ServerState.READY
            for _ in range(9):  # within ready_interval: /metrics only
                clock.now += 1.0
                assert await _state(monitor) is ServerState.READY
            assert server.hits.get("/ready") is None
            assert server.hits["/metrics"] == 10
            assert server.hits["/health_generate"] == 1
            clock.now += 1.0  # ready_interval reached: readiness is asked again
            assert await _state(monitor) is ServerState.READY
            assert server.hits["/ready"] == 1
            routes["/metrics"] = UNAVAILABLE  # load stops answering: readiness the same poll
            routes["/ready"] = UNAVAILABLE
            routes["/health_generate"] = UNAVAILABLE
            clock.now += 1.0
            assert await _state(monitor) is not ServerState.READY
            assert server.hits["/ready"] == 2
        finally:
            await monitor.aclose()
