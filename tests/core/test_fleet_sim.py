"""The monitor against one real simulated SGLang server process (``gpufleet sim``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleet_helpers import first_state, poll_until, reading, served, sim_monitor
from repo_paths import ROOT as REPO

from bench.ports import free_port
from tui import paths
from tui.fleet.snapshot import ServerState
from tui.fleet.spec import ServerSpec
from tui.gpu.simulated import DRIVER_RESERVED_BYTES

GIB = 1024**3


@pytest.fixture
def sim_server(
    tmp_path: Path, isolated_state: Path
) -> Iterator[tuple[subprocess.Popen[bytes], ServerSpec]]:
    port = free_port()
    log = tmp_path / "sglang_gpu1.log"
    argv = [sys.executable, "-m", "tui", "sim", "--port", str(port), "--sim-gpu", "b200"]
    argv += ["--sim-model", "qwen3.6-27b", "--sim-gpu-index", "1", "--sim-startup-seconds", "1.5"]
    argv += ["--max-running-requests", "64", "--max-mamba-cache-size", "200"]
    argv += [
        "--speculative-algorithm",
        "EAGLE",
        "--mem-fraction-static",
        "0.93",
        "--enable-metrics",
    ]
    env = {**os.environ, paths.STATE_ENV: str(isolated_state), "PYTHONPATH": str(REPO)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True
        )
    try:
        yield proc, ServerSpec(1, port, log_path=str(log))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


async def test_sim_server_starting_ready_killed(
    sim_server: tuple[subprocess.Popen[bytes], ServerSpec], isolated_state: Path
) -> None:
    proc, spec = sim_server
    async with sim_monitor(spec) as monitor:
        snap = await poll_until(monitor, lambda s: first_state(s) is ServerState.STARTING)
        assert served(snap).pid == proc.pid
        snap = await poll_until(
            monitor,
            lambda s: (
                first_state(s) is ServerState.READY and served(s).max_running_effective is not None
            ),
        )
        panel = snap.panels[0]
        server = served(snap)
        assert panel.gpu_index == 1 and panel.gpu is not None and panel.gpu.source == "sim"
        assert panel.gpu.memory_used > 100 * GIB  # weights + pools + graphs of the aggressive plan
        assert server.kv_tokens == 796544  # 0.5.23: 100 MiB of the budget reserved (multimodal)
        assert server.mamba_slots == 200
        assert server.max_running_requested == 64
        assert server.max_running_effective == 40
        assert server.capped
        assert server.running is not None  # live load from /metrics
        assert any("Mamba Cache" in line for line in server.allocation_lines)

        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        snap = await poll_until(
            monitor,
            lambda s: (
                first_state(s) is ServerState.CRASHED  # killed, not stopped
                and s.panels[0].gpu is not None
                and reading(s).memory_used == DRIVER_RESERVED_BYTES
            ),
        )
        assert reading(snap).processes == ()
