"""The simulated driver's records: how simulated GPUs publish their state without NVML.

Layout, under ``tui.paths.sim_gpu_dir()``::

    gpu<N>/device.json        one per simulated GPU: its identity and capacity
    gpu<N>/proc-<pid>.json    one per process holding memory on it, rewritten as its load changes

A process record counts only while its process is alive and has the recorded start time (so a
reused pid never inherits memory). That is how a real driver behaves: memory is released when the
owning process is gone, not when it says so. Writers replace files atomically (write, rename).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from tui.inputs import read_json
from tui.outputs import make_dir, replace_file

GIB = 1024**3

SIM_GPU_KINDS: dict[str, tuple[str, int, float]] = {
    # kind: (name, total bytes as NVML reports it, power limit W)
    "b200": ("NVIDIA B200", int(183.0 * 10**9 / 1.0), 1000.0),
    "h200": ("NVIDIA H200", 143771 * 1024**2, 700.0),
    "h100": ("NVIDIA H100 80GB HBM3", 81559 * 1024**2, 700.0),
}
"""Simulated GPU kinds. Capacities follow nvidia-smi's totals (B200 ≈183 GB as in the seed)."""

RECORD_LIMIT = 64 << 10
"""A simulated GPU's device or process record (a few hundred bytes)."""


@dataclass(frozen=True, slots=True)
class SimDevice:
    """Identity and capacity of one simulated GPU."""

    index: int
    """GPU index (what CUDA_VISIBLE_DEVICES names)."""
    kind: str
    """Key of SIM_GPU_KINDS."""
    name: str
    """Device name as NVML would report it."""
    uuid: str
    """Stable fake UUID."""
    memory_total: int
    """Bytes."""
    power_limit_w: float
    """Watts."""


@dataclass(frozen=True, slots=True)
class SimProcessRecord:
    """Memory and load one process holds on one simulated GPU."""

    pid: int
    """Owning process."""
    create_time: float
    """psutil create_time() of the owner, to reject reused pids."""
    used_bytes: int
    """Device memory held."""
    utilization_gpu: float = 0.0
    """Percent busy, from the server's batch."""
    utilization_memory: float = 0.0
    """Percent of memory bandwidth in use."""
    name: str = "python"
    """Process name to show."""
    speed: float | None = None
    """The simulated server's time compression (``--sim-speed``: 20 = twenty simulated seconds
    a second), so whoever reads the GPUs can say how fast the fleet runs; None: not said."""
    busy_s: float = 0.0
    """Seconds of full utilisation so far (the integral of ``utilization_gpu`` / 100 over the
    process's life, up to ``at``): what the simulated energy counter is made of."""
    at: float = 0.0
    """time.time() when this record was written (``utilization_gpu`` holds from then on)."""


def gpu_dir(root: Path, index: int) -> Path:
    """Folder of one simulated GPU."""
    return root / f"gpu{index}"


def _atomic_write_json(path: Path, payload: dict[str, object]) -> None:
    # Telemetry, rewritten many times a second: atomic, not fsynced (a reboot ends the sim).
    if not path.parent.is_dir():
        make_dir(path.parent)
    replace_file(path, json.dumps(payload).encode(), durable=False)


def ensure_device(root: Path, index: int, kind: str) -> SimDevice:
    """Create ``gpu<index>/device.json`` if missing and return the device (existing one wins)."""
    existing = read_device(root, index)
    if existing is not None:
        return existing
    if kind not in SIM_GPU_KINDS:
        choices = ", ".join(sorted(SIM_GPU_KINDS))
        raise ValueError(f"unknown simulated GPU kind {kind!r}; choose from {choices}")
    name, total, power = SIM_GPU_KINDS[kind]
    uuid = f"GPU-5153494d-{index:04d}-0000-0000-{kind:0>12}"
    device = SimDevice(index, kind, name, uuid, total, power)
    _atomic_write_json(gpu_dir(root, index) / "device.json", asdict(device))
    return device


def read_device(root: Path, index: int) -> SimDevice | None:
    """Read one device record, or None when it does not exist or is unreadable."""
    try:
        data = read_json(gpu_dir(root, index) / "device.json", RECORD_LIMIT, "a device record")
        return SimDevice(**data)
    except (OSError, ValueError, TypeError, RecursionError):
        return None


def read_process(path: Path) -> SimProcessRecord | None:
    """Read one process record, or None when it is gone or unreadable."""
    try:
        return SimProcessRecord(**read_json(path, RECORD_LIMIT, "a process record"))
    except (OSError, ValueError, TypeError, RecursionError):
        return None


def list_devices(root: Path) -> list[SimDevice]:
    """Every simulated GPU under root, by index."""
    devices = []
    if root.is_dir():
        for child in root.glob("gpu*/device.json"):
            suffix = child.parent.name[3:]
            if suffix.isdigit():
                device = read_device(root, int(suffix))
                if device is not None:
                    devices.append(device)
    return sorted(devices, key=lambda d: d.index)


def publish_process(root: Path, index: int, record: SimProcessRecord) -> Path:
    """Write (or replace) a process's record on GPU ``index``; returns the record's path."""
    path = gpu_dir(root, index) / f"proc-{record.pid}.json"
    _atomic_write_json(path, asdict(record))
    return path


def withdraw_process(root: Path, index: int, pid: int) -> None:
    """Remove a process's record (optional: a dead process's record stops counting anyway)."""
    (gpu_dir(root, index) / f"proc-{pid}.json").unlink(missing_ok=True)


def own_create_time() -> float:
    """This process's start time as psutil's ``create_time()`` computes it, without psutil.

    Why: the simulated scheduler child must import only the standard library (it is spawned
    under SGLang's process title, outside the virtual environment's import path, and seven of
    them run on a 2-core machine).
    """
    with open("/proc/self/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    with open("/proc/stat", "rb") as handle:
        boot = next(float(ln.split()[1]) for ln in handle if ln.startswith(b"btime"))
    return float(fields[19]) / os.sysconf("SC_CLK_TCK") + boot


def alive(pid: int, create_time: float) -> bool:
    """Whether ``pid`` is a live (not zombie) process that started at ``create_time``."""
    import psutil  # here: the scheduler child publishes records and must not import it

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return abs(proc.create_time() - create_time) < 0.05
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def live_processes(root: Path, index: int, prune: bool = False) -> list[SimProcessRecord]:
    """Records of processes on GPU ``index`` that are still alive (dead ones pruned if asked)."""
    records = []
    for path in gpu_dir(root, index).glob("proc-*.json"):
        record = read_process(path)
        if record is None:
            continue
        if alive(record.pid, record.create_time):
            records.append(record)
        elif prune:
            with contextlib.suppress(OSError):  # gone already, or not ours to remove
                path.unlink()
    return sorted(records, key=lambda r: r.pid)
