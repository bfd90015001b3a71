"""The immutable GPU snapshot every GPU source produces (NVML or simulated)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

GpuSourceKind = Literal["nvml", "sim", "none"]


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A compute process using a GPU, as the driver (or the simulated driver) reports it."""

    pid: int
    """Process id as seen from this host's pid namespace."""
    used_bytes: int | None
    """GPU memory held by the process; None when the driver does not say (other namespaces)."""
    name: str = ""
    """Short process name, when it could be read."""


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    """One reading of one GPU. A field the device does not support is None, never an error."""

    index: int
    """NVML index (the number CUDA_VISIBLE_DEVICES uses on this host)."""
    name: str
    """Marketing name, e.g. 'NVIDIA H200'."""
    uuid: str
    """Stable identity across reboots and re-enumeration."""
    memory_total: int
    """Bytes of device memory."""
    memory_used: int
    """Bytes in use (all processes plus the driver's reservation)."""
    memory_free: int
    """Bytes free."""
    utilization_gpu: float | None
    """Percent of the last sample period a kernel ran."""
    utilization_memory: float | None
    """Percent of the last sample period device memory was read or written."""
    temperature_c: float | None
    """Core temperature in degrees Celsius."""
    power_w: float | None
    """Current board power in watts."""
    power_limit_w: float | None
    """Enforced power limit in watts."""
    sm_clock_mhz: int | None
    """Current SM clock."""
    mem_clock_mhz: int | None
    """Current memory clock."""
    fan_percent: float | None = None
    """Fan speed; None on passively cooled parts such as the H200 (NotSupported)."""
    processes: tuple[GpuProcess, ...] = field(default_factory=tuple)
    """Compute processes on this GPU with their memory."""
    source: GpuSourceKind = "nvml"
    """Where the reading came from."""
    taken_at: float = 0.0
    """time.time() of the reading."""

    @property
    def memory_fraction(self) -> float:
        """Used memory as a fraction of total (0 when total is unknown)."""
        return self.memory_used / self.memory_total if self.memory_total else 0.0


class GpuSource(Protocol):
    """Anything that can sample every GPU on the node. Blocking: call it from a thread worker."""

    kind: GpuSourceKind
    """Which kind of source this is."""

    def sample(self) -> tuple[GpuSnapshot, ...]:
        """Read every GPU once (the cheap, per-second fields only)."""
        ...

    def describe(self) -> str:
        """A plain sentence for the UI: what this source reads, or why there are no GPUs."""
        ...

    def close(self) -> None:
        """Release the library handle."""
        ...


@dataclass(frozen=True, slots=True)
class GpuSlowSnapshot:
    """Expensive counters of one GPU, read rarely (PCIe ~21 ms/call, energy ~4 ms on an H200)."""

    index: int
    """NVML index."""
    pcie_tx_kib_s: int | None = None
    """PCIe transmit throughput in KiB/s over the driver's last 20 ms window."""
    pcie_rx_kib_s: int | None = None
    """PCIe receive throughput in KiB/s."""
    energy_mj: int | None = None
    """Total energy since the driver loaded, in millijoules."""
    taken_at: float = 0.0
    """time.time() of the reading."""
