"""A server without ``/ready`` (SGLang <= 0.5.19) reads ready on its log's ready line, at once.

The real 0.5.17 answers ``/health`` by generating one token (>= 1 s) and has no ``/ready``; the
monitor's ``/health`` in flight at the ready line began before it (a 503 from the warm-up, or no
answer yet). Seen on the real server: ``gpufleet status`` said ``starting`` (exit 1) a moment
after ``The server is fired up and ready to roll!``. The server here is ``gpufleet sim
--sim-build 0.5.17`` with the recorded ``base`` scenario's flags.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from real0517_helpers import running_0517

from tui import paths
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.simulated import SimulatedSource


async def test_the_first_poll_after_the_ready_line_reads_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(paths.STATE_ENV, str(tmp_path))
    with running_0517("base", tmp_path, speed=5.0) as sim:
        assert sim.wait_log("fired up and ready to roll", 30), sim.log()[-2000:]
        spec = ServerSpec(0, sim.port, log_path=str(sim.log_path))
        monitor = FleetMonitor(
            FleetSpec((spec,)), SimulatedSource(paths.sim_gpu_dir()), discovery_interval=0
        )
        try:
            snap = await monitor.poll()
            server = snap.panels[0].server
            assert server is not None
            # One poll, no /health answer yet (it takes >= 1 s and is never awaited by a poll):
            # the line decides.
            assert server.state is ServerState.READY, server
        finally:
            await monitor.aclose()
