"""The console without a profile: which fleet it watches, and the journal's markers on its chart.

It only watches (every key that changes the fleet is off) until its servers are adopted with
``A`` (``tui.ops.local.LocalFleet`` watching); from then on it operates them.

Given ``--ports/--gpus`` it watches those; given neither, the fleet the state records
(``tui.fleet.recorded``: ``gpufleet demo --base-port 25000`` runs on 25000-25006), else the
default ports 30000-30006 on GPUs 0-6. Either way the generation chart marks the journal's
operations on the GPUs it watches: a console given ``--ports`` showed none.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui.fleet.spec import FleetSpec
    from tui.ui.pipeline.chart_read import SeriesSource

PORTS_DEFAULT = "30000-30006"
GPUS_DEFAULT = "0-6"


def watched_fleet(args: argparse.Namespace) -> tuple[FleetSpec, str]:
    """The fleet the console's ``--ports/--gpus/--log-dir/--log-pattern`` name, and its words.

    Neither ``--ports`` nor ``--gpus``: the recorded fleet, else the default ports. ``--ports``
    alone: each port's recorded GPU when the state records them all, else GPUs 0-6.

    Raises:
        ValueError: a bad option (one line, naming it).
        StateFileError: the fleet state is damaged (naming the file).
    """
    from tui.fleet.recorded import default_fleet, fleet_words, recorded_gpus
    from tui.fleet.spec import FleetSpec
    from tui.ops.devices import on_devices
    from tui.profiles.templates import log_file_problem
    from tui.ui.cli import parse_range

    if args.ports is None and args.gpus is None:
        spec, recorded = default_fleet()
        if recorded:
            words = f"the fleet state's {fleet_words(spec)}"
        else:
            words = f"{fleet_words(spec)}, the default: the fleet state records none"
    else:
        ports = parse_range(args.ports or PORTS_DEFAULT, "--ports", 1, 65535)
        by_port = recorded_gpus() if args.gpus is None else {}
        if args.gpus is None and set(ports) <= by_port.keys():
            gpus = tuple(by_port[p] for p in ports)  # 'console --ports 25003': the demo's GPU 3
        else:
            gpus = parse_range(args.gpus or GPUS_DEFAULT, "--gpus", 0, 15)
        if len(ports) != len(gpus):
            raise ValueError(
                f"--ports gives {len(ports)} ports but --gpus gives {len(gpus)} GPUs; "
                "give one port per GPU"
            )
        spec = FleetSpec.from_ports(ports, gpus)
        words = fleet_words(spec)
    problem = log_file_problem(
        args.log_pattern, [s.gpu_index for s in spec.servers], [s.port for s in spec.servers]
    )
    if problem is not None:
        raise ValueError(f"--log-pattern={args.log_pattern!r}: {problem}")
    if args.log_dir is not None:
        logs = Path(args.log_dir)
        spec = FleetSpec(
            tuple(
                dataclasses.replace(
                    s, log_path=str(logs / args.log_pattern.format(gpu=s.gpu_index, port=s.port))
                )
                for s in spec.servers
            )
        )
    return on_devices(spec, args.devices), words  # two ports on one card: --devices 0,0


def run_watch_console(args: argparse.Namespace, readonly: bool, chart: SeriesSource | None) -> int:
    """The console watching ``watched_fleet(args)``, its chart marked by the journal.

    Returns:
        0, or 2 for bad input (named on stderr).
    """
    from tui.console_wiring import DetachedAutotune
    from tui.fleet.monitor import FleetMonitor
    from tui.fleet.recorded import journal_gpus
    from tui.gpu.source import open_gpu_source
    from tui.ops.local import LocalFleet
    from tui.ops.marks import JournalMarks
    from tui.ops.service import FleetOps
    from tui.ops.types import StateFileError
    from tui.ui.app import FleetApp

    try:
        spec, _ = watched_fleet(args)
        gpus = journal_gpus(spec)
    except (ValueError, KeyError, StateFileError) as error:
        print(f"gpufleet console: {error}", file=sys.stderr)
        return 2
    monitor = FleetMonitor(spec, open_gpu_source())
    # It only watches until its servers are adopted (`A`); then it operates them.
    port = LocalFleet(
        FleetOps(by="console"),
        monitor,
        watching=True,
        log_dir=args.log_dir,
        log_pattern=args.log_pattern,
        marks=JournalMarks(gpus=gpus),
        autotune=DetachedAutotune(),  # once adopted: the search on this host
    )
    app = FleetApp(port, readonly=readonly)
    app.chart_source = chart
    app.freeze_heap = True
    app.alerts_on = True  # this node's alerts (tui.ui.alerts)
    app.run()
    return 0
