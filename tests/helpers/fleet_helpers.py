"""Shared helpers of the fleet-monitor tests: a monitor of one simulated server, polled until a
condition holds."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

from tui import paths
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import FleetSnapshot, ServerSnapshot, ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.simulated import SimulatedSource
from tui.gpu.snapshot import GpuSnapshot


async def poll_until(
    monitor: FleetMonitor, done: Callable[[FleetSnapshot], bool], deadline_s: float = 60.0
) -> FleetSnapshot:
    """Poll ``monitor`` until ``done(snapshot)``; fail with the last snapshot after the deadline."""
    deadline = time.monotonic() + deadline_s
    snap = await monitor.poll()
    while not done(snap):
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached; last snapshot: {snap}")
        await asyncio.sleep(0.05)  # the monitor's own cadence, shortened; not a synchronisation
        snap = await monitor.poll()
    return snap


@contextlib.asynccontextmanager
async def sim_monitor(spec: ServerSpec) -> AsyncIterator[FleetMonitor]:
    """A monitor of the one server ``spec`` on the simulated GPUs (``paths.sim_gpu_dir()``):
    2 s probes, no discovery; closed on exit."""
    monitor = FleetMonitor(
        FleetSpec((spec,)),
        SimulatedSource(paths.sim_gpu_dir()),
        probe_timeout=2.0,
        discovery_interval=0,
    )
    try:
        yield monitor
    finally:
        await monitor.aclose()


def served(snap: FleetSnapshot, panel: int = 0) -> ServerSnapshot:
    """The server of panel ``panel`` (which must be there)."""
    server = snap.panels[panel].server
    assert server is not None, f"panel {panel} has no server: {snap}"
    return server


def reading(snap: FleetSnapshot, panel: int = 0) -> GpuSnapshot:
    """The GPU reading of panel ``panel`` (which must be there)."""
    gpu = snap.panels[panel].gpu
    assert gpu is not None, f"panel {panel} has no GPU reading: {snap}"
    return gpu


def first_state(snap: FleetSnapshot) -> ServerState:
    """The state of the first panel's server (which must be there)."""
    return served(snap).state


class MarksOnly:
    """A monitor (``tui.ops.local.Monitor``) that records the STOPPING marks an operation sets,
    in order, and follows nothing: an empty snapshot, no logs."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, bool]] = []
        """Each ``mark_stopping(gpu, stopping)``, in order."""

    async def poll(self) -> FleetSnapshot:
        return FleetSnapshot()

    def mark_stopping(self, gpu: int, stopping: bool = True) -> None:
        self.seen.append((gpu, stopping))

    def log_paths(self) -> dict[int, str]:
        return {}
