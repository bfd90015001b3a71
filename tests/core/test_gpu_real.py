"""Real-NVML checks against nvidia-smi. Marked ``gpu``; skipped where nvmlInit fails.

Tolerances: memory.used within 64 MiB plus 2 % (other processes allocate between the two reads);
temperature within 3 °C; utilisation within 25 points and power within 25 % + 20 W (both are
averages over different windows in NVML and nvidia-smi, and the GPU may be busy).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tui.gpu.nvml import NvmlSource

pytestmark = pytest.mark.gpu
MIB = 1024**2


@pytest.fixture
def source() -> Iterator[NvmlSource]:
    try:
        src = NvmlSource()
    except Exception as error:  # no driver here: this file is for GPU machines
        pytest.skip(f"NVML unavailable: {error}")
    if src.device_count == 0:
        src.close()
        pytest.skip("NVML found no GPUs")
    try:
        yield src
    finally:
        src.close()


def _smi() -> list[list[str]]:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi not on PATH")
    out = subprocess.run(
        [
            "nvidia-smi",
            "--query-gpu=memory.used,utilization.gpu,temperature.gpu,power.draw",
            "--format=csv,noheader,nounits",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    return [[cell.strip() for cell in line.split(",")] for line in out.strip().splitlines()]


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # "[N/A]" or "[Not Supported]"
        return None


def test_nvml_matches_nvidia_smi(source: NvmlSource) -> None:
    snaps = source.sample()
    rows = _smi()
    assert len(rows) == len(snaps)
    for snap, (mem, util, temp, power) in zip(snaps, rows, strict=True):
        assert snap.memory_total > 0
        used_mib = snap.memory_used / MIB
        assert abs(used_mib - float(mem)) <= 64 + 0.02 * float(mem), (snap.index, used_mib, mem)
        if _num(temp) is not None:
            assert snap.temperature_c is not None
            assert abs(snap.temperature_c - float(temp)) <= 3
        if _num(util) is not None:
            assert snap.utilization_gpu is not None
            assert abs(snap.utilization_gpu - float(util)) <= 25
        if _num(power) is not None:
            assert snap.power_w is not None
            assert abs(snap.power_w - float(power)) <= 20 + 0.25 * float(power)


def test_fields_are_none_or_sane_and_slow_fields_separate(source: NvmlSource) -> None:
    for snap in source.sample():
        assert snap.uuid.startswith("GPU-")
        assert snap.memory_used + snap.memory_free <= snap.memory_total + 64 * MIB
        assert snap.power_limit_w is None or snap.power_limit_w > 0
        assert snap.sm_clock_mhz is None or snap.sm_clock_mhz > 0
        if "H200" in snap.name:
            assert snap.fan_percent is None  # passively cooled: NotSupported, never a crash
    slow = source.sample_slow()
    assert len(slow) == source.device_count
