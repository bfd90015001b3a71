"""``gpufleet fleet forget GPU[,GPU...]``: remove GPUs from the fleet state.

A GPU once in the fleet state stays there (its port, its profiles, its launches) so that a
relaunch keeps it on its port: one taken out of the machine, or out of the fleet, was then
counted as down by ``gpufleet status`` for ever (exit 1). ``forget`` removes it, through the
operations core (the operation lock, the journal). It refuses, changing nothing, while a
verified server of the fleet runs on it (stop it first: forgetting it would leave it unmanaged),
and for a GPU the state does not hold. Exit status: 0 forgotten, 2 refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tui import paths
from tui.cli_args import ArgumentParser
from tui.ops.cli.common import UsageError, parse_gpus, run_refusing
from tui.ops.service import FleetOps


def main(argv: Sequence[str]) -> int:
    """Run ``gpufleet fleet``; returns the exit status."""
    parser = ArgumentParser(prog="gpufleet fleet", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    forget = sub.add_parser("forget", help="remove GPUs from the fleet state (none may run)")
    forget.add_argument("gpus", metavar="GPU[,GPU...]", help="GPU indices, e.g. 3 or 3,5")
    args = parser.parse_args(list(argv))

    def work() -> list[int]:
        gpus = parse_gpus(args.gpus, "GPU")
        if not gpus:
            raise UsageError("GPU: give at least one GPU index")
        asyncio.run(FleetOps(by="cli").forget(gpus))
        return gpus

    status, gpus = run_refusing("gpufleet fleet", work)
    if status == 0:
        listed = ", ".join(str(g) for g in gpus)
        print(f"forgot GPU {listed}: removed from {paths.fleet_state_file()}")
    return status
