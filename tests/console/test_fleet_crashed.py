"""A crash is a crash: a server that died without being stopped is ``crashed``, with how it
ended when the kernel still knows, and every rate on its panel is blank.

On the console (Pilot, a real simulated server under load, SIGKILLed behind the console's back:
it said ``stopped``, the word of an orderly stop, and kept its rate) and in ``gpufleet status
--json`` after the fact (it said ``absent``). A server gpufleet stopped stays ``stopped``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from repo_paths import ROOT
from sim_helpers import Clients, in_flight, running_sim, wait_until

from bench.simfleet import FAST_APPLY, free_ports, kill_strays, sim_profile_text, stop_all
from tui import paths
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.simulated import SimulatedSource
from tui.ops.local import LocalFleet
from tui.ops.service import FleetOps
from tui.state.fleet_state import read_records
from tui.ui.app import FleetApp
from tui.ui.grid.gpu_panel import GpuPanelView

SIM = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics"]


def _lines(app: FleetApp) -> list[str]:
    for view in app.main_screen.query(GpuPanelView):
        if view.panel is not None:
            return [line.plain for line in view.lines()]
    return []


async def test_a_sigkilled_server_is_crashed_on_its_panel_within_2_s_with_blank_rates(
    isolated_state: Path,
) -> None:
    with running_sim(SIM, isolated_state) as sim:
        spec = FleetSpec((ServerSpec(0, sim.port, log_path=str(sim.log_path)),))
        monitor = FleetMonitor(spec, SimulatedSource(paths.sim_gpu_dir()))
        app = FleetApp(LocalFleet(FleetOps(), monitor, watching=True), poll_interval_s=1.0)
        try:
            async with app.run_test(size=(160, 50)) as pilot:
                Clients(sim.url, 8, max_tokens=100_000)
                assert wait_until(lambda: in_flight(sim.url) >= 8, 20)
                deadline = time.monotonic() + 40
                while not any(line.startswith("gen ") and any(c.isdigit() and c != "0" for c in
                              line.split("tok/s")[0]) for line in _lines(app)):  # fmt: skip
                    assert time.monotonic() < deadline, _lines(app)
                    await pilot.pause(0.05)
                assert _lines(app)[0].startswith("ready")
                # Behind the console's back: its whole group, SIGKILL. The test is its parent
                # and does not reap it yet, so the kernel still says how it ended.
                killed = time.monotonic()
                os.killpg(sim.proc.pid, signal.SIGKILL)
                while not _lines(app)[0].startswith("crashed"):
                    assert time.monotonic() - killed < 10, _lines(app)
                    await pilot.pause(0.02)
                shown_after = time.monotonic() - killed
                lines = _lines(app)
                server = app.fleet.panels[0].server
                assert server is not None and server.state is ServerState.CRASHED
        finally:
            await monitor.aclose()
        sim.proc.wait(10)
    assert shown_after < 2.0, shown_after
    assert "crashed: killed by SIGKILL" in lines, lines
    gen = next(line for line in lines if line.startswith("gen "))
    assert not any(c.isdigit() for c in gen.split("tok/s")[0]), gen  # blank, not its last rate
    assert not any(line.startswith("running ") and any(c.isdigit() for c in line) for line in lines)
    assert server.gen_throughput is None and server.running is None and server.queued is None


def _status(env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "tui", "status", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    return done.returncode, json.loads(done.stdout)


def test_status_calls_a_recorded_server_that_died_crashed_and_a_stopped_one_not(
    tmp_path: Path, isolated_state: Path
) -> None:
    """Two GPUs launched by ``gpufleet apply`` (another process: not the test's children, so
    their exit is reaped at once and unknowable). GPU 0 is SIGKILLed behind gpufleet's back;
    GPU 1 is stopped by gpufleet. A fresh ``gpufleet status`` never saw either running."""
    ports = free_ports(2)
    profile = tmp_path / "p.toml"
    profile.write_text(sim_profile_text("t-crash", [0, 1], ports, str(tmp_path / "logs"), "", 50.0))
    env = {**os.environ, paths.STATE_ENV: str(isolated_state)}
    try:
        apply = [sys.executable, "-m", "tui", "apply", str(profile), *FAST_APPLY]
        assert subprocess.run(apply, env=env, cwd=ROOT, capture_output=True).returncode == 0
        record = read_records()[0]
        os.killpg(record.pgid, signal.SIGKILL)
        assert wait_until(lambda: not Path(f"/proc/{record.pid}").exists(), 20)
        stop = [sys.executable, "-m", "tui", "sim-fleet", "stop", "--gpus", "1"]
        assert subprocess.run(stop, env=env, cwd=ROOT, capture_output=True).returncode == 0
        code, doc = _status(env)
    finally:
        stop_all()
        kill_strays(ports)
    gpus = {g["gpu"]: g for g in doc["gpus"]}
    crashed = gpus[0]
    assert crashed["state"] == "crashed", crashed
    assert crashed["pid"] == record.pid
    assert crashed["exit_status"] == "exit status unknown"
    assert crashed["gen_tokens_per_s"] is None and crashed["running"] is None
    assert gpus[1]["state"] in ("absent", "stopped") and gpus[1]["exit_status"] is None
    assert code == 2  # nothing of the fleet runs


def test_the_agent_s_metrics_say_crashed_too() -> None:
    """One word everywhere: the agent's state gauge has ``crashed`` (its rates absent)."""
    from prometheus_client import CollectorRegistry, generate_latest

    from tui.agent.metrics import AgentCollector, AgentView
    from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerSnapshot

    server = ServerSnapshot(
        port=30000, state=ServerState.CRASHED, pid=4242, exit_status="killed by SIGKILL"
    )
    snapshot = FleetSnapshot(panels=(GpuPanel(0, None, server),))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AgentCollector(lambda: AgentView("n1", snapshot)))
    text = generate_latest(registry).decode()
    assert 'gpufleet_server_state{gpu="0",node="n1",port="30000",state="crashed"} 1.0' in text
    assert 'state="stopped"} 0.0' in text
    assert "gpufleet_server_generation_tokens_per_second{" not in text
