"""``gpufleet apply PROFILE [--gpus 0,5] ...``: retune and verify, headless.

Same operation as the console's apply (``FleetOps.apply``): preflight, drain the old servers
(cordoned: the pipeline sends them nothing new), GPU memory released, launch, startup phases,
ready on every targeted GPU with logs and processes watched, a verify report per GPU, a
throughput verdict, a journal entry. Exit 0 only when every targeted GPU is ready; 1 when any
failed; 2 when refused before anything was stopped (invalid input or profile, another operation
running). ``--rollback`` returns each GPU to the profile it ran before the last change, one GPU
at a time (all together with ``--all-at-once``), each verified before the next, and ends with the
fleet's throughput verdict (``--window`` before the first GPU stops against the same window
after the last is ready), as ``gpufleet rollout --rollback`` does.

``--preflight-only`` prints the release the plans follow and each GPU's prediction, stops nothing
and exits 0 when every GPU was predicted (fitting or not), 4 when one could not be (each line says
why). Where no NVIDIA driver answers (planning off the GPU machine), ``--card b200|h200|h100`` or
``--card-gb GB`` names the card (``tui.gpu.cards``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import asdict

from tui.cli_args import SECONDS, SECONDS_OR_ZERO, ArgumentParser
from tui.fleet.log_paths import server_logs
from tui.gpu.cards import add_card_options, card_bytes
from tui.ops.cli.common import (
    EXIT_LOST,
    UsageError,
    add_drain_timeout,
    exit_status,
    format_report,
    parse_gpus,
    print_event,
    run_refusing,
    stop_timeouts,
)
from tui.ops.service import FleetOps, OpsOptions
from tui.profiles import Profile
from tui.retune.events import ApplyResult, lost_summary
from tui.retune.options import ApplyOptions
from tui.retune.preflight import (
    Preflight,
    calibration_from_log,
    planned_for_lines,
    predict_walk,
)
from tui.rollout.fleet_verdict import VerdictWindows
from tui.rollout.rollout import RolloutOptions, RolloutResult
from tui.sglang.memory import Calibration
from tui.state.fleet_state import read_fleet
from tui.words import gpus_words

UNPREDICTED = 4
"""``--preflight-only``'s exit status when a GPU could not be predicted (no driver and no
``--card``, a model that cannot be planned, a GPU this machine does not have)."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = ArgumentParser(prog="gpufleet apply", description=__doc__.split("\n")[0])
    p.add_argument("profile", nargs="?", help="profile name (in the profiles dir) or TOML path")
    p.add_argument("--gpus", help="comma-separated GPU indices (default: every GPU of the profile)")
    p.add_argument("--timeout", type=SECONDS, default=600.0, help="per-GPU seconds to ready")
    p.add_argument("--release-timeout", type=SECONDS, default=120.0, help="per-GPU release wait")
    add_drain_timeout(p, "--term-timeout")
    p.add_argument(
        "--stop-mode",
        choices=("drain", "terminate", "kill"),
        default="drain",
        help="drain (default: finish in-flight requests), terminate or kill the old servers",
    )
    p.add_argument("--stagger", type=SECONDS_OR_ZERO, default=0.0, help="seconds between launches")
    p.add_argument("--window", type=SECONDS, default=60.0, help="throughput window seconds")
    p.add_argument(
        "--warmup", type=SECONDS_OR_ZERO, default=30.0, help="ignored seconds before 'after'"
    )
    p.add_argument("--interval", type=SECONDS, default=5.0, help="throughput sample interval")
    p.add_argument("--no-measure", action="store_true", help="skip the throughput comparison")
    p.add_argument(
        "--preflight-only",
        action="store_true",
        help="print the preflight, stop (exit 4 when a GPU could not be predicted)",
    )
    add_card_options(p)
    p.add_argument("--rollback", action="store_true", help="relaunch each GPU's previous profile")
    p.add_argument(
        "--all-at-once",
        action="store_true",
        help="with --rollback: every GPU back together (default: one GPU at a time)",
    )
    return p


def print_preflight(
    profile: Profile, gpus: Sequence[int], card_bytes: int | None = None
) -> list[int]:
    """Print the release the plans follow, then each GPU's predicted allocation (calibrated on
    its server's log as the console finds it: ``tui.fleet.log_paths``).

    Args:
        profile: the profile, fitted to the fleet.
        gpus: the GPUs to predict.
        card_bytes: the capacity where no driver answers (``--card``, ``--card-gb``).

    Returns:
        The GPUs that could not be predicted (each line says why).
    """
    logs = server_logs(profile, gpus, read_fleet())
    items: list[Preflight] = []
    lines: list[str] = []
    unpredicted: list[int] = []

    def calibration(gpu: int) -> Calibration | None:
        return calibration_from_log(logs[gpu]) if gpu in logs else None

    for gpu, item, why in predict_walk(profile, gpus, calibration, card_bytes):
        if item is None:
            lines.append(f"preflight GPU {gpu}: cannot predict: {why}")
            unpredicted.append(gpu)
            continue
        items.append(item)
        lines.append("preflight " + item.describe())
    for line in [*(f"preflight {p}" for p in planned_for_lines(items)), *lines]:
        print(line)
    return unpredicted


def print_result(result: ApplyResult) -> None:
    """The verify reports and the verdict."""
    for line in result.diff:
        print(f"diff: {line}")
    for report in result.reports:
        print("verify " + format_report({**asdict(report), "capped": report.capped}))
        if report.drain_note:
            print(f"  old server: {report.drain_note}")
        if report.error_line:
            print(f"  log line: {report.error_line}")
    reported = {r.gpu for r in result.reports}
    for gpu in result.gpus:
        if gpu not in reported:
            print(f"GPU {gpu}: untouched (the walk stopped before it); it runs what it ran")
    print(f"throughput: {result.throughput.describe()}")
    ready = sum(r.ok for r in result.reports)
    lost = lost_summary(result.reports)
    print(
        f"{ready}/{len(result.gpus)} GPUs ready; profile {result.profile}"
        + (f"; {lost} (exit {EXIT_LOST})" if lost else "")
    )


def print_walk(result: RolloutResult) -> int:
    """A rollback's verify reports, summary and fleet verdict; returns the exit status."""
    if result.refused:
        for error in result.refused:
            print(f"gpufleet apply: refused: {error}", file=sys.stderr)
        return 2
    reports = [report for step in result.steps for report in step.reports]
    for report in reports:
        print("verify " + format_report({**asdict(report), "capped": report.capped}))
        if report.drain_note:
            print(f"  old server: {report.drain_note}")
    print(result.describe())
    lost = lost_summary(reports)
    if lost:
        print(f"{lost} (exit {EXIT_LOST})")
    return exit_status(result.ok, any(r.lost_requests for r in reports))


def rollback_options(args: argparse.Namespace) -> RolloutOptions:
    """The rollback's timeouts and its fleet verdict's windows, from the apply's options."""
    return RolloutOptions(
        apply=ApplyOptions(
            timeout_s=args.timeout, release_timeout_s=args.release_timeout, measure=False
        ),
        measure_cost=not args.no_measure,
        verdict=VerdictWindows(args.window, args.warmup, args.interval),
    )


def operations(args: argparse.Namespace) -> FleetOps:
    """The operations service with the command line's timeouts and windows.

    Raises:
        UsageError: an option is out of range (naming it).
    """
    apply = ApplyOptions(
        timeout_s=args.timeout,
        release_timeout_s=args.release_timeout,
        stagger_s=args.stagger,
        window_s=args.window,
        warmup_s=args.warmup,
        interval_s=args.interval,
    )
    errors = apply.errors()
    if errors:
        raise UsageError("; ".join(errors))
    stop = stop_timeouts(args, args.release_timeout)
    return FleetOps(options=OpsOptions(apply=apply, stop=stop), by="cli")


def main(argv: Sequence[str]) -> int:
    """Run ``gpufleet apply``; returns the exit status (0 ok, 1 a GPU failed, 2 refused)."""
    args = build_parser().parse_args(list(argv))
    card = card_bytes(args)

    def prepare() -> tuple[FleetOps, Profile | None, list[int] | None]:
        ops = operations(args)
        gpus = parse_gpus(args.gpus) if args.gpus else None
        if args.rollback:
            if args.profile:
                raise UsageError("--rollback takes no PROFILE (it uses each GPU's previous one)")
            return ops, None, gpus
        if args.all_at_once:
            raise UsageError("--all-at-once: only a rollback (--rollback) takes it")
        if not args.profile:
            raise UsageError("PROFILE is required (or --rollback)")
        return ops, ops.load(args.profile), gpus

    status, prepared = run_refusing("gpufleet apply", prepare)
    if status:
        return status
    ops, profile, gpus = prepared
    if profile is None:
        walk = ops.rollout_back(
            gpus, 1, print_event, rollback_options(args), all_at_once=args.all_at_once
        )
        status, walked = run_refusing("gpufleet apply", lambda: asyncio.run(walk))
        return status or print_walk(walked)
    targets = gpus if gpus is not None else list(profile.gpus)
    unpredicted = print_preflight(profile, [g for g in targets if g in profile.gpus], card)
    if args.preflight_only:
        if unpredicted:
            print(
                f"gpufleet apply: --preflight-only: no prediction for {gpus_words(unpredicted)} "
                "(each line says why)",
                file=sys.stderr,
            )
            return UNPREDICTED
        return 0
    status, result = run_refusing(
        "gpufleet apply",
        lambda: asyncio.run(
            ops.apply(
                profile, targets, print_event, measure=not args.no_measure, mode=args.stop_mode
            )
        ),
    )
    if status:
        return status
    if result.refused:
        for error in result.refused:
            print(f"gpufleet apply: refused: {error}", file=sys.stderr)
        return 2
    print_result(result)
    return exit_status(result.ok, result.lost_requests)
