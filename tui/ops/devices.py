"""``--devices``: the card each watched port's server runs on, before anything is adopted.

The watching console (``gpufleet console --ports 30000,30001 --gpus 0,1``) numbers its slots by
``--gpus``; two servers the operator's script started on one card (both with
``CUDA_VISIBLE_DEVICES=0``) would then show GPU 1's panel reading card 1, a card they do not run
on, until ``A`` adopts them (the fleet state's device wins from then on). ``--devices 0,0`` says
which card each port's server runs on, in the syntax ``--gpus`` takes (``0,0``, ``0-3``,
``0,0,1``), one per port.
"""

from __future__ import annotations

import argparse
import dataclasses

from tui.cli_args import numbers_list
from tui.fleet.spec import FleetSpec

MAX_DEVICE = 255
"""The largest card index (as ``[gpu.N] device`` allows)."""


def on_devices(spec: FleetSpec, text: str | None) -> FleetSpec:
    """``spec`` with each server on the card ``text`` names (None: unchanged).

    Args:
        spec: The watched fleet, one server per port in the order given.
        text: ``--devices``'s value: one card per server, like ``--gpus``.

    Raises:
        ValueError: one line naming ``--devices``, the value and what is allowed.
    """
    if text is None:
        return spec
    try:
        cards = numbers_list(text, "--devices", 0, MAX_DEVICE)
    except argparse.ArgumentTypeError as error:
        raise ValueError(str(error)) from None
    servers = spec.servers
    if len(cards) != len(servers):
        raise ValueError(
            f"--devices: {text!r} names {len(cards)} cards for {len(servers)} ports; "
            "give one card per port, in the order of --ports"
        )
    on = (
        dataclasses.replace(s, device=None if card == s.gpu_index else card)
        for s, card in zip(servers, cards, strict=True)
    )
    return dataclasses.replace(spec, servers=tuple(on))
