"""Journal entries of every operation's result (``tui.ops.journal.JournalEntry``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from tui.ops.journal import JournalEntry
from tui.retune.events import ApplyResult, VerifyReport, lost_summary, total_lost
from tui.rollout.canary_result import CanaryResult
from tui.rollout.cost import RetuneCost
from tui.rollout.fleet_verdict import fleet_line
from tui.rollout.rollout import RolloutResult, RolloutStep


def report_dict(report: VerifyReport) -> dict[str, Any]:
    """One verify report as the journal keeps it (with the derived ``capped``)."""
    return {**asdict(report), "capped": report.capped}


def drain_fields(still_sending: Iterable[bool], arrived: Iterable[int | None]) -> dict[str, Any]:
    """The journal's ``client_still_sending`` (any stop's drain ended while a client still
    sent) and ``arrived_during_drain`` (summed; None when no stop counted any)."""
    counts = [a for a in arrived if a is not None]
    return {
        "client_still_sending": any(still_sending),
        "arrived_during_drain": sum(counts) if counts else None,
    }


def _report_drains(reports: Iterable[VerifyReport]) -> dict[str, Any]:
    reports = list(reports)
    return drain_fields(
        (r.client_still_sending for r in reports), (r.arrived_during_drain for r in reports)
    )


def _sources(previous: dict[int, str | None]) -> str | None:
    names = sorted({v for v in previous.values() if v})
    return ", ".join(names) or None


def apply_entry(
    result: ApplyResult,
    by: str,
    kind: str = "apply",
    cost: RetuneCost | None = None,
    restored: tuple[int, ...] = (),
) -> JournalEntry:
    """The entry of an apply (also relaunch and rollback, which run the same sequence)."""
    failed = tuple(r.gpu for r in result.reports if not r.ok)
    if result.refused:
        summary = "refused: " + "; ".join(result.refused)
    else:
        ready = len(result.reports) - len(failed)
        # Out of the GPUs targeted: a walk that stopped at a failure never reached some.
        summary = f"{ready}/{len(result.gpus)} GPUs ready on {result.profile}"
        if result.throughput.verdict != "not measured":
            summary += f"; throughput {result.throughput.describe()}"
        refused = [r.gpu for r in result.reports if r.status == "refused"]
        if refused:
            summary += (
                f"; refused on GPUs {refused} (what runs there is not verified as the fleet's: "
                "nothing was signalled)"
            )
        if restored:
            summary += f"; restored the previous profile on GPUs {list(restored)}"
        lost = lost_summary(result.reports)
        if lost:
            summary += f"; {lost}"
    return JournalEntry(
        type=kind,
        started_at=result.started_at,
        finished_at=result.finished_at,
        ok=result.ok,
        gpus=result.gpus,
        source=_sources(result.previous_profiles),
        target=result.profile or None,
        by=by,
        summary=summary,
        verdict=result.throughput.verdict,
        refused=result.refused,
        failed=failed,
        lost_gpu_seconds=cost.lost_gpu_seconds if cost else None,
        lost_in_flight=result.lost_in_flight,
        **_report_drains(result.reports),
        detail={
            "previous_profiles": {str(k): v for k, v in result.previous_profiles.items()},
            "diff": list(result.diff),
            "reports": [report_dict(r) for r in result.reports],
            "throughput": {**asdict(result.throughput), "summary": result.throughput.describe()},
            "cost": cost.to_json() if cost else None,
            "restored": list(restored),
        },
    )


def canary_entry(result: CanaryResult, by: str) -> JournalEntry:
    """The entry of a canary."""
    data = asdict(result)
    data["per_gpu_tokens"] = {str(k): v for k, v in result.per_gpu_tokens.items()}
    data["report"] = report_dict(result.report) if result.report is not None else None
    data["cost"] = result.cost.to_json() if result.cost else None
    data["beside"] = result.beside.to_json() if result.beside else None
    return JournalEntry(
        type="canary",
        started_at=result.started_at,
        finished_at=result.finished_at,
        ok=result.ok,
        gpus=(result.gpu,),
        source=result.previous_profile,
        target=result.profile,
        by=by,
        summary=result.describe().splitlines()[0],
        verdict=result.verdict,
        refused=result.refused,
        failed=() if result.report is None or result.report.ok else (result.gpu,),
        lost_gpu_seconds=result.cost.lost_gpu_seconds if result.cost else None,
        lost_in_flight=total_lost(() if result.report is None else (result.report,)),
        **_report_drains(() if result.report is None else (result.report,)),
        detail=data,
    )


def rollout_step_entry(step: RolloutStep, profile: str, rollback: bool, by: str) -> JournalEntry:
    """The entry of one batch of a rollout."""
    failed = tuple(r.gpu for r in step.reports if not r.ok)
    return JournalEntry(
        type="rollback-step" if rollback else "rollout-step",
        started_at=step.started_at,
        finished_at=step.finished_at,
        ok=step.ok,
        gpus=step.gpus,
        target=profile or ", ".join(sorted(set(step.profiles.values()))),
        by=by,
        summary=f"batch {step.index}: GPUs {list(step.gpus)} "
        + ("ready" if step.ok else f"failed on {list(failed)}")
        + (f"; {lost}" if (lost := lost_summary(step.reports)) else ""),
        failed=failed,
        lost_in_flight=total_lost(step.reports),
        **_report_drains(step.reports),
        detail={
            "index": step.index,
            "profiles": {str(k): v for k, v in step.profiles.items()},
            "reports": [report_dict(r) for r in step.reports],
        },
    )


def _launched(result: RolloutResult) -> str:
    return ", ".join(sorted({p for step in result.steps for p in step.profiles.values() if p}))


def rollout_entry(result: RolloutResult, by: str) -> JournalEntry:
    """The summary entry of a rollout (or a walk back), its fleet verdict in the summary."""
    data = asdict(result)
    data.pop("steps")
    data["cost"] = result.cost.to_json() if result.cost else None
    data["beside"] = result.beside.to_json() if result.beside else None
    summary = result.describe().splitlines()[0]
    reports = [r for step in result.steps for r in step.reports]
    lost = lost_summary(reports)
    if lost:
        summary += f"; {lost}"
    if not result.refused:
        summary += "; " + fleet_line(result.verdict)
        data["verdict_summary"] = fleet_line(result.verdict)
    return JournalEntry(
        type="rollback" if result.rollback else "rollout",
        started_at=result.started_at,
        finished_at=result.finished_at,
        ok=result.ok,
        gpus=result.planned,
        # A rollback has no one profile (each GPU goes back to its own previous one): name those
        # its batches launched, as its steps' entries do, so the journal does not read
        # 'rollback: -' with nothing under "profiles".
        target=result.profile or _launched(result) or None,
        by=by,
        summary=summary,
        verdict=result.verdict.verdict if result.verdict is not None else None,
        refused=result.refused,
        failed=result.failed,
        lost_gpu_seconds=result.cost.lost_gpu_seconds if result.cost else None,
        lost_in_flight=total_lost(reports),
        **_report_drains(reports),
        detail={**data, "steps": len(result.steps)},
    )


def simple_entry(
    kind: str,
    started_at: float,
    finished_at: float,
    ok: bool,
    gpus: tuple[int, ...],
    by: str,
    summary: str,
    *,
    source: str | None = None,
    target: str | None = None,
    failed: tuple[int, ...] = (),
    refused: tuple[str, ...] = (),
    detail: dict[str, Any] | None = None,
    lost_in_flight: int | None = None,
    drains: dict[str, Any] | None = None,
) -> JournalEntry:
    """The entry of a kill, a stop of the fleet, a start, or a pipeline start/stop
    (``drains``: ``drain_fields`` of its stops)."""
    return JournalEntry(
        type=kind,
        started_at=started_at,
        finished_at=finished_at,
        ok=ok,
        gpus=gpus,
        source=source,
        target=target,
        by=by,
        summary=summary,
        refused=refused,
        failed=failed,
        lost_in_flight=lost_in_flight,
        **(drains or {}),
        detail=detail or {},
    )
