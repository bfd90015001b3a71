"""Each fleet GPU's joules while a verdict measures: the energy a canary's or a rollout's
tokens per joule divide by.

One :class:`~tui.gpu.energy.EnergyMeter` per physical card, fed by the node's GPU source at
each read: the driver's total energy counter (NVML's, ~4 ms a call on an H200; or the simulated
card's exact integral of its power model), and a power sample, which the meter integrates alone
where a card has no counter (trapezoids at the reads' cadence, the verdict's interval: coarser
than the counter, and said so by ``counter``). The sampler reads it on its observed readings
only (every 5 s by default), never every second.

A slot whose card another server shares (``[gpu.N] device``) is not metered: the card's joules
cannot be split between its servers, and a figure for one of them would be made up.

Blocking (NVML, the simulated records): the sampler calls ``read`` in a thread, and the source
is opened there, at the first read (NVML's start takes tens of ms).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tui.gpu.energy import EnergyMeter
from tui.gpu.snapshot import GpuSource
from tui.gpu.source import sample_slow
from tui.profiles import Profile


class JoulesReader:
    """Joules since the reader's first ``read``, per fleet GPU.

    Args:
        open_source: Opens the node's GPUs (NVML, or the simulated fleet), at the first read;
            closed by ``close``.
        devices: Per fleet GPU metered: the physical card its server runs on (a GPU left out
            reads None).
    """

    def __init__(self, open_source: Callable[[], GpuSource], devices: Mapping[int, int]) -> None:
        self._open = open_source
        self.source: GpuSource | None = None
        self.devices = dict(devices)
        self._meters = {device: EnergyMeter() for device in set(self.devices.values())}

    def read(self) -> dict[int, float | None]:
        """Each fleet GPU's joules so far (None: not metered, or its card not seen)."""
        if self.source is None:
            self.source = self._open()
        seen: set[int] = set()
        for gpu in self.source.sample():
            meter = self._meters.get(gpu.index)
            if meter is not None:
                meter.power(gpu.taken_at, gpu.power_w)
                seen.add(gpu.index)
        for reading in sample_slow(self.source):
            meter = self._meters.get(reading.index)
            if meter is not None:
                meter.energy_counter(reading.taken_at, reading.energy_mj)
        return {
            gpu: self._meters[device].joules if device in seen else None
            for gpu, device in self.devices.items()
        }

    @property
    def counter(self) -> bool:
        """Whether every metered card reads the driver's counter (False: power integrated)."""
        return bool(self._meters) and all(m.counter for m in self._meters.values())

    def close(self) -> None:
        """Release the GPU source (if it was opened)."""
        if self.source is not None:
            self.source.close()
            self.source = None


def metered_devices(profile: Profile, gpus: Sequence[int]) -> dict[int, int]:
    """The physical card of each of ``gpus`` that no other server of the profile shares (a
    GPU outside the profile: its own index)."""
    return {
        gpu: profile.device_for(gpu) if gpu in profile.gpus else gpu
        for gpu in gpus
        if gpu not in profile.gpus or not profile.neighbours_of(gpu)
    }
