"""``gpufleet adopt --ports 30000-30006 [--gpus 0-6] [--log-dir DIR] --name NAME``: take over a
fleet of SGLang servers gpufleet did not launch.

For each port: the server that listens there (refused, named, when it is not SGLang nor
gpufleet's simulator), its GPU, its log and its release; then the profile NAME written from the
servers' own command lines (a line for each flag it cannot hold) and every server recorded as
the fleet's, with an identity verified by its start time, boot and command line. Nothing is
signalled: the servers keep serving. Afterwards ``gpufleet status`` counts them, the console
operates them, and the first retune (``gpufleet apply``, ``gpufleet rollout``) replaces them
one GPU at a time while the job keeps running on the others.

Exit status: 0 adopted (or, with ``--dry-run``, what would be written was printed); 2 refused
with nothing written (bad input, a port held by no SGLang server, a name that exists, another
operation holding the fleet, a damaged state file).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from tui.cli_args import ArgumentParser, numbers_list
from tui.ops.adoption import AdoptError, AdoptPlan, AdoptRequest
from tui.ops.cli.common import REFUSALS
from tui.ops.service import FleetOps

PROG = "gpufleet adopt"


def build_parser() -> argparse.ArgumentParser:
    """The command's options."""
    parser = ArgumentParser(prog=PROG, description=__doc__)
    parser.add_argument("--ports", required=True, help="the servers' ports, e.g. 30000-30006")
    parser.add_argument(
        "--gpus",
        default=None,
        help="the GPU of each port, e.g. 0-6 (default: each server's CUDA_VISIBLE_DEVICES; a "
        "second port on one card gets the next free number; its card is kept as its device)",
    )
    parser.add_argument(
        "--log-dir", default=None, help="the servers' log directory (default: their stdout files)"
    )
    parser.add_argument(
        "--log-pattern",
        default="sglang_gpu{gpu}.log",
        help="with --log-dir: the log file name; {gpu} is the GPU, {port} the port",
    )
    parser.add_argument("--name", required=True, help="the profile to write (a new name)")
    parser.add_argument("--host", default="127.0.0.1", help="where the servers listen")
    parser.add_argument(
        "--dry-run", action="store_true", help="print what would be written; write nothing"
    )
    return parser


def print_plan(plan: AdoptPlan) -> None:
    """The servers, the profile's path and text, and what it cannot hold."""
    print(f"adopting {plan.summary()}:")
    for line in plan.describe():
        print(f"  {line}")
    print(f"--- {plan.path}")
    print(plan.toml().rstrip())
    print("---")


def main(argv: Sequence[str]) -> int:
    """Run ``gpufleet adopt``; returns the exit status (0 adopted, 2 refused)."""
    args = build_parser().parse_args(list(argv))
    try:
        request = AdoptRequest(
            ports=numbers_list(args.ports, "--ports", 1, 65535),
            name=args.name,
            gpus=numbers_list(args.gpus, "--gpus", 0, 255) if args.gpus else None,
            log_dir=args.log_dir,
            log_pattern=args.log_pattern,
            host=args.host,
        )
    except argparse.ArgumentTypeError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    ops = FleetOps(by="cli")
    try:
        plan = asyncio.run(ops.plan_adoption(request))
        print_plan(plan)
        if args.dry_run:
            print("dry run: nothing was written")
            return 0
        asyncio.run(ops.adopt(plan))
    except (AdoptError, *REFUSALS) as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    print(f"adopted {plan.summary()}; nothing was signalled")
    print(
        "next: 'gpufleet status' counts them; 'gpufleet apply PROFILE' or 'gpufleet rollout "
        f"PROFILE' (a copy of {plan.path.name} with new knobs) replaces them one GPU at a time "
        "while the job runs on the others"
    )
    return 0
