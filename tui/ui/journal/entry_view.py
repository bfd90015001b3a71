"""Journal entries as text: one summary row each, and the full detail of one (pure)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from textual.content import Content

from tui.ops.journal import JournalEntry
from tui.ui.format import NA, num
from tui.ui.journal.autotune_view import autotune_lines, verdict_cell
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


def profiles_text(entry: JournalEntry) -> str:
    """'before -> after' profile names of an entry; the profile alone when nothing ran before
    it (a start) or what ran is not recorded; a dash when it changed no profile."""
    if entry.target is None:
        return entry.source or NA
    if entry.source is None or entry.source == entry.target:
        return entry.target
    return f"{entry.source} -> {entry.target}"


def entry_row(entry: JournalEntry) -> tuple[str, ...]:
    """One line of the journal list."""
    return (
        when(entry.started_at),
        entry.type,
        profiles_text(entry),
        gpu_range(list(entry.gpus)) if entry.gpus else NA,
        verdict_cell(entry) or ("refused" if entry.refused else (entry.verdict or NA)),
        gpu_range(list(entry.failed)) if entry.failed else "none",
        num(entry.lost_gpu_seconds) if entry.lost_gpu_seconds is not None else NA,
    )


def entry_detail(entry: JournalEntry) -> Content:
    """Everything about one entry: times, diff, per-GPU reports, verdict, refusals.

    The header fields are typed; the operation's detail is read defensively, and a detail that
    cannot be shown (an older or damaged entry) is said so instead of failing the screen.
    """
    lines: list[Content] = [
        Content.styled(f"{entry.type}: {profiles_text(entry)}", "bold"),
        Content(f"started {when(entry.started_at)}, finished {when(entry.finished_at)}"),
    ]
    if entry.by:
        lines.append(Content(f"by {entry.by}"))
    if entry.summary:
        lines.append(Content(entry.summary))
    if entry.refused:
        lines.append(Content.styled("refused, nothing was stopped:", "bold $error"))
        lines += [Content(f"  {r}") for r in entry.refused]
    try:
        lines += autotune_lines(entry)
        lines += _detail(entry.detail)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        lines.append(Content.styled(f"the detail of this entry cannot be shown: {exc}", "$warning"))
    if entry.lost_gpu_seconds is not None:
        lines.append(Content(f"lost GPU-seconds: {num(entry.lost_gpu_seconds)}"))
    return Content("\n").join(lines)


def _detail(detail: Mapping[str, Any]) -> list[Content]:
    lines: list[Content] = []
    diff = detail.get("diff")
    if isinstance(diff, list):
        lines.append(Content.styled("diff", "bold"))
        lines += [Content(f"  {d}") for d in diff] or [Content("  (none)")]
    raw = detail.get("reports")
    reports = (
        [report_from_dict(r) for r in raw if isinstance(r, Mapping)]
        if isinstance(raw, list)
        else []
    )
    single = detail.get("report")
    if isinstance(single, Mapping):
        reports.append(report_from_dict(single))
    if reports:
        lines.append(Content.styled("verify report", "bold"))
        lines.append(reports_table(reports))
    throughput = detail.get("throughput")
    if isinstance(throughput, Mapping):
        lines += verdict_lines(throughput_from_dict(throughput))
    return lines
