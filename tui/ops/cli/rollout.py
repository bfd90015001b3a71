"""``gpufleet rollout PROFILE [--gpus 0,1] [--batch K] [--from-canary]`` and ``--rollback``.

Both walk the fleet ``--batch`` GPUs at a time (a rollback goes back in reverse GPU order; all of
them together only with ``--all-at-once``), each batch verified before the next, and end with
the fleet's verdict: its output tokens/s over ``--window`` seconds before the first batch
against the same window after the last one (after ``--warmup``), with its interval, or "not
measured (why)". Exit 0 when every planned GPU is ready on the profile, 1 when the rollout
stopped at a failure (the journal says which GPU failed and which stayed on the old profile), 2
when refused before anything was stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from tui.cli_args import SECONDS, SECONDS_OR_ZERO, ArgumentParser, number
from tui.ops.cli.common import (
    EXIT_LOST,
    UsageError,
    add_drain_timeout,
    exit_status,
    parse_gpus,
    print_event,
    run_refusing,
    stop_timeouts,
)
from tui.ops.journal import read_journal
from tui.ops.service import FleetOps, OpsOptions
from tui.profiles import Profile
from tui.retune.events import lost_summary
from tui.retune.options import ApplyOptions
from tui.rollout.fleet_verdict import VerdictWindows
from tui.rollout.rollout import RolloutOptions, RolloutResult
from tui.state.fleet_state import profile_of, read_fleet


def build_parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = ArgumentParser(prog="gpufleet rollout", description=__doc__.split("\n")[0])
    p.add_argument("profile", nargs="?", help="profile name or TOML path")
    p.add_argument("--gpus", help="comma-separated GPU indices (default: every GPU)")
    p.add_argument(
        "--batch", type=number(int, 1, 1024), default=1, help="GPUs restarted together (default 1)"
    )
    p.add_argument(
        "--from-canary",
        action="store_true",
        help="roll out the profile of the last 'better' canary (its GPU is skipped)",
    )
    p.add_argument("--rollback", action="store_true", help="walk back to each previous profile")
    p.add_argument(
        "--all-at-once",
        action="store_true",
        help="with --rollback: every GPU back together (default: --batch at a time)",
    )
    p.add_argument("--no-restore", action="store_true", help="leave a failed GPU stopped")
    p.add_argument("--timeout", type=SECONDS, default=600.0, help="per-GPU seconds to ready")
    p.add_argument("--release-timeout", type=SECONDS, default=120.0, help="GPU release wait")
    add_drain_timeout(p, "--term-timeout")
    p.add_argument(
        "--no-measure",
        "--no-cost",
        dest="no_measure",
        action="store_true",
        help="sample nothing: no throughput cost, no fleet verdict",
    )
    p.add_argument("--baseline", type=SECONDS_OR_ZERO, default=10.0, help="cost: seconds before")
    p.add_argument("--settle", type=SECONDS_OR_ZERO, default=30.0, help="cost: seconds after")
    p.add_argument(
        "--window",
        type=SECONDS_OR_ZERO,
        default=60.0,
        help="fleet verdict: seconds measured before and after (0: no verdict)",
    )
    p.add_argument(
        "--warmup", type=SECONDS_OR_ZERO, default=30.0, help="fleet verdict: ignored seconds"
    )
    p.add_argument("--interval", type=SECONDS, default=5.0, help="fleet verdict: sample seconds")
    return p


def canary_profile() -> Profile:
    """The profile the last canary's GPU runs, when that canary said 'better'."""
    for entry in reversed(read_journal().entries):
        if entry.type == "canary" and not entry.refused:
            if entry.verdict != "better":
                raise UsageError(
                    f"--from-canary: the last canary ({entry.target!r} on GPU "
                    f"{list(entry.gpus)}) said {entry.verdict!r}, not 'better'"
                )
            gpu = entry.gpus[0] if entry.gpus else -1
            current = read_fleet().get(gpu)
            if current is None or current.current is None:
                raise UsageError(f"--from-canary: GPU {gpu} has no running profile recorded")
            return profile_of(current.current)
    raise UsageError("--from-canary: no canary in the journal")


def main(argv: Sequence[str]) -> int:
    """Run ``gpufleet rollout``; returns the exit status."""
    args = build_parser().parse_args(list(argv))
    options = RolloutOptions(
        batch=args.batch,
        apply=ApplyOptions(
            timeout_s=args.timeout, release_timeout_s=args.release_timeout, measure=False
        ),
        restore_failed=not args.no_restore,
        measure_cost=not args.no_measure,
        baseline_s=args.baseline,
        settle_s=args.settle,
        verdict=VerdictWindows(args.window, args.warmup, args.interval),
    )
    stop = stop_timeouts(args, args.release_timeout)
    ops = FleetOps(options=OpsOptions(stop=stop, rollout=options), by="cli")

    def run() -> RolloutResult:
        errors = options.errors()
        if errors:
            raise UsageError("; ".join(errors))
        gpus = parse_gpus(args.gpus) if args.gpus else None
        if args.rollback:
            if args.profile or args.from_canary:
                raise UsageError("--rollback takes no PROFILE and no --from-canary")
            return asyncio.run(
                ops.rollout_back(gpus, args.batch, print_event, all_at_once=args.all_at_once)
            )
        if args.all_at_once:
            raise UsageError("--all-at-once: only a rollback (--rollback) takes it")
        if args.from_canary:
            if args.profile:
                raise UsageError("give PROFILE or --from-canary, not both")
            profile: Profile | str = canary_profile()
        elif args.profile:
            profile = args.profile
        else:
            raise UsageError("PROFILE is required (or --from-canary, or --rollback)")
        return asyncio.run(ops.rollout(profile, args.batch, gpus, print_event))

    status, result = run_refusing("gpufleet rollout", run)
    if status:
        return status
    if result.refused:
        for error in result.refused:
            print(f"gpufleet rollout: refused: {error}", file=sys.stderr)
        return 2
    print(result.describe())
    reports = [report for step in result.steps for report in step.reports]
    lost = lost_summary(reports)
    if lost:
        print(f"{lost} (exit {EXIT_LOST})")
    return exit_status(result.ok, any(r.lost_requests for r in reports))
