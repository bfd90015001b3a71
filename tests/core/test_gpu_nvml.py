"""NVML source behaviour against an injected fake pynvml (no driver needed)."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest
from gpu_helpers import NOT_SUPPORTED, FakeDevice, failing_pynvml, make_fake_pynvml

from tui.gpu.nvml import NvmlSource, nvml_query
from tui.gpu.source import NoGpuSource, open_gpu_source, sample_slow


def test_nvml_query_turns_soft_errors_into_none() -> None:
    lib = make_fake_pynvml([])
    for name in ("NotSupported", "NoPermission", "Unknown", "FunctionNotFound"):
        error = getattr(lib, f"NVMLError_{name}")

        def boom(error: type[Exception] = error) -> None:
            raise error()

        assert nvml_query(boom, lib=lib) is None


def test_nvml_query_propagates_hard_errors_and_decodes_bytes() -> None:
    lib = make_fake_pynvml([])

    def lost() -> None:
        raise lib.NVMLError_GpuIsLost()

    with pytest.raises(lib.NVMLError_GpuIsLost):
        nvml_query(lost, lib=lib)
    assert nvml_query(lambda x: x, b"NVIDIA H200", lib=lib) == "NVIDIA H200"


def test_sample_reads_every_field_and_fan_is_none() -> None:
    me = os.getpid()
    devices = [
        FakeDevice(uuid="GPU-a", used=40 * 1024**3, processes=[(me, 39 * 1024**3)]),
        FakeDevice(uuid="GPU-b", gpu_util=88, processes=[(me, None)]),
    ]
    lib = make_fake_pynvml(devices)
    source = NvmlSource(lib)
    try:
        first, second = source.sample()
    finally:
        source.close()
    assert lib.initialised is False
    assert first.index == 0 and second.index == 1
    assert (first.uuid, first.name) == ("GPU-a", "NVIDIA H200")
    assert first.memory_used == 40 * 1024**3
    assert first.memory_free == devices[0].total - 40 * 1024**3
    assert first.utilization_gpu == 37.0 and second.utilization_gpu == 88.0
    assert first.power_w == pytest.approx(123.456)
    assert first.power_limit_w == pytest.approx(700.0)
    assert (first.sm_clock_mhz, first.mem_clock_mhz) == (1980, 2619)
    assert first.fan_percent is None
    assert first.source == "nvml"
    assert first.processes[0].used_bytes == 39 * 1024**3
    assert first.processes[0].name == psutil.Process(me).name()
    assert second.processes[0].used_bytes is None  # the driver said N/A


def test_unsupported_fields_are_not_asked_again() -> None:
    lib = make_fake_pynvml([FakeDevice(temp=NOT_SUPPORTED)])
    source = NvmlSource(lib)
    for _ in range(5):
        (snap,) = source.sample()
    source.close()
    assert snap.temperature_c is None
    assert lib.calls["nvmlDeviceGetFanSpeed"] == 1
    assert lib.calls["nvmlDeviceGetTemperature"] == 1
    assert lib.calls["nvmlDeviceGetPowerUsage"] == 5


def test_slow_fields_stay_off_the_per_second_path() -> None:
    lib = make_fake_pynvml([FakeDevice(), FakeDevice(energy=5_000_000, pcie=1234)])
    source = NvmlSource(lib)
    source.sample()
    assert "nvmlDeviceGetPcieThroughput" not in lib.calls
    assert "nvmlDeviceGetTotalEnergyConsumption" not in lib.calls
    slow = sample_slow(source)
    source.close()
    assert [s.pcie_tx_kib_s for s in slow] == [None, 1234]
    assert [s.energy_mj for s in slow] == [None, 5_000_000]


def test_memory_info_falls_back_to_v1() -> None:
    lib = make_fake_pynvml([FakeDevice(used=7 * 1024**3)], v2_memory=False)
    source = NvmlSource(lib)
    (snap,) = source.sample()
    source.close()
    assert snap.memory_used == 7 * 1024**3


def test_open_source_prefers_nvml_and_reports_missing_driver(tmp_path: Path) -> None:
    lib = make_fake_pynvml([FakeDevice()])
    source = open_gpu_source("auto", sim_root=tmp_path, loader=lambda: lib)
    assert source.kind == "nvml"
    assert "1 x NVIDIA H200" in source.describe()
    source.close()

    missing = open_gpu_source(
        "auto", sim_root=tmp_path / "nothing", loader=lambda: failing_pynvml("LibraryNotFound")
    )
    assert isinstance(missing, NoGpuSource)
    assert missing.sample() == ()
    text = missing.describe()
    assert "libnvidia-ml.so not found" in text
    assert str(tmp_path / "nothing") in text


def test_open_source_with_zero_devices_says_so(tmp_path: Path) -> None:
    lib = make_fake_pynvml([])
    source = open_gpu_source("nvml", sim_root=tmp_path, loader=lambda: lib)
    assert source.kind == "none"
    assert source.describe() == "NVML found no GPUs"


def test_open_source_rejects_unknown_preference() -> None:
    with pytest.raises(ValueError, match=r"prefer='cuda'.*auto, nvml, sim"):
        open_gpu_source("cuda")
