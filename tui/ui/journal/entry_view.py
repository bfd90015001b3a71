"""Journal entries as text: one summary row each, and the full detail of one (pure)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from textual.content import Content

from tui.ui.format import NA, num
from tui.ui.retune.report_view import (
    report_from_dict,
    reports_table,
    throughput_from_dict,
    verdict_lines,
)
from tui.ui.tuning.candidate import gpu_range

ROW_HEADER = ("time", "type", "profiles", "GPUs", "verdict", "failed", "lost GPU-s")
"""Columns of the journal list."""


def when(timestamp: object) -> str:
    """A journal time (time.time()) in local time, or a dash."""
    if not isinstance(timestamp, int | float):
        return NA
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))


def _previous(entry: Mapping[str, Any]) -> str:
    previous = entry.get("previous_profiles")
    if isinstance(previous, Mapping):
        names = sorted({str(v) for v in previous.values() if v})
        return ",".join(names) or "?"
    return str(entry.get("from_profile") or "?")


def profiles_text(entry: Mapping[str, Any]) -> str:
    """'before -> after' profile names of an entry."""
    return f"{_previous(entry)} -> {entry.get('profile', '?')}"


def failed_gpus(entry: Mapping[str, Any]) -> list[int]:
    """GPUs whose report says they did not reach ready."""
    reports = entry.get("reports") or []
    return [int(r.get("gpu", -1)) for r in reports if isinstance(r, Mapping) and not r.get("ok")]


def entry_row(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """One line of the journal list."""
    gpus = [g for g in entry.get("gpus") or [] if isinstance(g, int)]
    failed = failed_gpus(entry)
    lost = entry.get("lost_gpu_seconds")
    refused = bool(entry.get("refused"))
    return (
        when(entry.get("started_at", entry.get("time"))),
        str(entry.get("type", "?")),
        profiles_text(entry),
        gpu_range(gpus) if gpus else NA,
        "refused" if refused else str(entry.get("verdict", NA)),
        gpu_range(failed) if failed else "none",
        num(lost) if isinstance(lost, int | float) else NA,
    )


def entry_detail(entry: Mapping[str, Any]) -> Content:
    """Everything about one entry: times, diff, per-GPU reports, verdict, refusals."""
    lines: list[Content] = [
        Content.styled(f"{entry.get('type', '?')}: {profiles_text(entry)}", "bold"),
        Content(
            f"started {when(entry.get('started_at'))}, finished {when(entry.get('finished_at'))}"
        ),
    ]
    refused = entry.get("refused") or []
    if refused:
        lines.append(Content.styled("refused, nothing was stopped:", "bold $error"))
        lines += [Content(f"  {r}") for r in refused]
    lines.append(Content.styled("diff", "bold"))
    lines += [Content(f"  {d}") for d in entry.get("diff") or []] or [Content("  (none)")]
    reports = [report_from_dict(r) for r in entry.get("reports") or [] if isinstance(r, Mapping)]
    if reports:
        lines.append(Content.styled("verify report", "bold"))
        lines.append(reports_table(reports))
    throughput = entry.get("throughput")
    if isinstance(throughput, Mapping):
        lines += verdict_lines(throughput_from_dict(throughput))
    lost = entry.get("lost_gpu_seconds")
    if isinstance(lost, int | float):
        lines.append(Content(f"lost GPU-seconds: {num(lost)}"))
    return Content("\n").join(lines)
