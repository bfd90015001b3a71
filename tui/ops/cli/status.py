"""``gpufleet status [--json] [--watch S]``: the whole fleet and its job, for scripts and people.

Per GPU: state, profile, requested and effective values, KV, Mamba, running, queued, tok/s and
the age of each reading; then the job (the pipeline's status document). The fleet is
``--ports/--gpus`` (exactly those rows), else the one the state directory records, else ports
30000-30006 on GPUs 0-6.

Exit status: 0 every server ready, 1 some not ready, 2 unreachable (no server of the fleet runs
or answers), 3 bad input (an option, or a damaged state file). With ``--watch`` it polls every S
seconds: after ``--count`` polls it exits with the last poll's status; interrupted, with 130.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from tui import paths
from tui.cli_args import ArgumentParser, number, numbers_list
from tui.fleet.monitor import FleetMonitor
from tui.fleet.recorded import DEFAULT_PORTS, default_fleet
from tui.fleet.spec import FleetSpec
from tui.gpu.source import open_gpu_source
from tui.ops.fleet_status import DEFAULT_WIDTH, EXIT_BAD_INPUT, format_text, status_document
from tui.pipeline.energy import PriceError, ledger_path, load_price, read_ledger
from tui.pipeline.status import check_status_path, read_status
from tui.state.files import StateFileError

PROG = "gpufleet status"


class _Parser(ArgumentParser):
    """One-line errors like every command, but exit 3: status's 2 means unreachable."""

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: MESSAGE (see PROG --help)`` and exit 3."""
        try:
            super().error(message)
        except SystemExit:
            raise SystemExit(EXIT_BAD_INPUT) from None


def build_parser() -> argparse.ArgumentParser:
    """The command's options."""
    parser = _Parser(
        prog=PROG,
        description="The whole fleet and its job. Exit: 0 all ready, 1 some not ready, "
        "2 unreachable, 3 bad input.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document per poll")
    parser.add_argument(
        "--watch",
        type=number(float, 0.2, 3600),
        default=None,
        metavar="S",
        help="poll every S seconds (0.2..3600) until interrupted",
    )
    parser.add_argument(
        "--count",
        type=number(int, 1, 10**6),
        default=None,
        metavar="N",
        help="with --watch: stop after N polls",
    )
    parser.add_argument(
        "--ports", default=None, help="server ports (default: the fleet state's, else 30000-30006)"
    )
    parser.add_argument("--gpus", default=None, help="GPU of each port (default 0, 1, ...)")
    parser.add_argument(
        "--status",
        type=Path,
        default=None,
        metavar="PATH",
        help="the pipeline's status document (default: the state directory's)",
    )
    return parser


def fleet_spec(ports: tuple[int, ...] | None, gpus: tuple[int, ...] | None) -> FleetSpec:
    """The fleet to read: the options', else the fleet state's, else the default ports.

    Raises:
        ValueError: ``--gpus`` does not give one GPU per port.
        StateFileError: the fleet state file is damaged.
    """
    if ports is None and gpus is None:
        return default_fleet()[0]
    ports = ports or DEFAULT_PORTS
    if gpus is not None and len(gpus) != len(ports):
        raise ValueError(f"--gpus: {len(gpus)} GPUs for {len(ports)} ports; give one per port")
    return FleetSpec.from_ports(ports, gpus or tuple(range(len(ports))))


async def _run(spec: FleetSpec, args: argparse.Namespace) -> int:
    # Given --ports/--gpus, exactly those rows: the other GPUs the source samples (a demo's
    # seven simulated ones) are no part of the fleet asked about.
    explicit = args.ports is not None or args.gpus is not None
    monitor = FleetMonitor(spec, open_gpu_source(), sampled_gpus=not explicit)
    status_path = args.status or paths.pipeline_status_file()
    ledger = ledger_path(status_path)
    polls = 0
    try:
        while True:
            started = time.monotonic()
            snapshot = await monitor.poll()
            job, energy = read_status(status_path), read_ledger(ledger)
            doc = status_document(snapshot, job, time.time(), energy, args.price)
            code, polls = doc["exit_code"], polls + 1
            if args.json:
                print(json.dumps(doc), flush=True)
            else:
                if args.watch is not None:
                    print(time.strftime("%H:%M:%S"), flush=False)
                width = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
                print("\n".join(format_text(doc, width)), flush=True)
            if args.watch is None or (args.count is not None and polls >= args.count):
                return int(code)
            await asyncio.sleep(max(args.watch - (time.monotonic() - started), 0.0))
    finally:
        await monitor.aclose()


def main(argv: Sequence[str]) -> int:
    """Print the fleet's status; returns the exit status (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(list(argv))
    try:
        ports = numbers_list(args.ports, "--ports", 1, 65535) if args.ports else None
        gpus = numbers_list(args.gpus, "--gpus", 0, 255) if args.gpus else None
        if args.count is not None and args.watch is None:
            raise ValueError("--count: only with --watch S")
        spec = fleet_spec(ports, gpus)
        args.price = load_price()  # [energy] price_per_kwh: the job's cost
        if args.status is not None:
            check_status_path(args.status)  # a FIFO or /dev/zero: refused now, never read
    except (argparse.ArgumentTypeError, ValueError, StateFileError, PriceError) as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return asyncio.run(_run(spec, args))
    except KeyboardInterrupt:
        return 130
