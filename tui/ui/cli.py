"""``gpufleet [console]``: open the console on a fleet given by ports, GPUs and log files."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from tui.ui.sources import FleetPoller

PORTS_DEFAULT = "30000-30006"
GPUS_DEFAULT = "0-6"


def parse_range(text: str, field: str, low: int, high: int) -> tuple[int, ...]:
    """Parse '30000-30006' or '0,2,5' or '3' into integers, each within [low, high].

    Args:
        text: The option's value.
        field: The option's name, for the error.
        low: Smallest allowed value.
        high: Largest allowed value.

    Returns:
        The values in the order given.

    Raises:
        ValueError: Naming the field, the value and the allowed range.
    """
    values: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part:
                first, last = (int(x) for x in part.split("-", 1))
                if last < first:
                    raise ValueError
                values.extend(range(first, last + 1))
            else:
                values.append(int(part))
    except ValueError:
        raise ValueError(
            f"{field}: {text!r} is not a list of numbers or ranges like 0-6 or 0,2,5"
        ) from None
    bad = [v for v in values if not low <= v <= high]
    if bad or not values:
        raise ValueError(f"{field}: {text!r} has values outside {low}-{high}")
    return tuple(values)


def make_poller(
    ports: tuple[int, ...], gpus: tuple[int, ...], log_dir: str | None, log_pattern: str
) -> FleetPoller | None:
    """The fleet monitor for these options, or None while the monitor is not built.

    The monitor is being written in parallel; its FleetSpec is joined here once it lands.
    """
    try:
        importlib.import_module("tui.fleet.monitor")
    except ModuleNotFoundError:
        return None
    return None


def build_parser() -> argparse.ArgumentParser:
    """The console's options."""
    parser = argparse.ArgumentParser(prog="gpufleet console", description=__doc__)
    parser.add_argument("--ports", default=PORTS_DEFAULT, help="server ports, e.g. 30000-30006")
    parser.add_argument("--gpus", default=GPUS_DEFAULT, help="GPU indices, e.g. 0-6 (one per port)")
    parser.add_argument("--log-dir", default=None, help="directory of the servers' logs")
    parser.add_argument(
        "--log-pattern", default="sglang_gpu{gpu}.log", help="log file name; {gpu} is the index"
    )
    parser.add_argument("--profile", default=None, help="tuning profile the fleet runs")
    return parser


def main(argv: Sequence[str]) -> int:
    """Parse the options, build the fleet monitor and run the console.

    Args:
        argv: Arguments after the command name.

    Returns:
        The exit status.
    """
    args = build_parser().parse_args(list(argv))
    try:
        ports = parse_range(args.ports, "--ports", 1, 65535)
        gpus = parse_range(args.gpus, "--gpus", 0, 15)
    except ValueError as error:
        print(f"gpufleet console: {error}")
        return 2
    if len(ports) != len(gpus):
        print(
            f"gpufleet console: --ports gives {len(ports)} ports but --gpus gives "
            f"{len(gpus)} GPUs; give one port per GPU"
        )
        return 2
    poller = make_poller(ports, gpus, args.log_dir, args.log_pattern)
    if poller is None:
        print(
            "gpufleet console: not yet: the fleet monitor (tui.fleet.monitor) is not wired to "
            "the console; use the Python API FleetApp(poller) meanwhile"
        )
        return 1
    from tui.ui.app import FleetApp

    FleetApp(poller, profile=args.profile).run()
    return 0
