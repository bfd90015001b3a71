"""The simulated GPU source: reads the records simulated servers publish (``tui.gpu.sim_records``).

It behaves like a driver would: a GPU's used memory is what its *live* processes hold (a dead
process's memory is released at once, a reused pid inherits nothing), plus a small reservation
the driver keeps for itself. Temperature, power and clocks are derived from utilisation with simple
linear models so the panels move plausibly; they are not a physical model.

Its energy counter (``sample_slow``, NVML's total energy in mJ) is the exact integral of that
power model since the device record was made (the simulated driver's load): the idle power for
the whole time, plus the busy share over each process's utilisation integral, which the
scheduler child keeps in its record (``SimProcessRecord.busy_s``, the utilisation holding from
``at``). So integrating the power samples gives the counter's difference, within what changes
between two samples; a process that left keeps its share in this reader's memory, so the counter
never goes down while one server at a time holds each GPU.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tui import paths
from tui.gpu import sim_records
from tui.gpu.sim_cache import RecordCache
from tui.gpu.snapshot import GpuProcess, GpuSlowSnapshot, GpuSnapshot, GpuSourceKind

DRIVER_RESERVED_BYTES = sim_records.GIB // 2
"""Memory an idle GPU shows as used (context and driver reservations): 0.5 GiB, the order of
magnitude nvidia-smi shows on an idle data-centre part with persistence mode on."""

IDLE_TEMP_C = 30.0
"""Core temperature at 0 % utilisation."""
TEMP_PER_UTIL_C = 0.45
"""Degrees added per percent of utilisation (100 % -> 75 °C, typical of a loaded H200)."""
IDLE_POWER_FRACTION = 0.12
"""Board power at idle as a fraction of the limit."""
BUSY_POWER_FRACTION = 0.85
"""Board power at 100 % utilisation as a fraction of the limit."""
IDLE_SM_CLOCK_MHZ = 345
"""SM clock at idle (an H200 parks near 345 MHz)."""
BOOST_SM_CLOCK_MHZ = 1980
"""SM clock under load (H200 max boost)."""
MEM_CLOCK_MHZ = 2619
"""HBM3e memory clock; constant, as on real parts."""


class SimulatedSource:
    """Samples the simulated GPUs under a directory. Blocking (reads small files): use a thread."""

    kind: GpuSourceKind = "sim"

    def __init__(self, root: Path | None = None) -> None:
        """Read the simulated GPUs under ``root`` (default ``tui.paths.sim_gpu_dir()``).

        Args:
            root: Directory holding ``gpu<N>/device.json`` and ``gpu<N>/proc-<pid>.json``.
        """
        self.root = root if root is not None else paths.sim_gpu_dir()
        self._devices: list[sim_records.SimDevice] | None = None
        """The devices the last ``sample`` listed (``describe`` reuses them)."""
        self._records = RecordCache(self.root)
        """The records, read again only when their folder changed (``tui.gpu.sim_cache``)."""
        self._busy: dict[int, dict[tuple[int, float], float]] = {}
        """Per GPU: each process's utilisation integral as last seen (the energy counter keeps
        a process's share after it left)."""
        self._created: dict[int, float] = {}
        """Per GPU: when its device record was made (the simulated driver's load)."""
        self._speeds: tuple[float, ...] = ()
        """The simulated servers' speeds the last sample with any server saw (kept while every
        server is down, as during a full-fleet restart: the fleet is as fast as before)."""

    def exists(self) -> bool:
        """True when at least one simulated GPU has been published under the root."""
        return bool(sim_records.list_devices(self.root))

    def sample(self) -> tuple[GpuSnapshot, ...]:
        """Read every simulated GPU once.

        Returns:
            One snapshot per device record, in index order.
        """
        now = time.time()
        snapshots = []
        listed = self._records.devices()
        self._devices = [device for device, _ in listed]
        speeds = {r.speed for _, live in listed for r in live if r.speed is not None}
        if speeds:
            self._speeds = tuple(sorted(speeds))
        for device, live in listed:
            held = sum(max(0, r.used_bytes) for r in live)
            used = min(device.memory_total, DRIVER_RESERVED_BYTES + held)
            util = max((r.utilization_gpu for r in live), default=0.0)
            mem_util = max((r.utilization_memory for r in live), default=0.0)
            util = min(100.0, max(0.0, util))
            busy = util / 100.0
            power_fraction = (
                IDLE_POWER_FRACTION + (BUSY_POWER_FRACTION - IDLE_POWER_FRACTION) * busy
            )
            snapshots.append(
                GpuSnapshot(
                    index=device.index,
                    name=device.name,
                    uuid=device.uuid,
                    memory_total=device.memory_total,
                    memory_used=used,
                    memory_free=device.memory_total - used,
                    utilization_gpu=util,
                    utilization_memory=min(100.0, max(0.0, mem_util)),
                    temperature_c=round(IDLE_TEMP_C + TEMP_PER_UTIL_C * util, 1),
                    power_w=round(device.power_limit_w * power_fraction, 1),
                    power_limit_w=device.power_limit_w,
                    sm_clock_mhz=int(
                        IDLE_SM_CLOCK_MHZ + (BOOST_SM_CLOCK_MHZ - IDLE_SM_CLOCK_MHZ) * busy
                    ),
                    mem_clock_mhz=MEM_CLOCK_MHZ,
                    fan_percent=None,
                    processes=tuple(GpuProcess(r.pid, r.used_bytes, r.name) for r in live),
                    source="sim",
                    taken_at=now,
                )
            )
        return tuple(snapshots)

    def sample_slow(self) -> tuple[GpuSlowSnapshot, ...]:
        """The energy counter of each simulated GPU (no PCIe counters: None).

        Returns:
            One reading per device record, in index order: its total energy in mJ since the
            device record was made (see the module).
        """
        now = time.time()
        return tuple(
            GpuSlowSnapshot(index=d.index, energy_mj=self._energy_mj(d, live, now), taken_at=now)
            for d, live in self._records.devices()
        )

    def _energy_mj(
        self, device: sim_records.SimDevice, live: list[sim_records.SimProcessRecord], now: float
    ) -> int:
        busy = self._busy.setdefault(device.index, {})
        for record in live:
            share = record.busy_s + record.utilization_gpu / 100.0 * max(now - record.at, 0.0)
            key = (record.pid, record.create_time)
            busy[key] = max(busy.get(key, 0.0), share)
        created = self._created.get(device.index)
        if created is None:
            try:
                made = sim_records.gpu_dir(self.root, device.index) / "device.json"
                created = os.stat(made).st_mtime
            except OSError:
                created = now
            self._created[device.index] = created
        idle = IDLE_POWER_FRACTION * device.power_limit_w * max(now - created, 0.0)
        extra = (BUSY_POWER_FRACTION - IDLE_POWER_FRACTION) * device.power_limit_w
        return round((idle + extra * sum(busy.values())) * 1000.0)

    def describe(self) -> str:
        """Say what this source reads, and how fast its servers run when they said:
        'simulated x20: 7 x NVIDIA B200 under /tmp/simgpu' (the console's header)."""
        # The monitor describes right after sampling: reuse that listing, not a second one.
        devices = (
            self._devices if self._devices is not None else sim_records.list_devices(self.root)
        )
        names = sorted({d.name for d in devices})
        what = ", ".join(f"{sum(d.name == n for d in devices)} x {n}" for n in names)
        speed = "/".join(f"x{s:g}" for s in self._speeds)
        return f"simulated{' ' + speed if speed else ''}: {what or 'no GPUs'} under {self.root}"

    def close(self) -> None:
        """Nothing to release."""
