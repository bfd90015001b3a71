"""What a slot's server will find on its card: the fleet's servers of the other slots there.

SGLang sizes its pools from the free memory it measures when it starts (``pre``: the card's
capacity less every context and allocation already on it), so a server that shares its card
(``[gpu.N] device``) is planned with what its neighbours hold subtracted: each neighbour's
resident memory as the driver reads it now (NVML, or the simulated driver's records: the memory
of its verified processes), or, for a neighbour relaunched earlier in the same walk, what its
new server is predicted to hold. A neighbour whose memory no driver reports here (no driver, or
one that lists none of its processes) makes the slot's prediction impossible, said as such,
never a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tui.control.neighbours import neighbours
from tui.gpu.snapshot import GpuSnapshot
from tui.gpu.source import open_gpu_source
from tui.profiles import Profile
from tui.sglang.models import GIB

Readings = Callable[[], Sequence[GpuSnapshot]]
"""The driver's readings now, one per card (with each process's memory)."""


@dataclass(frozen=True, slots=True)
class Beside:
    """The fleet's servers of the other slots on one slot's card, and what they hold."""

    gpu: int
    """The slot planned."""
    device: int
    """Its card."""
    held: tuple[tuple[int, int, str], ...]
    """(slot, bytes, how known) for each neighbour that will hold memory there."""
    idle: tuple[int, ...] = ()
    """Slots on the card that run nothing now."""

    @property
    def resident_bytes(self) -> int:
        """What the neighbours hold, together."""
        return sum(size for _, size, _ in self.held)

    def describe(self) -> str:
        """'on device 0 beside GPU 1 (40.1 GB, the driver's reading): subtracted from the free
        memory it will measure'."""
        if not self.held:
            idle = ", ".join(f"GPU {g}" for g in self.idle)
            return f"on device {self.device} with {idle}, which run nothing now"
        each = ", ".join(f"GPU {g} ({size / GIB:.1f} GB, {how})" for g, size, how in self.held)
        return f"on device {self.device} beside {each}: subtracted from the free memory it finds"


def default_readings(profile: Profile) -> Readings:
    """The driver a profile's servers hold memory through: the simulated one for the
    simulator (unless it allocates on a real card), else NVML."""
    real = dict(profile.server.extra_flags).get("gpu_backing") == "cuda"
    kind = "sim" if profile.engine.kind == "sim" and not real else "nvml"

    def read() -> Sequence[GpuSnapshot]:
        source = open_gpu_source(kind)
        try:
            return source.sample()
        finally:
            source.close()

    return read


def beside(
    profile: Profile,
    gpu: int,
    planned: Mapping[int, int] | None = None,
    readings: Readings | None = None,
) -> Beside | None:
    """What slot ``gpu``'s new server will find held on its card by the fleet's other slots.

    Args:
        profile: The (fitted) profile: its slots' cards.
        gpu: The slot planned.
        planned: Slots relaunched before this one in the same walk: the bytes their new
            servers are predicted to hold.
        readings: The driver's readings (default: the profile engine's driver).

    Returns:
        None when no other slot of the profile, and no other recorded server of the fleet, is
        on its card.

    Raises:
        ValueError: a neighbour runs whose memory the driver does not report here (naming it).
    """
    device = profile.device_for(gpu)
    planned = planned or {}
    running = {n.gpu: n for n in neighbours(gpu, device)}
    slots = sorted(set(profile.neighbours_of(gpu)) | set(running))
    if not slots:
        return None
    held: list[tuple[int, int, str]] = []
    idle: list[int] = []
    reading: GpuSnapshot | None = None
    for slot in slots:
        if slot in planned:
            held.append((slot, planned[slot], "its new server, predicted"))
            continue
        near = running.get(slot)
        if near is None:
            idle.append(slot)
            continue
        if reading is None:
            found = [r for r in (readings or default_readings(profile))() if r.index == device]
            if not found:
                raise ValueError(
                    f"GPU {gpu} shares device {device} with {near.describe()}, whose memory no "
                    "driver reports here: the free memory it will find is unknown"
                )
            reading = found[0]
        sizes = [p.used_bytes for p in reading.processes if p.pid in near.pids]
        if not sizes or any(size is None for size in sizes):
            said = "does not say" if sizes else "lists none of its processes"
            raise ValueError(
                f"GPU {gpu} shares device {device} with {near.describe()}: the driver {said} "
                "(another pid namespace?), so the free memory it will find is unknown"
            )
        held.append((slot, sum(s for s in sizes if s is not None), "the driver's reading"))
    return Beside(gpu, device, tuple(held), tuple(idle))
