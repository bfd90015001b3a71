"""A server relaunched on the same GPU and log path is followed: new pid, new launch's lines.

Real simulated servers (``gpufleet sim``), a real rotation (``tui.control.launch.rotate_log``) and
the real fleet record; process discovery is held off after its first scan, so the relaunched
server can only be known from the record.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
from fleet_helpers import poll_until
from sim_helpers import running_sim

from tui import paths
from tui.control.launch import rotate_log
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import FleetSnapshot, ServerSnapshot, ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.simulated import DRIVER_RESERVED_BYTES, SimulatedSource
from tui.state.fleet_state import ProcessRecord, put_record

GPU = 3
FAST = ["--sim-speed", "100", "--sim-startup-seconds", "1", "--enable-metrics"]
FAST += ["--sim-gpu-index", str(GPU), "--max-running-requests", "64"]


def _server(snap: FleetSnapshot) -> ServerSnapshot:
    server = snap.panels[0].server
    assert server is not None
    return server


def _mamba_lines(server: ServerSnapshot) -> list[str]:
    return [line for line in server.allocation_lines if "Mamba Cache" in line]


async def test_relaunch_on_the_same_gpu_and_log(isolated_state: Path) -> None:
    first_args = [*FAST, "--max-mamba-cache-size", "200"]
    # Listening before the monitor's first poll: its one discovery scan (held off after it)
    # must find the first server by its port; a scan before the bind found nothing, and the
    # server then read as ready with no pid (seen once in a full run).
    with running_sim(first_args, isolated_state, wait_healthy=True) as first:
        spec = FleetSpec((ServerSpec(GPU, first.port),))  # no log path: from the process
        monitor = FleetMonitor(
            spec,
            SimulatedSource(paths.sim_gpu_dir()),
            probe_timeout=2.0,
            discovery_interval=3600.0,
        )
        try:
            snap = await poll_until(monitor, lambda s: _server(s).state is ServerState.READY)
            old = _server(snap)
            assert old.pid == first.proc.pid and old.mamba_slots == 200
            assert old.log_path == str(first.log_path)
            assert "max_mamba_cache_size: 200" in _mamba_lines(old)[0]

            monitor.mark_stopping(GPU)
            assert _server(await monitor.poll()).state is ServerState.STOPPING
            os.killpg(first.proc.pid, signal.SIGKILL)
            first.proc.wait(10)
            snap = await poll_until(
                monitor,
                lambda s: (
                    _server(s).state is ServerState.STOPPED
                    and s.panels[0].gpu is not None
                    and s.panels[0].gpu.memory_used == DRIVER_RESERVED_BYTES
                ),
            )
            port, log_path = first.port, first.log_path
        except BaseException:
            await monitor.aclose()
            raise

    try:
        rotate_log(log_path)  # what tui.control.launch does before a relaunch
        second_args = [*FAST, "--max-mamba-cache-size", "100"]
        with running_sim(second_args, isolated_state, port=port, wait_healthy=False) as second:
            assert second.log_path == log_path
            proc = psutil.Process(second.proc.pid)
            put_record(
                ProcessRecord(
                    gpu=GPU,
                    port=port,
                    pid=proc.pid,
                    pgid=proc.pid,
                    create_time=proc.create_time(),
                    cmdline=tuple(proc.cmdline()),
                    log_path=str(log_path),
                )
            )
            snap = await poll_until(
                monitor, lambda s: _server(s).pid == second.proc.pid, deadline_s=10.0
            )
            new = _server(snap)
            assert new.state is ServerState.STARTING
            assert new.log_path == str(log_path)
            # Nothing from the previous launch survives the rotation.
            assert all("max_mamba_cache_size: 200" not in line for line in new.allocation_lines)
            assert new.mamba_slots != 200 and new.ready_at is None

            snap = await poll_until(monitor, lambda s: _server(s).state is ServerState.READY)
            new = _server(snap)
            assert new.pid == second.proc.pid and new.mamba_slots == 100
            assert ["max_mamba_cache_size: 100" in line for line in _mamba_lines(new)] == [True]
            assert new.ready_at is not None and old.ready_at is not None
            assert new.ready_at > old.ready_at
            assert log_path.with_name(log_path.name + ".1").exists()
    finally:
        await monitor.aclose()
