"""STOPPING: shown from mark_stopping until the server is gone; refused for unknown GPUs."""

from __future__ import annotations

import httpx
import pytest
from servers_helpers import canned_server

from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.source import NoGpuSource

REMOTE = "127.0.0.2"
"""Loopback, but not an address the monitor treats as local (no process discovery)."""
OK = (200, "text/plain", "")


async def _state(monitor: FleetMonitor) -> ServerState:
    server = (await monitor.poll()).panels[0].server
    assert server is not None
    return server.state


async def test_stopping_until_the_server_stops_answering() -> None:
    # No keep-alive: once the server is shut, a new connection is refused as for a dead server.
    client = httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0))
    try:
        with canned_server({"/health_generate": OK, "/ready": OK}, host=REMOTE) as server:
            spec = FleetSpec((ServerSpec(4, server.port, host=REMOTE),))
            monitor = FleetMonitor(spec, NoGpuSource("none"), client=client, probe_timeout=2.0)
            assert await _state(monitor) is ServerState.READY
            monitor.mark_stopping(4)
            assert await _state(monitor) is ServerState.STOPPING
            monitor.mark_stopping(4, stopping=False)  # the stop was cancelled
            assert await _state(monitor) is ServerState.READY
            monitor.mark_stopping(4)
            server.routes["/ready"] = server.routes["/health_generate"] = (503, "text/plain", "")
            assert await _state(monitor) is ServerState.STOPPING  # draining answers 503
            with pytest.raises(
                ValueError, match=r"gpu=5 has no server in the fleet; allowed \[4\]"
            ):
                monitor.mark_stopping(5)
        # The server is gone: the mark clears and the usual rules apply.
        assert await _state(monitor) is ServerState.ABSENT
        assert await _state(monitor) is ServerState.ABSENT
    finally:
        await client.aclose()
