"""Canary and rollout in words: confirm texts, each look, the verdict, the summary (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean

from tui.ops.types import (
    CanaryLook,
    CanaryResult,
    MeasureProgress,
    PairedEstimate,
    RolloutResult,
    ThroughputComparison,
    fleet_line,
)
from tui.ui.format import duration
from tui.words import counted

VERDICT_STYLES = {
    "better": "bold $success",
    "worse": "bold $error",
    "no measurable difference": "bold $warning",
}
"""How each verdict is highlighted."""


def compact_range(gpus: Sequence[int]) -> str:
    """GPU indices with runs collapsed: (0, 1, 2, 4, 5, 6) -> '0-2,4-6'; () -> 'none'."""
    ordered = sorted(set(gpus))
    if not ordered:
        return "none"
    runs: list[str] = []
    start = prev = ordered[0]
    for gpu in [*ordered[1:], None]:
        if gpu is not None and gpu == prev + 1:
            prev = gpu
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if gpu is not None:
            start = prev = gpu
    return ",".join(runs)


def gpus_phrase(gpus: Sequence[int]) -> str:
    """``GPU 3`` for one, ``GPUs 0-2,5`` for several (a report reads 'GPU 0', not 'GPUs 0')."""
    return f"GPU {gpus[0]}" if len(set(gpus)) == 1 else f"GPUs {compact_range(gpus)}"


def canary_question(
    profile: str, gpu: int, fleet: Sequence[int], rolls_back_worse: bool = False
) -> tuple[str, str]:
    """The canary confirm: its title and what happens.

    Args:
        profile: The candidate.
        gpu: The canary GPU.
        fleet: The canary GPU and its controls (on one node: every GPU of the fleet).
        rolls_back_worse: The backend rolls a worse candidate back at once (many nodes).

    Returns:
        (title, detail).
    """
    controls = [g for g in fleet if g != gpu]
    title = f"Try profile {profile} on GPU {gpu}; GPUs {compact_range(controls)} stay as control"
    after = (
        f"GPU {gpu} keeps {profile} if it is not worse; a worse one (or no verdict) is rolled "
        "back at once."
        if rolls_back_worse
        else f"GPU {gpu} keeps {profile} afterwards."
    )
    detail = (
        f"GPU {gpu}'s server is stopped and relaunched with {profile}; after a warm-up its "
        "output tokens/s and requests/s are compared with the control GPUs' over the same "
        f"intervals. {after}"
    )
    return title, detail


def rollout_question(profile: str, gpus: Sequence[int], batch: int = 1) -> tuple[str, str]:
    """The rollout confirm: its title and what happens.

    Args:
        profile: The profile rolled out.
        gpus: The GPUs it may restart (those already on it are skipped).
        batch: GPUs restarted together.

    Returns:
        (title, detail).
    """
    pace = "one GPU at a time" if batch == 1 else f"{batch} GPUs at a time"
    title = f"Roll out {profile} to GPUs {compact_range(gpus)}, {pace}?"
    detail = (
        f"GPUs not yet on {profile} restart {pace}, each verified before the next starts. "
        "The first failure stops the rollout: the GPUs not reached stay on their profile. "
        "The pipeline keeps sending to the GPUs that are up."
    )
    return title, detail


def estimate_text(est: PairedEstimate, unit: str, places: int = 0) -> str:
    """'1,520 vs 1,380 tok/s (+10.1%, 99.5% CI +6.2% .. +14.0%)'."""
    return (
        f"{est.canary_mean:,.{places}f} vs {est.control_mean:,.{places}f} {unit} "
        f"({est.relative:+.1%}, {est.level:.1%} CI {est.rel_low:+.1%} .. {est.rel_high:+.1%})"
    )


def look_line(look: CanaryLook) -> str:
    """One look: intervals and window so far, the estimate and its interval, the decision."""
    head = f"{look.intervals} intervals ({duration(look.window_s)})"
    if look.estimate is not None:
        e = look.estimate
        head += f": {e.relative:+.1%} (CI {e.rel_low:+.1%} .. {e.rel_high:+.1%})"
    return f"{head} -> {look.verdict} ({look.reason})"


def canary_verdict_lines(result: CanaryResult) -> list[tuple[str, str]]:
    """The canary's outcome as (text, style) lines.

    Args:
        result: The canary's result.

    Returns:
        The verdict, the per-GPU change in tokens/s and requests/s with the interval and level,
        how much longer an undecided window would need, and the lost GPU-seconds.
    """
    if result.refused:
        return [("refused, nothing was stopped:", "bold $error")] + [
            (f"  {e}", "$error") for e in result.refused
        ]
    if result.report is not None and not result.report.ok:
        return [(f"canary GPU {result.gpu} failed: {result.report.failure}", "bold $error")]
    lines = [(f"verdict: {result.verdict}", VERDICT_STYLES.get(result.verdict, "bold"))]
    if result.tokens is not None:
        lines.append((f"tokens/s per GPU: {estimate_text(result.tokens, 'tok/s')}", ""))
        lines.append((result.beside_line(), ""))
    if result.requests is not None:
        lines.append((f"requests/s per GPU: {estimate_text(result.requests, 'req/s', 2)}", ""))
    n = result.tokens.n if result.tokens is not None else 0
    lines.append(
        (
            f"{result.family_level:.0%} over {counted(result.looks, 'look')} (each at "
            f"{result.look_level:.2%}); window {duration(result.window_s)}, {n} intervals"
            f"{', stopped early' if result.stopped_early else ''}: {result.reason}",
            "",
        )
    )
    if result.verdict == "no measurable difference" and result.tokens is not None:
        if result.more_s_to_exclude_zero:
            lines.append(
                (
                    f"to tell {result.tokens.relative:+.1%} from 0: about "
                    f"{duration(result.more_s_to_exclude_zero)} more measuring",
                    "",
                )
            )
        if result.more_s_to_bound:
            lines.append(
                (
                    f"to bound within +/-{result.margin:.0%}: about "
                    f"{duration(result.more_s_to_bound)} more measuring",
                    "",
                )
            )
    lines.append((cost_text(result.cost.lost_gpu_seconds if result.cost else None), ""))
    return lines


def cost_text(lost: float | None) -> str:
    """'throughput lost: 6.3 GPU-seconds', or that it was not measured."""
    if lost is None:
        return "throughput lost: not measured"
    return f"throughput lost: {lost:.1f} GPU-seconds"


def fleet_verdict_lines(verdict: ThroughputComparison | None) -> list[tuple[str, str]]:
    """A rollout's (or rollback's) fleet verdict as (text, style) lines: the verdict with its
    interval, then each window's mean and samples (or why it was not measured)."""
    style = VERDICT_STYLES.get(verdict.verdict, "bold") if verdict is not None else "bold"
    lines = [(fleet_line(verdict), style)]
    if verdict is not None and verdict.before and verdict.after:
        lines.append(
            (
                f"fleet output tok/s before {fmean(verdict.before):,.0f} "
                f"({counted(len(verdict.before), 'sample')}), after {fmean(verdict.after):,.0f} "
                f"({counted(len(verdict.after), 'sample')})",
                "",
            )
        )
    return lines


def measuring_line(measure: MeasureProgress | None) -> str:
    """Where the fleet verdict is: 'fleet throughput: measuring before the first GPU stops,
    3 samples (30 s window)', or that it comes once the last batch settled."""
    if measure is None:
        return "fleet throughput: measured before the first batch and after the last"
    stage = {
        "before": "measuring before the first GPU stops",
        "warm-up": "warm-up after the last batch",
        "after": "measuring after the last batch",
    }[measure.stage]
    samples = counted(measure.samples, "sample")
    return f"fleet throughput: {stage}, {samples} ({measure.window_s:.0f} s window)"


def rollout_summary_lines(result: RolloutResult) -> list[tuple[str, str]]:
    """The rollout's outcome as (text, style) lines: done, and at a failure which GPU failed,
    which stayed on the old profile, which were relaunched on it."""
    if result.refused:
        return [("refused, nothing was stopped:", "bold $error")] + [
            (f"  {e}", "$error") for e in result.refused
        ]
    what = "rollback" if result.rollback else f"rollout of {result.profile}"
    took = duration(result.finished_at - result.started_at)
    head = f"{what}: {len(result.done)} of {len(result.planned)} GPUs done; took {took}"
    lines = [(head, "bold $success" if result.ok else "bold $error")]
    if result.skipped:
        lines.append((f"already on it (skipped): {gpus_phrase(result.skipped)}", ""))
    if result.failure:
        lines.append((f"STOPPED at {result.failure}", "bold $error"))
        lines.append((f"stayed on the old profile: {gpus_phrase(result.stayed)}", "$warning"))
        if result.restored:
            lines.append((f"relaunched on the old profile: {gpus_phrase(result.restored)}", ""))
    lines.append((cost_text(result.cost.lost_gpu_seconds if result.cost else None), ""))
    return lines
