"""``gpufleet demo``: the simulated 7-GPU fleet, a pipeline over a demo prompt set, the console.

A fleet left running by an earlier demo (fleet record, alive, same identity) is re-attached, not
started again; so is its pipeline. Quitting offers to stop both or to keep them running for the
next ``gpufleet demo`` (or ``gpufleet --profile sim-baseline``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Sequence

from tui.cli_args import ArgumentParser
from tui.ui.cli import (
    add_measure_window,
    add_readonly,
    console_windows,
    readonly_or_exit,
    run_console,
)

DEMO_FLEET_TIMEOUT_S = 3600.0
"""The demo pipeline waits this long for a ready server (startup, a retune of every GPU)."""


def build_parser() -> argparse.ArgumentParser:
    """The demo's options."""
    parser = ArgumentParser(
        prog="gpufleet demo",
        description="The simulated 7-GPU fleet, a pipeline over a demo prompt set, the console. "
        "A fleet (and pipeline) left running by an earlier demo is re-attached; a demo job that "
        "finished is started afresh.",
    )
    parser.add_argument("--gpus", type=int, default=None, help="run only the first N GPUs (1-7)")
    parser.add_argument("--speed", type=float, default=None, help="simulator speed (default 20)")
    parser.add_argument(
        "--base-port", type=int, default=None, help="first port (default 30000 from the profile)"
    )
    parser.add_argument(
        "--profile", default=None, help="sim profile to start from (default sim-baseline)"
    )
    parser.add_argument(
        "--no-pipeline", action="store_true", help="do not start the generation pipeline"
    )
    add_measure_window(parser)
    add_readonly(parser)
    return parser


def main(argv: Sequence[str]) -> int:
    """Start (or re-attach) the simulated fleet and its pipeline, then run the console.

    Args:
        argv: Arguments after ``demo``.

    Returns:
        0 after the console closed; 1 when the fleet could not be started; 2 on bad options.
    """
    args = build_parser().parse_args(list(argv))
    readonly = readonly_or_exit("demo", args.readonly)
    if readonly is None:
        return 2
    from tui.ops.demo import (
        demo_profile,
        demo_prompts_file,
        ensure_prompts,
        fresh_job_if_finished,
        pipeline_config,
        still_running,
    )
    from tui.ops.lock import OperationBusy
    from tui.ops.pipeline import start_pipeline
    from tui.ops.service import FleetOps, OperationError
    from tui.ops.simfleet import sim_profile
    from tui.ops.types import StateFileError
    from tui.profiles import ProfileError

    try:
        windows = console_windows(args.measure_window)
        profile = demo_profile(sim_profile(args.profile), args.gpus, args.speed, args.base_port)
    except (ProfileError, ValueError) as error:
        print(f"gpufleet demo: {error}", file=sys.stderr)
        return 2
    print(f"gpufleet demo: bringing up {len(profile.gpus)} simulated servers ({profile.name})")
    ops = FleetOps(profile, by="demo")
    try:
        started = asyncio.run(ops.start(profile))
    except (OperationBusy, StateFileError) as error:
        print(f"gpufleet demo: {error}", file=sys.stderr)
        return 1
    failed = {g: why for g, why in started.items() if why}
    if failed:
        for message in failed.values():
            print(f"gpufleet demo: {message}", file=sys.stderr)
        running = [g for g in started if g not in failed]
        if running:  # leave nothing behind
            with contextlib.suppress(OperationError, OperationBusy):
                asyncio.run(ops.kill(running, mode="terminate"))
        left = still_running(profile)  # checked, not assumed
        if not left:
            print("gpufleet demo: the fleet could not be started; nothing was left running")
        else:
            print("gpufleet demo: the fleet could not be started; still running:")
            for line in left:
                print(f"gpufleet demo:   {line}")
        return 1
    prompts = demo_prompts_file()
    config = pipeline_config(profile, prompts, DEMO_FLEET_TIMEOUT_S)
    if not args.no_pipeline:
        if ensure_prompts(prompts):
            print(f"gpufleet demo: wrote the demo prompt set {prompts}")
        fresh = fresh_job_if_finished(config)
        if fresh is not None:
            print(f"gpufleet demo: {fresh}")
        pid = start_pipeline(config)
        print(f"gpufleet demo: pipeline pid {pid}, status {config.status_path}")
    # Read-only, the demo still brings its own fleet up (that is the demo); the console watches.
    return run_console(
        profile, config, stop_pipeline_with_fleet=True, windows=windows, readonly=readonly
    )
