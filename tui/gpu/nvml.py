"""The NVML GPU source: reads every GPU through pynvml (package nvidia-ml-py).

Follows nvitop's approach: every driver call goes through one wrapper, :func:`nvml_query`, that
turns "this device cannot tell you that" errors into ``None`` instead of raising, and one
:meth:`NvmlSource.sample` reads each field family once per device. Handles, names, UUIDs and the
memory-info variant are resolved once at start-up.

Per-call cost on an H200 (measured by others on the real driver): most queries take 2-10 µs, but
PCIe throughput takes ~21 ms and total energy ~4 ms, so those two live in
:meth:`NvmlSource.sample_slow`, which the UI calls rarely, never on the per-second path.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import psutil

from tui.gpu.snapshot import GpuProcess, GpuSlowSnapshot, GpuSnapshot, GpuSourceKind

SOFT_ERROR_NAMES = (
    "NVMLError_NotSupported",
    "NVMLError_NoPermission",
    "NVMLError_Unknown",
    "NVMLError_FunctionNotFound",
)
"""pynvml error classes that mean "no value here" rather than "something broke"."""


def load_pynvml() -> ModuleType:
    """Import pynvml (the module the nvidia-ml-py package installs).

    Returns:
        The pynvml module. Raises ImportError when it is not installed.
    """
    return importlib.import_module("pynvml")


def _soft_errors(lib: ModuleType) -> tuple[type[BaseException], ...]:
    found = [getattr(lib, name, None) for name in SOFT_ERROR_NAMES]
    return tuple(cls for cls in found if isinstance(cls, type))


def nvml_query(fn: Callable[..., Any], *args: Any, lib: ModuleType | None = None) -> Any | None:
    """Call one NVML function; an unsupported or forbidden field gives None instead of raising.

    Args:
        fn: The pynvml function, e.g. ``pynvml.nvmlDeviceGetFanSpeed``.
        *args: Its arguments (usually a device handle).
        lib: The pynvml module whose error classes count as soft (default: the real pynvml).

    Returns:
        What ``fn`` returned (bytes decoded to str), or None for NotSupported, NoPermission,
        Unknown and FunctionNotFound. Other NVML errors (GPU lost, uninitialised) propagate.
    """
    module = lib if lib is not None else load_pynvml()
    try:
        value = fn(*args)
    except _soft_errors(module):
        return None
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value


class NvmlSource:
    """Samples every NVIDIA GPU on the node. Blocking: call from a thread worker."""

    kind: GpuSourceKind = "nvml"

    def __init__(self, lib: ModuleType | None = None) -> None:
        """Initialise NVML and cache each device's handle, name and UUID.

        Args:
            lib: A pynvml-compatible module (tests inject a fake); default the real pynvml.

        Raises:
            Whatever ``nvmlInit`` raises (library missing, driver not loaded); the caller
            (:func:`tui.gpu.source.open_gpu_source`) turns that into a plain reason.
        """
        self._lib = lib if lib is not None else load_pynvml()
        self._lib.nvmlInit()
        self._closed = False
        count = int(self._lib.nvmlDeviceGetCount())
        self._handles = [self._lib.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self._names = [str(self._q(self._lib.nvmlDeviceGetName, h) or "GPU") for h in self._handles]
        self._uuids = [str(self._q(self._lib.nvmlDeviceGetUUID, h) or "") for h in self._handles]
        self._driver = str(self._q(self._lib.nvmlSystemGetDriverVersion) or "")
        self._memory_version = self._pick_memory_version()
        self._process_fn = self._pick_process_fn()
        # (device index, field) pairs the driver said it cannot report: never asked again, so a
        # fan-less H200 costs one NotSupported at start, not one per second.
        self._unsupported: set[tuple[int, str]] = set()
        self._process_names: dict[int, str] = {}

    @property
    def device_count(self) -> int:
        """Number of GPUs NVML found."""
        return len(self._handles)

    def _q(self, fn: Callable[..., Any], *args: Any) -> Any | None:
        return nvml_query(fn, *args, lib=self._lib)

    def _field(self, index: int, name: str, fn: Callable[..., Any], *args: Any) -> Any | None:
        if (index, name) in self._unsupported:
            return None
        value = self._q(fn, *args)
        if value is None:
            self._unsupported.add((index, name))
        return value

    def _pick_memory_version(self) -> int | None:
        # v2 separates the driver's reserved memory from "used", as nvidia-smi does; older
        # drivers or bindings lack it, so fall back to v1 once and for all.
        version = getattr(self._lib, "nvmlMemory_v2", None)
        if version is None or not self._handles:
            return None
        try:
            self._lib.nvmlDeviceGetMemoryInfo(self._handles[0], version=version)
        except Exception:  # FunctionNotFound, TypeError from an old binding, argument mismatch
            return None
        return int(version)

    def _pick_process_fn(self) -> Callable[..., Any] | None:
        for name in (
            "nvmlDeviceGetComputeRunningProcesses_v3",
            "nvmlDeviceGetComputeRunningProcesses_v2",
            "nvmlDeviceGetComputeRunningProcesses",
        ):
            fn = getattr(self._lib, name, None)
            if fn is None:
                continue
            if not self._handles:
                return fn
            try:
                fn(self._handles[0])
            except Exception:  # this binding/driver pair lacks the variant: try the next one
                continue
            return fn
        return None

    def _memory(self, handle: Any) -> Any | None:
        if self._memory_version is not None:
            return self._q(
                lambda h: self._lib.nvmlDeviceGetMemoryInfo(h, version=self._memory_version),
                handle,
            )
        return self._q(self._lib.nvmlDeviceGetMemoryInfo, handle)

    def _process_name(self, pid: int) -> str:
        name = self._process_names.get(pid)
        if name is None:
            try:
                name = psutil.Process(pid).name()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                name = ""  # another pid namespace or another user's process: not visible
            self._process_names[pid] = name
        return name

    def _processes(self, handle: Any) -> tuple[GpuProcess, ...]:
        if self._process_fn is None:
            return ()
        raw = self._q(self._process_fn, handle) or []
        result = []
        for proc in raw:
            # pynvml turns the driver's "N/A" (another pid namespace, WDDM) into None.
            used = getattr(proc, "usedGpuMemory", None)
            pid = int(proc.pid)
            result.append(
                GpuProcess(pid, int(used) if used is not None else None, self._process_name(pid))
            )
        return tuple(result)

    def sample(self) -> tuple[GpuSnapshot, ...]:
        """Read every GPU once: the cheap per-second fields only.

        Returns:
            One snapshot per device, in NVML index order.
        """
        lib = self._lib
        now = time.time()
        snapshots = []
        seen_pids: set[int] = set()
        for index, handle in enumerate(self._handles):
            memory = self._memory(handle)
            util = self._field(index, "util", lib.nvmlDeviceGetUtilizationRates, handle)
            temp = self._field(
                index, "temp", lib.nvmlDeviceGetTemperature, handle, lib.NVML_TEMPERATURE_GPU
            )
            power = self._field(index, "power", lib.nvmlDeviceGetPowerUsage, handle)
            limit = self._field(index, "limit", lib.nvmlDeviceGetEnforcedPowerLimit, handle)
            sm = self._field(index, "sm", lib.nvmlDeviceGetClockInfo, handle, lib.NVML_CLOCK_SM)
            mem = self._field(index, "mem", lib.nvmlDeviceGetClockInfo, handle, lib.NVML_CLOCK_MEM)
            fan = self._field(index, "fan", lib.nvmlDeviceGetFanSpeed, handle)
            processes = self._processes(handle)
            seen_pids.update(p.pid for p in processes)
            snapshots.append(
                GpuSnapshot(
                    index=index,
                    name=self._names[index],
                    uuid=self._uuids[index],
                    memory_total=int(memory.total) if memory is not None else 0,
                    memory_used=int(memory.used) if memory is not None else 0,
                    memory_free=int(memory.free) if memory is not None else 0,
                    utilization_gpu=float(util.gpu) if util is not None else None,
                    utilization_memory=float(util.memory) if util is not None else None,
                    temperature_c=float(temp) if temp is not None else None,
                    power_w=power / 1000.0 if power is not None else None,
                    power_limit_w=limit / 1000.0 if limit is not None else None,
                    sm_clock_mhz=int(sm) if sm is not None else None,
                    mem_clock_mhz=int(mem) if mem is not None else None,
                    fan_percent=float(fan) if fan is not None else None,
                    processes=processes,
                    source="nvml",
                    taken_at=now,
                )
            )
        # Forget names of processes that left every GPU, so a reused pid is looked up afresh.
        for pid in set(self._process_names) - seen_pids:
            del self._process_names[pid]
        return tuple(snapshots)

    def sample_slow(self) -> tuple[GpuSlowSnapshot, ...]:
        """Read the expensive counters (PCIe throughput, total energy). Call rarely.

        Returns:
            One reading per device; fields the device does not support are None.
        """
        lib = self._lib
        now = time.time()
        readings = []
        for index, handle in enumerate(self._handles):
            tx = self._field(
                index,
                "pcie_tx",
                lib.nvmlDeviceGetPcieThroughput,
                handle,
                lib.NVML_PCIE_UTIL_TX_BYTES,
            )
            rx = self._field(
                index,
                "pcie_rx",
                lib.nvmlDeviceGetPcieThroughput,
                handle,
                lib.NVML_PCIE_UTIL_RX_BYTES,
            )
            energy = self._field(index, "energy", lib.nvmlDeviceGetTotalEnergyConsumption, handle)
            readings.append(
                GpuSlowSnapshot(
                    index=index,
                    pcie_tx_kib_s=int(tx) if tx is not None else None,
                    pcie_rx_kib_s=int(rx) if rx is not None else None,
                    energy_mj=int(energy) if energy is not None else None,
                    taken_at=now,
                )
            )
        return tuple(readings)

    def describe(self) -> str:
        """Say what this source reads, e.g. 'NVML: 8 x NVIDIA H200 (driver 570.86)'."""
        names = sorted(set(self._names))
        what = ", ".join(f"{self._names.count(n)} x {n}" for n in names) or "no GPUs"
        driver = f" (driver {self._driver})" if self._driver else ""
        return f"NVML: {what}{driver}"

    def close(self) -> None:
        """Shut NVML down (idempotent)."""
        if not self._closed:
            self._closed = True
            # Shutting down a half-broken driver must not raise on exit.
            with contextlib.suppress(Exception):
                self._lib.nvmlShutdown()
