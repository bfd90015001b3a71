"""``gpufleet [console]``: open the console on a fleet given by a profile, or by ports and GPUs.

With ``--profile NAME`` the fleet (GPUs, ports, host, log files) comes from the profile and every
operation key works (``tui.ops.local.LocalFleet``); with ``--ports/--gpus`` only the watching,
and with none of these the watching of the fleet the state records (``tui.ui.watch_cli``).
``--readonly`` (or ``readonly = true`` under ``[console]`` in the settings file) disables every
key that changes the fleet or the job.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tui.cli_args import ArgumentParser, number
from tui.gpu.cards import add_card_options, card_bytes
from tui.ops.windows import (  # re-exported: the console's options as they always were
    MEASURE_WINDOW_DEFAULT_S,
    MEASURE_WINDOW_RANGE_S,
    ConsoleWindows,
    console_apply_options,
    console_canary_options,
    console_windows,
)

__all__ = [
    "MEASURE_WINDOW_DEFAULT_S",
    "MEASURE_WINDOW_RANGE_S",
    "ConsoleWindows",
    "console_apply_options",
    "console_canary_options",
    "console_windows",
]
from tui.ui.watch_cli import GPUS_DEFAULT, PORTS_DEFAULT

if TYPE_CHECKING:
    from tui.fleet.monitor import FleetMonitor
    from tui.ops.pipeline import PipelineConfig
    from tui.profiles import Profile
    from tui.ui.pipeline.chart_read import SeriesSource

CONSOLE_FLEET_TIMEOUT_S = 3600.0
"""A pipeline started from the console waits this long for a ready server (a full retune)."""


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
) -> FleetMonitor:
    """The fleet monitor for these options (NVML, else the simulated GPUs, else none).

    Args:
        ports: One port per server.
        gpus: The GPU of each server.
        log_dir: Directory of the logs; None lets the monitor find them from the processes.
        log_pattern: Log file name with ``{gpu}`` for the GPU index.

    Returns:
        The monitor.
    """
    from tui.fleet.monitor import FleetMonitor
    from tui.fleet.spec import FleetSpec
    from tui.gpu.source import open_gpu_source

    logs: list[str | None] | None = None
    if log_dir is not None:
        logs = [
            str(Path(log_dir) / log_pattern.format(gpu=gpu, port=port))
            for gpu, port in zip(gpus, ports, strict=True)
        ]
    spec = FleetSpec.from_ports(ports, gpus, log_paths=logs)
    return FleetMonitor(spec, open_gpu_source())


def add_measure_window(parser: argparse.ArgumentParser) -> None:
    """Add ``--measure-window S`` (the throughput window of applies from the console)."""
    parser.add_argument(
        "--measure-window",
        type=number(float, *MEASURE_WINDOW_RANGE_S),
        default=MEASURE_WINDOW_DEFAULT_S,
        metavar="S",
        help="seconds of each throughput window of an apply, and of a canary's planned window "
        f"(default {MEASURE_WINDOW_DEFAULT_S:g})",
    )


def add_readonly(parser: argparse.ArgumentParser) -> None:
    """Add ``--readonly`` / ``--no-readonly`` (default: the settings file's ``readonly``)."""
    parser.add_argument(
        "--readonly",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="watch only: every key that changes the fleet or the job is disabled (default: "
        "[console] readonly in the settings file, else off)",
    )


def readonly_or_exit(command: str, flag: bool | None) -> bool | None:
    """``resolve_readonly``, or None after printing a one-line error about the settings file."""
    from tui.ui.settings import SettingsError, resolve_readonly

    try:
        return resolve_readonly(flag)
    except SettingsError as error:
        print(f"gpufleet {command}: {error}", file=sys.stderr)
        return None


def build_parser() -> argparse.ArgumentParser:
    """The console's options."""
    parser = ArgumentParser(prog="gpufleet console", description=__doc__)
    parser.add_argument(
        "--ports",
        default=None,
        help="server ports, e.g. 30000-30006 (default: with no --gpus or --profile, the ports and "
        f"hosts the fleet state records, as 'gpufleet status' reads them; else {PORTS_DEFAULT})",
    )
    parser.add_argument(
        "--gpus",
        default=None,
        help="GPU indices, e.g. 0-6, one per port (default: the GPUs the fleet state records on "
        f"the ports, else {GPUS_DEFAULT})",
    )
    parser.add_argument(
        "--devices",
        default=None,
        help="the card each port's server runs on, one per port, e.g. 0,0 for two servers "
        "sharing card 0 (default: each GPU's own; watching only: a profile says [gpu.N] device)",
    )
    parser.add_argument("--log-dir", default=None, help="directory of the servers' logs")
    parser.add_argument(
        "--log-pattern",
        default="sglang_gpu{gpu}.log",
        help="log file name; {gpu} is the index, {port} the port",
    )
    parser.add_argument(
        "--profile", default=None, help="tuning profile of the fleet (its GPUs, ports and logs)"
    )
    parser.add_argument(
        "--prompts",
        type=Path,
        default=None,
        help="JSONL prompts of the pipeline the console starts (default: the demo's, if any)",
    )
    parser.add_argument(
        "--agents",
        default=None,
        metavar="HOST:PORT,...",
        help="a console over many nodes: their agents (gpufleet agent), e.g. node1:9400,node2:9400",
    )
    parser.add_argument(
        "--fleet",
        type=Path,
        default=None,
        metavar="FILE",
        help="a console over many nodes from a fleet file: [[agent]] tables with address and "
        "token_file (tui/agent/fleet_file.py)",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        default=None,
        help="the agents' bearer token (default: the state directory's agent.token)",
    )
    parser.add_argument(
        "--prometheus",
        default=None,
        metavar="URL",
        help="a Prometheus server scraping the agents (deploy/prometheus.yml): the generation "
        "pane's chart reads the job's output rate from it, over ranges the console never saw",
    )
    add_measure_window(parser)
    add_card_options(parser)
    add_readonly(parser)
    return parser


def run_nodes_console(
    agents: str | None,
    token_file: Path | None,
    readonly: bool = False,
    chart: SeriesSource | None = None,
    fleet: Path | None = None,
) -> int:
    """The console over many nodes' agents (``--agents``, or ``--fleet FILE``).

    Args:
        agents: ``host:port,host:port`` (None with ``fleet``).
        token_file: The agents' token (default: the state directory's ``agent.token``; with a
            fleet file, the token of the agents that name none).
        readonly: Watch only (every changing key disabled, the backend refusing).
        chart: Where the generation pane's chart reads (``--prometheus``).
        fleet: A fleet file (``tui.agent.fleet_file``).

    Returns:
        0, or 2 for bad input (named on stderr).
    """
    from tui.console_wiring import remote_port
    from tui.ui.app import FleetApp

    try:
        nodes = remote_port(agents, token_file, fleet)
    except ValueError as error:  # a bad address, fleet file or token (TokenError too)
        print(f"gpufleet console: {error}", file=sys.stderr)
        return 2
    app = FleetApp(nodes, node_groups=True, readonly=readonly)
    app.chart_source = chart
    app.freeze_heap = True
    app.close_on_exit = nodes.aclose  # its client, shared by the polls and the form's preflights
    app.run()
    return 0


def run_console(
    profile: Profile,
    pipeline: PipelineConfig | None,
    *,
    stop_pipeline_with_fleet: bool = False,
    windows: ConsoleWindows | None = None,
    readonly: bool = False,
    chart: SeriesSource | None = None,
    card: int | None = None,
) -> int:
    """Run the console on ``profile``'s fleet with every operation backed by the real core.

    Args:
        profile: The fleet's profile.
        pipeline: The pipeline the console starts and stops (None: no pipeline keys).
        stop_pipeline_with_fleet: Quitting with "stop" stops the pipeline as well (the demo).
        windows: Timeouts and throughput windows of applies and canaries (``console_windows()``).
        readonly: Watch only (``FleetApp``'s read-only mode).
        chart: Where the generation pane's chart reads (``--prometheus``; default: the console's
            own history).
        card: The GPUs' capacity for the tuning form's preflight where no driver answers
            (``--card``, ``--card-gb``).

    Returns:
        0.
    """
    from tui.console_wiring import DetachedAutotune
    from tui.fleet.monitor import FleetMonitor
    from tui.gpu.simulated import SimulatedSource
    from tui.gpu.source import open_gpu_source
    from tui.ops.demo import spec_for_profile
    from tui.ops.local import LocalFleet
    from tui.ops.marks import JournalMarks
    from tui.ops.service import FleetOps, OpsOptions
    from tui.ui.app import FleetApp

    # A simulated fleet may not have published its GPUs yet: read them as they appear.
    gpus = SimulatedSource() if profile.engine.kind == "sim" else open_gpu_source()
    monitor = FleetMonitor(spec_for_profile(profile), gpus)
    # Shorter windows than the headless default: the operator watches the verdict arrive.
    windows = windows or console_windows()
    ops = FleetOps(
        profile,
        options=OpsOptions(
            apply=windows.apply,
            canary=windows.canary,
            rollout=windows.rollout,
            card_bytes=card,
        ),
        by="console",
        pipeline=pipeline,
        stop_pipeline_with_fleet=stop_pipeline_with_fleet,
    )
    status = pipeline.status_path if pipeline is not None else None
    port = LocalFleet(
        ops, monitor, status_path=status, marks=JournalMarks(), autotune=DetachedAutotune()
    )
    app = FleetApp(port, profile=profile.name, readonly=readonly)
    app.chart_source = chart
    app.freeze_heap = True
    app.alerts_on = True  # this node's alerts (tui.ui.alerts)
    app.run()
    return 0


def _profile_console(args: argparse.Namespace, readonly: bool, chart: SeriesSource | None) -> int:
    from tui.ops.demo import demo_prompts_file, pipeline_config
    from tui.ops.fit import fit_to_fleet
    from tui.ops.types import StateFileError, profile_of, read_fleet
    from tui.profiles import ProfileError, load_named

    try:
        windows = console_windows(args.measure_window)
        profile = load_named(args.profile)
    except ProfileError as error:  # a ValueError too: caught first
        print(f"gpufleet console: --profile: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"gpufleet console: {error}", file=sys.stderr)
        return 2
    # The fleet may run this profile as launched (the demo's speed and ports): watch that. Else
    # its flags on the fleet's ports: after a demo on --base-port 25000 applied another profile,
    # '--profile sim-baseline' watched the profile file's 30000-30006, where nothing ran.
    try:
        state = read_fleet()
    except StateFileError as error:  # never open on a record read as "no servers"
        print(f"gpufleet console: {error}", file=sys.stderr)
        return 2
    docs = [p.current for p in state.values() if p.current_name == profile.name]
    fitted = fit_to_fleet(profile, state)
    if docs and docs[0] is not None:
        with contextlib.suppress(ProfileError):
            fitted = profile_of(docs[0])
    profile = fitted
    prompts = args.prompts if args.prompts is not None else demo_prompts_file()
    if args.prompts is not None and not prompts.is_file():
        print(f"gpufleet console: --prompts: {str(prompts)!r} is not a file", file=sys.stderr)
        return 2
    pipeline = None
    if prompts.is_file():
        pipeline = pipeline_config(profile, prompts, CONSOLE_FLEET_TIMEOUT_S)
    # Quitting with "stop" stops the pipeline too: otherwise it would wait an hour for servers.
    return run_console(
        profile,
        pipeline,
        stop_pipeline_with_fleet=True,
        windows=windows,
        readonly=readonly,
        chart=chart,
        card=card_bytes(args),
    )


def main(argv: Sequence[str]) -> int:
    """Parse the options, build the fleet monitor and run the console.

    Args:
        argv: Arguments after the command name.

    Returns:
        The exit status.
    """
    args = build_parser().parse_args(list(argv))
    readonly = readonly_or_exit("console", args.readonly)
    if readonly is None:
        return 2
    from tui.console_wiring import prometheus_chart

    try:
        chart = prometheus_chart(args.prometheus)
    except ValueError as error:
        print(f"gpufleet console: {error}", file=sys.stderr)
        return 2
    if args.devices is not None and (args.profile or args.agents or args.fleet):
        print(
            "gpufleet console: --devices is for --ports (a profile: [gpu.N] device)",
            file=sys.stderr,
        )
        return 2
    if args.agents is not None or args.fleet is not None:
        if args.profile is not None or (args.agents is not None and args.fleet is not None):
            print("gpufleet console: give one of --agents, --fleet or --profile", file=sys.stderr)
            return 2
        return run_nodes_console(args.agents, args.token_file, readonly, chart, args.fleet)
    if args.profile is not None:
        return _profile_console(args, readonly, chart)
    from tui.ui.watch_cli import run_watch_console

    return run_watch_console(args, readonly, chart)
