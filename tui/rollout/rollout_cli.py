"""``gpufleet rollout PROFILE [--gpus 0,1] [--batch K] [--from-canary]`` and ``--rollback``.

Exit 0 when every planned GPU is ready on the profile, 1 when the rollout stopped at a failure
(the journal says which GPU failed and which stayed on the old profile), 2 on invalid input
(nothing stopped).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from tui.cli_args import SECONDS, SECONDS_OR_ZERO, ArgumentParser, number
from tui.profiles import ProfileError, load_named
from tui.retune.cli import UsageError, _printer, parse_gpus
from tui.retune.journal import read_journal
from tui.retune.options import ApplyOptions
from tui.retune.running import profile_of, read_running
from tui.rollout.rollout import (
    Rollout,
    RolloutOptions,
    RolloutResult,
    rollback_plan,
    rollout_plan,
)


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
    p.add_argument("--no-restore", action="store_true", help="leave a failed GPU stopped")
    p.add_argument("--timeout", type=SECONDS, default=600.0, help="per-GPU seconds to ready")
    p.add_argument("--release-timeout", type=SECONDS, default=120.0, help="GPU release wait")
    p.add_argument("--term-timeout", type=SECONDS, default=30.0, help="SIGTERM -> SIGKILL seconds")
    p.add_argument("--no-cost", action="store_true", help="do not measure the throughput cost")
    p.add_argument("--baseline", type=SECONDS_OR_ZERO, default=10.0, help="cost: seconds before")
    p.add_argument("--settle", type=SECONDS_OR_ZERO, default=30.0, help="cost: seconds after")
    return p


def _canary_profile() -> str:
    """The profile of the last canary entry, which must say 'better'."""
    for entry in reversed(read_journal().entries):
        if entry.get("type") == "canary" and not entry.get("refused"):
            if entry.get("verdict") != "better":
                raise UsageError(
                    f"--from-canary: the last canary ({entry.get('profile')!r} on GPU "
                    f"{entry.get('gpu')}) said {entry.get('verdict')!r}, not 'better'"
                )
            gpu = int(entry["gpu"])
            current = read_running().get(gpu)
            if current is None or current.current is None:
                raise UsageError(f"--from-canary: GPU {gpu} has no running profile recorded")
            return str(current.current.get("name"))
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
        measure_cost=not args.no_cost,
        baseline_s=args.baseline,
        settle_s=args.settle,
    )
    try:
        gpus = parse_gpus(args.gpus) if args.gpus else None
        if args.rollback:
            if args.profile or args.from_canary:
                raise UsageError("--rollback takes no PROFILE and no --from-canary")
            plan = rollback_plan(gpus)
            rollout = Rollout(plan, plan[0][1], options, rollback=True, on_event=_printer)
        else:
            if args.from_canary:
                if args.profile:
                    raise UsageError("give PROFILE or --from-canary, not both")
                running = read_running()
                name = _canary_profile()
                doc = next(p.current for p in running.values() if p.current_name == name)
                assert doc is not None
                profile = profile_of(doc)
            elif args.profile:
                profile = load_named(args.profile)
            else:
                raise UsageError("PROFILE is required (or --from-canary, or --rollback)")
            todo, skipped = rollout_plan(profile, gpus)
            rollout = Rollout(todo, profile, options, skipped=skipped, on_event=_printer)
    except (UsageError, ProfileError, ValueError) as exc:
        print(f"gpufleet rollout: {exc}", file=sys.stderr)
        return 2
    result: RolloutResult = asyncio.run(rollout.run())
    if result.refused:
        for error in result.refused:
            print(f"gpufleet rollout: refused: {error}", file=sys.stderr)
        return 2
    print(result.describe())
    return 0 if result.ok else 1
