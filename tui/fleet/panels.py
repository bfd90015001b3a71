"""One panel per slot: a server joined with the reading of the card it runs on.

gpufleet's "GPU N" is a slot (its port, log, record and panel); the card it runs on is its
device, the slot's own index unless it shares another's card (``[gpu.N] device``). Two slots
on one card show that card's reading in both panels, each saying which card it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from tui.fleet.snapshot import GpuPanel, ServerSnapshot
from tui.fleet.spec import ServerSpec
from tui.gpu.snapshot import GpuSnapshot
from tui.state.fleet_state import GpuState


def card_of(spec: ServerSpec, entry: GpuState | None) -> int:
    """The card a slot's panel reads: the fleet state's for the slot on this port (the fleet's
    layout wins, as for its ports), else the spec's."""
    if entry is not None and entry.port == spec.port:
        return entry.device_index
    return spec.device_index


def join_panels(
    slots: Iterable[int],
    devices: Mapping[int, int],
    servers: Mapping[int, ServerSnapshot],
    readings: Sequence[GpuSnapshot],
    sampled: bool,
    no_reading: str,
) -> tuple[GpuPanel, ...]:
    """The snapshot's panels, in slot order.

    Args:
        slots: The slots the fleet names (with or without a server).
        devices: Each slot's card, where known (else the slot's index).
        servers: Each slot's server.
        readings: The GPU source's readings, one per card.
        sampled: Also show a panel for each card read that no slot names or runs on.
        no_reading: Why a slot's card has no reading.
    """
    by_card = {g.index: g for g in readings}
    named = set(slots)
    # A card read shows as a panel of its own only when no slot is numbered like it or runs on
    # it (two slots sharing card 0: panels GPU 0 and GPU 1, both reading card 0).
    shown = set(by_card) - named - set(devices.values()) if sampled else set()
    panels = []
    for slot in sorted(named | shown):
        card = devices.get(slot, slot)
        panels.append(
            GpuPanel(
                gpu_index=slot,
                gpu=by_card.get(card),
                server=servers.get(slot),
                gpu_note="" if card in by_card else no_reading,
                device=None if card == slot else card,
            )
        )
    return tuple(panels)
