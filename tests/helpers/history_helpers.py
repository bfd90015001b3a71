"""Shared helpers of the history tests: a simulated fleet under load, polled as the console polls
it, every snapshot handed to the history recorder the console uses."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from fleet_helpers import poll_until
from sim_helpers import Clients, running_sim

from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import FleetSnapshot, ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.simulated import SimulatedSource
from tui.history import HistoryRecorder


async def record(
    tmp_path: Path, store_path: Path, gpus: int = 1, seconds: float = 17.0
) -> list[FleetSnapshot]:
    """``gpus`` simulated servers (20x real time) under load, polled four times a second for
    ``seconds``, every snapshot handed to the recorder as the console does; returns the live
    snapshots, oldest first."""
    args = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics"]
    live: list[FleetSnapshot] = []
    with contextlib.ExitStack() as stack:
        sims = [
            stack.enter_context(running_sim([*args, "--sim-gpu-index", str(gpu)], tmp_path))
            for gpu in range(gpus)
        ]
        spec = FleetSpec(tuple(ServerSpec(gpu_index=i, port=s.port) for i, s in enumerate(sims)))
        monitor = FleetMonitor(spec, SimulatedSource(tmp_path / "simgpu"), probe_timeout=2.0)
        recorder = HistoryRecorder.at(store_path)
        try:
            await poll_until(monitor, lambda s: all(
                p.server is not None and p.server.state is ServerState.READY for p in s.panels
            ))  # fmt: skip
            clients = [Clients(sim.url, 12, 6000) for sim in sims]
            start = (await monitor.poll()).taken_at
            while True:
                snapshot = await monitor.poll()
                if snapshot.taken_at - start > seconds:
                    break
                live.append(snapshot)
                recorder.add_fleet(snapshot)
                await asyncio.sleep(0.25)  # the console's cadence, shortened
            for each in clients:
                each.join(120)
        finally:
            await asyncio.to_thread(recorder.close)
            await monitor.aclose()
    return live
