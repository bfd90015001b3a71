"""The simulated GPU source against records written by the test."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from tui.gpu import sim_records
from tui.gpu.cli import main as gpus_main
from tui.gpu.simulated import DRIVER_RESERVED_BYTES, SimulatedSource
from tui.gpu.source import open_gpu_source

GIB = 1024**3


def _record(
    proc: psutil.Process, used: int, util: float, create_time: float | None = None
) -> sim_records.SimProcessRecord:
    return sim_records.SimProcessRecord(
        pid=proc.pid,
        create_time=proc.create_time() if create_time is None else create_time,
        used_bytes=used,
        utilization_gpu=util,
        name="sglang::scheduler",
    )


def test_memory_is_the_sum_of_live_processes(tmp_path: Path, child: psutil.Process) -> None:
    me = psutil.Process()
    device = sim_records.ensure_device(tmp_path, 0, "h200")
    sim_records.ensure_device(tmp_path, 1, "h200")
    sim_records.publish_process(tmp_path, 0, _record(child, 60 * GIB, 80.0))
    sim_records.publish_process(tmp_path, 0, _record(me, 2 * GIB, 10.0))
    source = SimulatedSource(tmp_path)
    gpu0, gpu1 = source.sample()
    assert gpu0.memory_used == 62 * GIB + DRIVER_RESERVED_BYTES
    assert gpu0.memory_free == device.memory_total - gpu0.memory_used
    assert gpu0.utilization_gpu == 80.0
    assert sorted(p.pid for p in gpu0.processes) == sorted([child.pid, me.pid])
    assert gpu0.source == "sim" and gpu0.name == "NVIDIA H200"
    assert gpu1.memory_used == DRIVER_RESERVED_BYTES and gpu1.utilization_gpu == 0.0
    # A busy GPU runs hotter, draws more and clocks higher than an idle one.
    assert gpu0.temperature_c is not None and gpu1.temperature_c is not None
    assert gpu0.temperature_c > gpu1.temperature_c
    assert gpu0.power_w is not None and gpu1.power_w is not None
    assert gpu0.power_w > gpu1.power_w
    assert gpu0.sm_clock_mhz is not None and gpu1.sm_clock_mhz is not None
    assert gpu0.sm_clock_mhz > gpu1.sm_clock_mhz
    assert gpu0.fan_percent is None
    assert "2 x NVIDIA H200" in source.describe()


def test_the_servers_speed_is_said_and_kept_through_a_restart(
    tmp_path: Path, child: psutil.Process
) -> None:
    sim_records.ensure_device(tmp_path, 0, "b200")
    sim_records.ensure_device(tmp_path, 1, "b200")
    source = SimulatedSource(tmp_path)
    source.sample()
    assert source.describe() == f"simulated: 2 x NVIDIA B200 under {tmp_path}"  # none said
    fast = replace(_record(child, 50 * GIB, 90.0), speed=20.0)
    sim_records.publish_process(tmp_path, 0, fast)
    source.sample()
    assert source.describe() == f"simulated x20: 2 x NVIDIA B200 under {tmp_path}"
    me = psutil.Process()
    sim_records.publish_process(tmp_path, 1, replace(_record(me, GIB, 1.0), speed=2.5))
    source.sample()
    assert source.describe().startswith("simulated x2.5/x20: ")
    child.kill()
    child.wait(timeout=10)
    sim_records.withdraw_process(tmp_path, 1, me.pid)
    source.sample()  # every server down (a full-fleet restart): the fleet's speed stays said
    assert source.describe().startswith("simulated x2.5/x20: ")


def test_dead_process_releases_memory(tmp_path: Path, child: psutil.Process) -> None:
    sim_records.ensure_device(tmp_path, 0, "b200")
    sim_records.publish_process(tmp_path, 0, _record(child, 50 * GIB, 90.0))
    source = SimulatedSource(tmp_path)
    assert source.sample()[0].memory_used == 50 * GIB + DRIVER_RESERVED_BYTES
    child.kill()
    child.wait(timeout=10)
    (gpu,) = source.sample()
    assert gpu.memory_used == DRIVER_RESERVED_BYTES
    assert gpu.processes == ()
    assert gpu.utilization_gpu == 0.0


def test_reused_pid_with_other_start_time_is_ignored(tmp_path: Path) -> None:
    me = psutil.Process()
    sim_records.ensure_device(tmp_path, 0, "h200")
    sim_records.publish_process(
        tmp_path, 0, _record(me, 30 * GIB, 50.0, create_time=me.create_time() - 3600)
    )
    (gpu,) = SimulatedSource(tmp_path).sample()
    assert gpu.memory_used == DRIVER_RESERVED_BYTES
    assert gpu.processes == ()


def test_memory_never_exceeds_total(tmp_path: Path) -> None:
    me = psutil.Process()
    device = sim_records.ensure_device(tmp_path, 0, "h100")
    sim_records.publish_process(tmp_path, 0, _record(me, device.memory_total, 100.0))
    (gpu,) = SimulatedSource(tmp_path).sample()
    assert gpu.memory_used == device.memory_total and gpu.memory_free == 0


def test_auto_falls_back_to_sim_without_driver(tmp_path: Path) -> None:
    from gpu_helpers import failing_pynvml

    sim_records.ensure_device(tmp_path, 3, "b200")
    source = open_gpu_source(
        "auto", sim_root=tmp_path, loader=lambda: failing_pynvml("LibraryNotFound")
    )
    assert source.kind == "sim"
    assert [g.index for g in source.sample()] == [3]


def test_cli_prints_json_of_the_simulated_fleet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path))
    sim_records.ensure_device(tmp_path / "simgpu", 0, "b200")
    sim_records.ensure_device(tmp_path / "simgpu", 1, "b200")
    assert gpus_main(["--json", "--source", "sim"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["index"] for r in rows] == [0, 1]
    assert all(r["source"] == "sim" and r["memory_used"] == DRIVER_RESERVED_BYTES for r in rows)
    assert rows[0]["taken_at"] == pytest.approx(time.time(), abs=30)


def test_cli_without_any_source_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path))
    assert gpus_main(["--source", "sim"]) == 1
    assert f"no simulated fleet under {tmp_path / 'simgpu'}" in capsys.readouterr().out
