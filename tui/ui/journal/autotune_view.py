"""The autotune search's journal entries as text: a candidate's knobs, prediction, measured
effect with its interval, and decision; a search's summary (pure).

``autotune-candidate`` entries carry the candidate's record as their detail
(``tui.autotune.record.CandidateRecord``); ``autotune-summary`` entries what was adopted, why
the search ended and what it spent. The detail is read defensively: a missing field reads as a
dash, never as an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from textual.content import Content

from tui.ops.journal import JournalEntry
from tui.ui.format import NA, num
from tui.words import counted

CANDIDATE = "autotune-candidate"
"""A candidate's entry type."""
SUMMARY = "autotune-summary"
"""A search's closing entry type."""


def _n(value: object, decimals: int = 0) -> str:
    return num(value, decimals) if isinstance(value, int | float) else NA


def _g(value: object) -> str:
    return format(value, "g") if isinstance(value, int | float) else str(value)


def _table(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _pct(value: object) -> str:
    return f"{float(value):+.1%}" if isinstance(value, int | float) else NA


def verdict_cell(entry: JournalEntry) -> str | None:
    """The journal list's verdict column for an autotune entry ('dropped -3.5%'), else None."""
    if entry.type == SUMMARY:
        adopted = entry.detail.get("adopted")
        return f"{len(adopted)} adopted" if isinstance(adopted, list) else NA
    if entry.type != CANDIDATE:
        return None
    decision = str(entry.detail.get("decision") or NA)
    relative = entry.detail.get("relative")
    return decision if relative is None else f"{decision} {_pct(relative)}"


def autotune_lines(entry: JournalEntry) -> list[Content]:
    """The detail lines of an autotune entry (none for other entries)."""
    if entry.type == CANDIDATE:
        return _candidate(entry.detail)
    if entry.type == SUMMARY:
        return _summary(entry.detail)
    return []


def _candidate(d: Mapping[str, Any]) -> list[Content]:
    knobs = _table(d.get("knobs"))
    lines = [
        Content.styled(f"candidate #{d.get('index', NA)}", "bold"),
        Content(f"  knobs: {', '.join(f'{k}={_g(v)}' for k, v in knobs.items()) or NA}"),
        Content(f"  measured against: {d.get('incumbent', NA)}"),
    ]
    p = _table(d.get("prediction"))
    if p.get("fits") is False:
        lines.append(Content(f"  prediction: will not fit: {p.get('why_not') or NA}"))
    else:
        calibrated = "calibrated on the servers' logs" if p.get("calibrated") else "uncalibrated"
        lines.append(
            Content(
                f"  prediction: fits; {p.get('max_running_effective', NA)} running requests"
                f"{' (capped)' if p.get('capped') else ''}, {p.get('kv_tokens', NA)} KV tokens, "
                f"{p.get('mamba_slots', NA)} Mamba slots ({calibrated})"
            )
        )
    if d.get("launched"):
        level = d.get("level")
        ci = f"{float(level):.0%} interval" if isinstance(level, int | float) else "interval"
        lines.append(
            Content(
                f"  measured on GPU {d.get('gpu', NA)} over {_n(d.get('window_s'))} s: canary "
                f"{_n(d.get('canary_tokens_per_s'))} vs control "
                f"{_n(d.get('control_tokens_per_s'))} tok/s per GPU"
            )
        )
        lines.append(
            Content(
                f"  effect: {_pct(d.get('relative'))} ({ci} {_pct(d.get('rel_low'))} .. "
                f"{_pct(d.get('rel_high'))}), verdict {d.get('verdict') or NA}"
            )
        )
        lines.append(Content(f"  exploration cost: {_n(d.get('explore_gpu_s'), 1)} GPU-seconds"))
    else:
        lines.append(Content("  never launched"))
    decision = str(d.get("decision") or NA)
    style = {"kept": "bold $success", "failed": "bold $error"}.get(decision, "bold")
    lines.append(Content.assemble(("  decision: ", ""), (decision, style), f": {d.get('why')}"))
    return lines


def _waited(spent: Mapping[str, Any]) -> str:
    """The seconds its steps waited for another operation's lock, when there were any."""
    waited = spent.get("waited_s") or 0
    return f", +{_n(waited)} s waiting for the fleet" if waited else ""


def _summary(d: Mapping[str, Any]) -> list[Content]:
    spent = _table(d.get("spent"))
    raw = d.get("adopted")
    adopted = [str(a) for a in raw] if isinstance(raw, list) else []
    return [
        Content.styled("autotune search", "bold"),
        Content(f"  ended: {d.get('reason') or NA}"),
        Content(
            f"  candidates: {d.get('candidates', NA)}, adopted: {', '.join(adopted) or 'none'}"
        ),
        Content(
            f"  spent: {_n(spent.get('wall_s'))} s of wall time"
            f" (+{_n(spent.get('paused_s', 0))} s paused{_waited(spent)}), "
            f"{_n(spent.get('explore_gpu_s'), 1)} GPU-seconds exploring, "
            f"{counted(spent.get('canaries', NA), 'canary')}"
        ),
    ]
