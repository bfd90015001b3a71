"""``gpufleet canary PROFILE --gpu N``: try a profile on one GPU against the others, headless.

Exit 0 when the canary came up (whatever its verdict, 'not measured' included: it is printed and
journalled), 1 when the canary GPU failed to come up, 2 when refused before anything was stopped
(invalid input or profile, another operation running).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from tui.cli_args import GPU_INDEX, SECONDS, SECONDS_OR_ZERO, ArgumentParser, number
from tui.ops.cli.common import (
    EXIT_LOST,
    add_drain_timeout,
    exit_status,
    parse_gpus,
    print_event,
    run_refusing,
    stop_timeouts,
)
from tui.ops.service import FleetOps, OpsOptions
from tui.retune.options import ApplyOptions
from tui.rollout.canary import CanaryOptions
from tui.rollout.canary_result import CanaryResult


def build_parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = ArgumentParser(prog="gpufleet canary", description=__doc__.split("\n")[0])
    p.add_argument("profile", help="candidate profile (name in the profiles dir or TOML path)")
    p.add_argument("--gpu", type=GPU_INDEX, required=True, help="the canary GPU")
    p.add_argument("--controls", help="comma-separated control GPUs (default: all other running)")
    p.add_argument("--window", type=SECONDS, default=60.0, help="planned window seconds")
    p.add_argument(
        "--warmup", type=SECONDS_OR_ZERO, default=20.0, help="ignored seconds after ready"
    )
    p.add_argument("--max-window", type=SECONDS, default=180.0, help="longest window seconds")
    p.add_argument("--interval", type=SECONDS, default=5.0, help="seconds per paired sample")
    p.add_argument(
        "--min-intervals",
        type=number(int, 1, 10**6),
        default=5,
        help="samples before the first look",
    )
    p.add_argument(
        "--level",
        type=number(float, 0, 1, low_open=True, high_open=True),
        default=0.95,
        help="family-wise confidence level",
    )
    p.add_argument(
        "--margin",
        type=number(float, 0, 1, low_open=True, high_open=True),
        default=0.03,
        help="'no difference' bound (relative)",
    )
    p.add_argument(
        "--baseline", type=SECONDS_OR_ZERO, default=10.0, help="seconds sampled before restart"
    )
    p.add_argument("--settle", type=SECONDS_OR_ZERO, default=30.0, help="cost: seconds after ready")
    p.add_argument("--timeout", type=SECONDS, default=600.0, help="seconds to ready")
    p.add_argument("--release-timeout", type=SECONDS, default=120.0, help="GPU release wait")
    add_drain_timeout(p, "--term-timeout")
    return p


def options_from(args: argparse.Namespace) -> CanaryOptions:
    """Canary options from parsed arguments."""
    return CanaryOptions(
        window_s=args.window,
        warmup_s=args.warmup,
        max_window_s=args.max_window,
        interval_s=args.interval,
        level=args.level,
        min_intervals=args.min_intervals,
        margin=args.margin,
        baseline_s=args.baseline,
        settle_s=args.settle,
        apply=ApplyOptions(
            timeout_s=args.timeout, release_timeout_s=args.release_timeout, measure=False
        ),
    )


def main(argv: Sequence[str]) -> int:
    """Run ``gpufleet canary``; returns the exit status."""
    args = build_parser().parse_args(list(argv))
    opts = options_from(args)
    stop = stop_timeouts(args, args.release_timeout)
    ops = FleetOps(options=OpsOptions(stop=stop, canary=opts), by="cli")

    def run() -> CanaryResult:
        controls = parse_gpus(args.controls, "--controls") if args.controls else None
        return asyncio.run(ops.canary(args.profile, args.gpu, print_event, opts, controls=controls))

    status, result = run_refusing("gpufleet canary", run)
    if status:
        return status
    if result.refused:
        for error in result.refused:
            print(f"gpufleet canary: refused: {error}", file=sys.stderr)
        return 2
    print(result.describe())
    report = result.report
    if report is not None and report.drain_note:
        print(f"GPU {report.gpu}: old server: {report.drain_note} (exit {EXIT_LOST})")
    return exit_status(result.ok, report is not None and report.lost_requests)
