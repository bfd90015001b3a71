"""``gpufleet apply PROFILE [--gpus 0,5] ...``: retune and verify, headless.

Same steps as the console: preflight, stop, GPU memory released, launch, startup phases, ready
(``/health_generate``) on every targeted GPU with logs and processes watched, a verify report per
GPU, a throughput verdict, a journal entry. Exit 0 only when every targeted GPU is ready; 1 when
any failed; 2 on invalid input (nothing is stopped then). ``--rollback`` relaunches, on each GPU,
the profile it ran before the last apply.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from tui.cli_args import SECONDS, SECONDS_OR_ZERO, ArgumentParser
from tui.control.records import read_records
from tui.profiles import Profile, ProfileError, diff, load_named
from tui.retune.engine import RetuneEngine
from tui.retune.events import (
    ApplyRefused,
    ApplyResult,
    GpuFailed,
    GpuPhase,
    GpuReady,
    MeasureProgress,
    RetuneEvent,
)
from tui.retune.journal import append_entry, apply_entry
from tui.retune.journal_cli import format_report
from tui.retune.options import ApplyOptions
from tui.retune.preflight import calibration_from_log, preflight
from tui.retune.running import profile_of, read_running, record_outcome


class UsageError(ValueError):
    """Bad command-line input (exit 2)."""


def parse_gpus(text: str) -> list[int]:
    """'0,5' -> [0, 5]; raises UsageError naming the bad value."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise UsageError(f"--gpus: {part!r} is not a GPU index (expected e.g. 0,5)")
        out.append(int(part))
    return sorted(set(out))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = ArgumentParser(prog="gpufleet apply", description=__doc__.split("\n")[0])
    p.add_argument("profile", nargs="?", help="profile name (in the profiles dir) or TOML path")
    p.add_argument("--gpus", help="comma-separated GPU indices (default: every GPU of the profile)")
    p.add_argument("--timeout", type=SECONDS, default=600.0, help="per-GPU seconds to ready")
    p.add_argument("--release-timeout", type=SECONDS, default=120.0, help="per-GPU release wait")
    p.add_argument("--term-timeout", type=SECONDS, default=30.0, help="SIGTERM -> SIGKILL seconds")
    p.add_argument("--stagger", type=SECONDS_OR_ZERO, default=0.0, help="seconds between launches")
    p.add_argument("--window", type=SECONDS, default=60.0, help="throughput window seconds")
    p.add_argument(
        "--warmup", type=SECONDS_OR_ZERO, default=30.0, help="ignored seconds before 'after'"
    )
    p.add_argument("--interval", type=SECONDS, default=5.0, help="throughput sample interval")
    p.add_argument("--no-measure", action="store_true", help="skip the throughput comparison")
    p.add_argument("--preflight-only", action="store_true", help="print the preflight, stop")
    p.add_argument("--rollback", action="store_true", help="relaunch each GPU's previous profile")
    return p


def _printer(event: RetuneEvent) -> None:
    if isinstance(event, GpuPhase):
        print(f"GPU {event.gpu}: {event.phase} ({event.elapsed_s:.1f} s)", flush=True)
    elif isinstance(event, GpuReady):
        print(f"GPU {event.gpu}: READY in {event.report.time_to_ready_s} s", flush=True)
    elif isinstance(event, GpuFailed):
        print(f"GPU {event.gpu}: FAILED {event.report.failure}", flush=True)
    elif isinstance(event, MeasureProgress) and event.samples == 0:
        print(f"throughput: {event.stage} window {event.window_s:g} s", flush=True)
    elif isinstance(event, ApplyRefused):
        for error in event.errors:
            print(f"refused: {error}", file=sys.stderr, flush=True)


def print_preflight(profile: Profile, gpus: Sequence[int]) -> None:
    """Print each GPU's predicted allocation (calibrated on its running server's log)."""
    records = read_records()
    for gpu in gpus:
        record = records.get(gpu)
        calibration = calibration_from_log(record.log_path) if record is not None else None
        try:
            print("preflight " + preflight(profile, gpu, calibration=calibration).describe())
        except (ValueError, KeyError) as exc:
            print(f"preflight GPU {gpu}: cannot predict: {exc}")


def _options(args: argparse.Namespace, measure: bool, profile: Profile) -> ApplyOptions:
    # Profiles have no stagger field yet; adopt one as soon as the profile model grows it.
    stagger = args.stagger or float(getattr(profile, "stagger_s", 0.0) or 0.0)
    return ApplyOptions(
        timeout_s=args.timeout,
        release_timeout_s=args.release_timeout,
        stagger_s=stagger,
        measure=measure,
        window_s=args.window,
        warmup_s=args.warmup,
        interval_s=args.interval,
    )


async def apply_profile(
    profile: Profile, gpus: Sequence[int], args: argparse.Namespace
) -> ApplyResult:
    """Run one apply of ``profile`` on ``gpus`` with the real fleet; journal and record it."""
    from tui.retune.wiring import open_target  # heavy imports only when really applying

    running = read_running()
    records = read_records()
    previous = {
        g: running[g].current_name
        if g in running and running[g].current_name
        else (records[g].profile if g in records else None)
        for g in gpus
    }
    docs = {str(running[g].current) for g in gpus if g in running and running[g].current}
    diff_lines: tuple[str, ...] = ()
    if len(docs) == 1:
        first = next(g for g in gpus if g in running and running[g].current)
        old_doc = running[first].current
        assert old_doc is not None
        diff_lines = tuple(str(c) for c in diff(profile_of(old_doc), profile))
    anything_running = any(g in records for g in gpus)
    measuring = not args.no_measure and anything_running
    target, probe = open_target(profile, gpus, args.term_timeout)
    cost: dict[str, Any] = {}
    try:
        options = _options(args, measuring, profile)
        engine = RetuneEngine(
            target, gpus, options, probe=probe, previous_profiles=previous, diff=diff_lines
        )
        engine.subscribe(_printer)
        if measuring:
            # The throughput the apply costs the fleet (its 'before' window is the baseline).
            from tui.rollout.apply_cost import ApplyCostWatch
            from tui.rollout.fleet_io import fleet_sampler

            fleet = sorted(set(gpus) | {g for g in records if g in profile.gpus})
            sampler = fleet_sampler(profile, fleet, options.interval_s, target.client)
            watch = ApplyCostWatch(sampler, gpus, options.warmup_s + options.window_s)
            engine.subscribe(watch.on_event)
            sampler.start()
            try:
                result = await engine.run()
            finally:
                await sampler.stop()
            measured = watch.cost()
            cost = {"lost_gpu_seconds": measured.lost_gpu_seconds, "cost": measured.to_json()}
        else:
            result = await engine.run()
    finally:
        await target.aclose()
    if not result.refused:
        record_outcome(
            profile,
            [r.gpu for r in result.reports if r.ok],
            [r.gpu for r in result.reports if not r.ok],
        )
    append_entry({**apply_entry(result), **cost})
    return result


def print_result(result: ApplyResult) -> None:
    """The verify reports and the verdict."""
    for line in result.diff:
        print(f"diff: {line}")
    for report in result.reports:
        line = format_report({**asdict(report), "capped": report.capped})
        print("verify " + line)
        if report.error_line:
            print(f"  log line: {report.error_line}")
    print(f"throughput: {result.throughput.describe()}")
    ready = sum(r.ok for r in result.reports)
    print(f"{ready}/{len(result.reports)} GPUs ready; profile {result.profile}")


def _rollback_groups(gpus: list[int] | None) -> list[tuple[Profile, list[int]]]:
    running = read_running()
    chosen = gpus if gpus is not None else sorted(g for g, p in running.items() if p.previous)
    groups: dict[str, tuple[Profile, list[int]]] = {}
    for gpu in chosen:
        entry = running.get(gpu)
        if entry is None or entry.previous is None:
            raise UsageError(f"--rollback: GPU {gpu} has no previous profile recorded")
        key = str(entry.previous)
        if key not in groups:
            groups[key] = (profile_of(entry.previous), [])
        groups[key][1].append(gpu)
    if not groups:
        raise UsageError("--rollback: no GPU has a previous profile recorded")
    return list(groups.values())


def main(argv: Sequence[str]) -> int:
    """Run ``gpufleet apply``; returns the exit status (0 ok, 1 a GPU failed, 2 bad input)."""
    args = build_parser().parse_args(list(argv))
    try:
        gpus = parse_gpus(args.gpus) if args.gpus else None
        if args.rollback:
            if args.profile:
                raise UsageError("--rollback takes no PROFILE (it uses each GPU's previous one)")
            plans = _rollback_groups(gpus)
        else:
            if not args.profile:
                raise UsageError("PROFILE is required (or --rollback)")
            profile = load_named(args.profile)
            plans = [(profile, gpus if gpus is not None else list(profile.gpus))]
    except (UsageError, ProfileError) as exc:
        print(f"gpufleet apply: {exc}", file=sys.stderr)
        return 2
    status = 0
    for profile, targets in plans:
        print_preflight(profile, [g for g in targets if g in profile.gpus])
        if args.preflight_only:
            continue
        result = asyncio.run(apply_profile(profile, targets, args))
        if result.refused:
            return 2
        print_result(result)
        if not result.ok:
            status = 1
    return status
