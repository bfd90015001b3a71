"""Verify reports and the throughput verdict as text (shared by the apply and journal screens)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any

from textual.content import Content

from tui.ops.types import EffectiveValues, RequestedValues, ThroughputComparison, VerifyReport
from tui.ui.format import GIB, NA, duration, num
from tui.ui.text_table import Cell, text_table
from tui.words import counted

REPORT_HEADER = (
    "GPU",
    "state",
    "phase",
    "max running asked -> got",
    "KV tokens",
    "Mamba slots",
    "free GB",
    "ready in",
)


def running_cell(report: VerifyReport | None) -> Cell:
    """Requested vs effective max running requests, the cap flagged."""
    if report is None:
        return NA
    asked = report.requested.max_running_requests
    got = report.effective.max_running_requests
    text = f"{'auto' if asked is None else asked} -> {NA if got is None else got}"
    return (f"{text} CAPPED", "bold $warning") if report.capped else text


def report_row(gpu: int, state: str, phase: str, report: VerifyReport | None) -> list[Cell]:
    """One GPU's row of the report table."""
    style = {"ready": "$success", "failed": "bold $error"}.get(state, "")
    free = None if report is None else report.free_memory_bytes
    return [
        str(gpu),
        (state, style) if style else state,
        phase,
        running_cell(report),
        num(None if report is None else report.effective.kv_tokens),
        num(None if report is None else report.effective.mamba_slots),
        NA if free is None else f"{free / GIB:.1f}",
        ready_in(report),
    ]


def ready_in(report: VerifyReport | None) -> str:
    """How long the GPU was out of service, the stop included: ``22s (stop 20s)``; without a
    stop, the start alone (``2s``)."""
    if report is None or report.time_to_ready_s is None:
        return NA
    total = (report.stop_s or 0.0) + report.time_to_ready_s
    if not report.stop_s or report.stop_s < 1.0:  # 'stop 0s' says nothing
        return duration(total)
    return f"{duration(total)} (stop {duration(report.stop_s)})"


def failure_lines(reports: Sequence[VerifyReport]) -> list[Content]:
    """For each failed GPU, why, with its OOM or crash line from the log; for each GPU whose
    old server's stop lost requests (a drain that timed out), what it lost."""
    lines = []
    for report in reports:
        if report.drain_note:
            lines.append(
                Content.styled(f"GPU {report.gpu}: old server: {report.drain_note}", "bold $error")
            )
        if report.ok:
            continue
        why = report.failure or report.error_reason or "failed"
        lines.append(Content.styled(f"GPU {report.gpu}: {why}", "bold $error"))
        if report.error_line and report.error_line not in why:
            lines.append(Content.styled(f"  {report.error_line}", "$error"))
    return lines


def reports_table(reports: Sequence[VerifyReport]) -> Content:
    """The verify reports of settled GPUs, one row each, then the failure lines."""
    rows = [
        report_row(r.gpu, "ready" if r.ok else "failed", "", r)
        for r in sorted(reports, key=lambda r: r.gpu)
    ]
    return Content("\n").join([text_table(REPORT_HEADER, rows, left=3), *failure_lines(reports)])


def verdict_lines(throughput: ThroughputComparison) -> list[Content]:
    """The verdict with its relative change, CI and sureness, and the two means."""
    style = {"better": "bold $success", "worse": "bold $error"}.get(throughput.verdict, "bold")
    lines = [Content.styled(f"verdict: {throughput.describe()}", style)]
    if throughput.before and throughput.after:
        lines.append(
            Content(
                f"output tok/s before {num(fmean(throughput.before))} "
                f"({counted(len(throughput.before), 'sample')}), "
                f"after {num(fmean(throughput.after))} "
                f"({counted(len(throughput.after), 'sample')})"
            )
        )
    if throughput.note and throughput.relative_change is not None:
        lines.append(Content.styled(throughput.note, "dim"))
    return lines


def report_from_dict(data: Mapping[str, Any]) -> VerifyReport:
    """A verify report as the journal stores it (``asdict``) back as the dataclass; tolerant."""

    def sub(kind: type[RequestedValues] | type[EffectiveValues], raw: object) -> Any:
        fields = kind.__dataclass_fields__  # type: ignore[attr-defined]
        given = raw if isinstance(raw, Mapping) else {}
        return kind(**{k: v for k, v in given.items() if k in fields})

    phases = tuple(
        (str(p[0]), float(p[1])) for p in data.get("phases") or () if isinstance(p, list | tuple)
    )
    return VerifyReport(
        gpu=int(data.get("gpu", -1)),
        ok=bool(data.get("ok")),
        profile=str(data.get("profile", "")),
        requested=sub(RequestedValues, data.get("requested")),
        effective=sub(EffectiveValues, data.get("effective")),
        time_to_ready_s=data.get("time_to_ready_s"),
        free_memory_bytes=data.get("free_memory_bytes"),
        failure=data.get("failure"),
        error_line=data.get("error_line"),
        error_reason=data.get("error_reason"),
        phases=phases,
        pid=data.get("pid"),
        log_path=data.get("log_path"),
        stop_s=data.get("stop_s"),
        drain_timed_out=bool(data.get("drain_timed_out")),
        lost_in_flight=data.get("lost_in_flight"),
        drain_note=data.get("drain_note"),
        client_still_sending=data.get("client_still_sending") is True,
        arrived_during_drain=data.get("arrived_during_drain"),
    )


def throughput_from_dict(data: Mapping[str, Any]) -> ThroughputComparison:
    """A throughput comparison as the journal stores it, back as the dataclass; tolerant."""
    fields = ThroughputComparison.__dataclass_fields__
    values = {k: v for k, v in data.items() if k in fields}
    values["before"] = tuple(values.get("before") or ())
    values["after"] = tuple(values.get("after") or ())
    values.setdefault("verdict", "not measured")
    return ThroughputComparison(**values)
