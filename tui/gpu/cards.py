"""Naming the card where no driver answers: ``--card b200|h200|h100`` or ``--card-gb GB``.

The preflight reads each GPU's capacity from NVML. Off the GPU machine (planning on a laptop,
in CI) there is no driver to ask, and the prediction could only say "memory capacity unknown":
these options give the capacity instead (the card kinds' totals as NVML reports them,
``tui.gpu.sim_records.SIM_GPU_KINDS``). A driver's answer wins where there is one: it is the
card the servers will get. ``--card``, not ``--gpu``: argparse would take ``--gpu`` for a
command's ``--gpus``.
"""

from __future__ import annotations

import argparse

from tui.cli_args import number
from tui.gpu.sim_records import SIM_GPU_KINDS

CARD_GB_RANGE = (0.0, float(1 << 20))
"""``--card-gb``: GiB, above 0 (a card of a petabyte is a typo)."""

CARD_HINT = "name the card: --card " + "|".join(sorted(SIM_GPU_KINDS)) + " or --card-gb GB"
"""What a preflight without a capacity tells the operator to give."""


def add_card_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--card KIND`` and ``--card-gb GB`` (one or the other) to ``parser``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--card",
        choices=sorted(SIM_GPU_KINDS),
        help="the GPUs' kind, for the preflight where no NVIDIA driver answers (planning off "
        "the GPU machine); a driver's answer wins",
    )
    group.add_argument(
        "--card-gb",
        type=number(float, *CARD_GB_RANGE, low_open=True),
        metavar="GB",
        help="the GPUs' memory in GiB as NVML reports it, where no NVIDIA driver answers",
    )


def card_bytes(args: argparse.Namespace) -> int | None:
    """The capacity ``--card`` or ``--card-gb`` names, in bytes (None: neither given)."""
    if args.card is not None:
        return SIM_GPU_KINDS[args.card][1]
    if args.card_gb is not None:
        return round(args.card_gb * 2**30)
    return None
