"""A GPU's joules: the driver's energy counter where it has one, its power samples integrated
where it has not, each held to an integration of the power samples done here; and the simulated
GPUs' counter, consistent with their own power readings while a simulated server serves."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from gpu_helpers import NOT_SUPPORTED, FakeDevice, make_fake_pynvml
from sim_helpers import Clients, running_sim

from tui.gpu import sim_records
from tui.gpu.energy import MAX_GAP_S, EnergyMeter
from tui.gpu.nvml import NvmlSource
from tui.gpu.simulated import SimulatedSource


def trapezoid(samples: list[tuple[float, float]]) -> float:
    """Joules from (t, watts) samples, integrated here (the test's own arithmetic)."""
    total = 0.0
    for (t0, w0), (t1, w1) in itertools.pairwise(samples):
        total += (t1 - t0) * (w0 + w1) / 2
    return total


def test_without_a_counter_the_power_samples_are_integrated() -> None:
    samples = [(0.0, 100.0), (1.0, 300.0), (2.5, 300.0), (3.0, 50.0), (7.0, 700.0)]
    meter = EnergyMeter()
    for t, watts in samples:
        meter.power(t, watts)
    meter.energy_counter(7.0, None)  # NotSupported
    assert meter.joules == pytest.approx(trapezoid(samples))
    assert meter.counter is False
    # A gap longer than MAX_GAP_S is not drawn as a straight line: nothing was measured.
    meter.power(7.0 + MAX_GAP_S + 1, 700.0)
    assert meter.joules == pytest.approx(trapezoid(samples))


def test_the_counter_replaces_the_power_between_its_readings() -> None:
    meter = EnergyMeter()
    meter.energy_counter(0.0, 5_000_000)  # 5 kJ since the driver loaded: not ours
    meter.power(0.0, 400.0)
    meter.power(1.0, 400.0)
    assert meter.joules == pytest.approx(400.0)  # bridged by the power until the next read
    meter.energy_counter(2.0, 5_000_000 + 820_000)  # the driver's own integral: 820 J
    assert meter.joules == pytest.approx(820.0) and meter.counter is True
    meter.power(2.0, 400.0)
    meter.power(3.0, 600.0)
    assert meter.joules == pytest.approx(820.0 + 500.0)
    # The driver reloaded (its counter began again): that interval counts nothing.
    meter.energy_counter(4.0, 1_000)
    assert meter.joules == pytest.approx(820.0)
    meter.energy_counter(1004.0, 1_000 + 300_000)  # however long after: exact
    assert meter.joules == pytest.approx(1120.0)


def test_nvml_reads_the_counter_and_says_none_where_unsupported() -> None:
    lib = make_fake_pynvml(
        [FakeDevice(energy=123_456_789), FakeDevice(uuid="GPU-fake-1", energy=NOT_SUPPORTED)]
    )
    source = NvmlSource(lib)
    first, second = source.sample_slow()
    assert first.energy_mj == 123_456_789 and second.energy_mj is None


def busy_record(
    proc: psutil.Process, util: float, busy_s: float, at: float
) -> sim_records.SimProcessRecord:
    return sim_records.SimProcessRecord(
        pid=proc.pid,
        create_time=proc.create_time(),
        used_bytes=1 << 30,
        utilization_gpu=util,
        busy_s=busy_s,
        at=at,
    )


def test_a_simulated_counter_keeps_a_departed_processs_share(tmp_path: Path) -> None:
    device = sim_records.ensure_device(tmp_path, 0, "h100")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        now = time.time()
        record = busy_record(psutil.Process(proc.pid), 50.0, busy_s=100.0, at=now)
        sim_records.publish_process(tmp_path, 0, record)
        source = SimulatedSource(tmp_path)
        (before,) = source.sample_slow()
    finally:
        proc.kill()
        proc.wait(10)
    (after,) = source.sample_slow()
    assert before.energy_mj is not None and after.energy_mj is not None
    assert after.energy_mj >= before.energy_mj  # never down when a server leaves
    # 100 busy seconds at the busy share of a 700 W part, beyond the idle power.
    busy_j = (0.85 - 0.12) * device.power_limit_w * 100.0
    assert before.energy_mj / 1000 > busy_j


def test_the_simulated_counter_is_the_integral_of_the_power_samples(tmp_path: Path) -> None:
    """A simulated server idle, then serving, then idle again: its GPU's energy counter moved
    by what the power readings of the same source integrate to."""
    args = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics"]
    with running_sim(args, tmp_path) as sim:
        source = SimulatedSource(tmp_path / "simgpu")  # the server's state directory
        (start,) = source.sample_slow()
        samples: list[tuple[float, float]] = []
        for g in source.sample():
            assert g.power_w is not None
            samples.append((g.taken_at, g.power_w))
        clients = Clients(sim.url, 8, 3000)
        deadline = time.monotonic() + 12.0
        while time.monotonic() < deadline:
            (gpu,) = source.sample()
            assert gpu.power_w is not None
            samples.append((gpu.taken_at, gpu.power_w))
            time.sleep(0.1)  # the sampling cadence under test, not a synchronisation
        assert clients.join(60) == [200] * 8
        (gpu,) = source.sample()
        assert gpu.power_w is not None
        samples.append((gpu.taken_at, gpu.power_w))
        (end,) = source.sample_slow()
    watts = {w for _, w in samples}
    assert len(watts) >= 2  # it served: the power moved
    assert start.energy_mj is not None and end.energy_mj is not None
    counted = (end.energy_mj - start.energy_mj) / 1000
    integrated = trapezoid(samples)
    assert counted == pytest.approx(integrated, rel=0.05)
