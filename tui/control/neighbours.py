"""Servers sharing one GPU: the fleet's other verified servers on a slot's device.

A slot (gpufleet's "GPU N": its port, log, record and panel) runs on a physical device, its
own index unless its profile names another (``[gpu.N] device``). Several slots may share one
card. Whatever else holds memory on a device shrinks the free memory SGLang measures at start,
so a launch refuses a device held by anyone (``tui.control.preflight.check_gpu_free``), except
by these: the fleet's own servers of the other slots on that device, each verified as the
fleet's (``tui.control.identity.verify``) with every live process of it (the scheduler child is
the one the driver lists). Reads only; nothing here signals anything.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass

import psutil

from tui.control.identity import IdentityMismatch, running, verify
from tui.state.fleet_state import ProcessRecord, read_records


@dataclass(frozen=True, slots=True)
class Neighbour:
    """A server of another slot of the fleet on the same device, verified as the fleet's."""

    gpu: int
    """Its slot."""
    record: ProcessRecord
    """Its record."""
    pids: frozenset[int]
    """Its main process and every live descendant (the driver lists the scheduler)."""

    def describe(self) -> str:
        """'GPU 0's server (pid 123)'."""
        return f"GPU {self.gpu}'s server (pid {self.record.pid})"


def neighbours(
    gpu: int, device: int, records: Mapping[int, ProcessRecord] | None = None
) -> list[Neighbour]:
    """The fleet's servers of the other slots on ``device``, each verified and alive.

    Args:
        gpu: The slot asking (its own server is not its neighbour).
        device: The physical GPU.
        records: The recorded servers by slot (default: the fleet state's).

    Returns:
        The neighbours, by slot; a record whose pid is no longer its server is none.

    Raises:
        StateFileError: the fleet state is damaged.
    """
    found = []
    for slot, record in sorted((read_records() if records is None else records).items()):
        if slot == gpu or record.device_index != device:
            continue
        try:
            identity = verify(record)
        except IdentityMismatch:
            continue  # its pid is someone else's now: not the fleet's server, not expected
        if not identity.alive or identity.process is None:
            continue
        pids = {identity.process.pid}
        with contextlib.suppress(psutil.NoSuchProcess):
            pids |= {c.pid for c in identity.process.children(recursive=True) if running(c)}
        found.append(Neighbour(slot, record, frozenset(pids)))
    return found


def on_device(gpu: int, device: int) -> str:
    """'GPU 1 (device 0)' when the slot runs on another's card, else 'GPU 1'."""
    return f"GPU {gpu}" if device == gpu else f"GPU {gpu} (device {device})"
