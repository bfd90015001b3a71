"""Energy per GPU and for the fleet: joules, mean power and output tokens per joule over the
window, a server restart counting its tokens from zero; and through the monitor, a simulated
GPU's energy counter and its server's tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import poll_until
from sim_helpers import Clients, running_sim

from tui.fleet.energy import EnergyWindow, FleetEnergy, GpuEnergy, fleet_energy
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import FleetSnapshot, ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.simulated import SimulatedSource


def test_watts_and_tokens_per_joule_over_the_window() -> None:
    window = EnergyWindow(window_s=60.0, thin_s=5.0)
    for t in range(0, 121):
        # 500 W, 1,000 tokens/s: 2 tokens per joule; the server's counter began at 7,000.
        window.add(float(t), 500.0 * t, 7_000.0 + 1_000.0 * t, epoch=1)
    energy = window.reading(60_000.0, counter=True)
    assert energy.window_s is not None and 60 <= energy.window_s <= 65
    assert energy.watts == pytest.approx(500.0)
    assert energy.tokens_per_joule == pytest.approx(2.0)
    assert energy.joules == 60_000.0 and energy.counter


def test_a_restart_counts_the_new_servers_tokens_from_zero() -> None:
    window = EnergyWindow(window_s=300.0, thin_s=1.0)
    window.add(0.0, 0.0, 50_000.0, epoch=1)  # its history before the window: not counted
    window.add(10.0, 1_000.0, 51_000.0, epoch=1)  # +1,000
    window.add(20.0, 2_000.0, 400.0, epoch=2)  # relaunched: +400 from zero
    window.add(30.0, 3_000.0, 900.0, epoch=2)  # +500
    energy = window.reading(3_000.0, counter=False)
    assert energy.tokens_per_joule == pytest.approx(1_900.0 / 3_000.0)
    # Without a server counter: joules and watts, no tokens per joule.
    bare = EnergyWindow(thin_s=1.0)
    bare.add(0.0, 0.0, None)
    bare.add(10.0, 700.0, None)
    assert bare.reading(700.0, False) == GpuEnergy(700.0, False, 10.0, 70.0, None)


def test_the_fleet_is_every_gpus_tokens_over_every_gpus_joules() -> None:
    a, b = EnergyWindow(thin_s=1.0), EnergyWindow(thin_s=1.0)
    for t in (0.0, 10.0):
        a.add(t, 1000.0 * t, 3000.0 * t, epoch=1)  # 3 tokens/J
        b.add(t, 500.0 * t, 0.0 * t, epoch=2)  # idle server: 0 tokens/J
    fleet = fleet_energy([(0, 10_000.0, a), (1, 5_000.0, b)])
    # pytest.approx stands in for the float on purpose: it compares equal to one near it
    approx_ratio = pytest.approx(30_000.0 / 15_000.0)
    assert fleet == FleetEnergy(15_000.0, 10.0, 1500.0, approx_ratio)  # type: ignore[arg-type]
    assert fleet_energy([]) is None


async def test_the_monitor_meters_a_simulated_gpu_and_its_server(tmp_path: Path) -> None:
    args = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics"]
    with running_sim(args, tmp_path) as sim:
        spec = FleetSpec((ServerSpec(gpu_index=0, port=sim.port),))
        source = SimulatedSource(tmp_path / "simgpu")
        monitor = FleetMonitor(spec, source, probe_timeout=2.0, discovery_interval=0)
        monitor.insight.slow_every_s = 1.0
        try:
            await poll_until(monitor, lambda s: s.panels[0].server is not None
                             and s.panels[0].server.state is ServerState.READY)  # fmt: skip
            clients = Clients(sim.url, 8, 4000)

            def measured(snap: FleetSnapshot) -> bool:
                energy = snap.panels[0].energy
                return energy is not None and (energy.tokens_per_joule or 0) > 0

            snap = await poll_until(monitor, measured, 60)
            assert clients.join(60) == [200] * 8
        finally:
            await monitor.aclose()
    energy = snap.panels[0].energy
    assert energy is not None and energy.counter  # the simulated driver's energy counter
    assert energy.joules > 0 and energy.watts is not None and energy.watts > 0
    assert snap.energy is not None and snap.energy.joules == energy.joules
    assert snap.energy.tokens_per_joule == pytest.approx(energy.tokens_per_joule)


def test_readings_before_the_servers_load_was_read_do_not_blank_tokens_per_joule() -> None:
    """A console's first readings (the server's load not read yet) carry no tokens: tokens per
    joule is over the readings that do, not blank for the whole window (the demo showed
    'energy – tok/J' for its first five minutes)."""
    window = EnergyWindow(window_s=300.0, thin_s=1.0)
    window.add(0.0, 0.0, None, epoch=1)
    window.add(5.0, 2_500.0, None, epoch=1)
    for t in range(10, 61, 5):
        # 500 W; 1,000 tokens/s from t=10: 2 tokens per joule where counted
        window.add(float(t), 500.0 * t, 1_000.0 * t, epoch=1)
    energy = window.reading(30_000.0, counter=True)
    assert energy.watts == pytest.approx(500.0) and energy.window_s == pytest.approx(60.0)
    assert energy.tokens_per_joule == pytest.approx(2.0)
    fleet = fleet_energy([(0, 30_000.0, window)])
    assert fleet is not None and fleet.tokens_per_joule == pytest.approx(2.0)
