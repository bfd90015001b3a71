"""The autotune search in the status strip's one line, read from its status document.

The search runs in its own process (started by the console's autotune screen or by
``gpufleet autotune start --detach``), so the strip cannot hold a report screen for it as it does
for an apply or a rollout: it reads ``<state>/autotune/status.json`` like the screen does, and
shows the phase, the candidate being measured, and the budget spent. A search that ended is
shown for ``ENDED_SHOWN_S`` after its last update; one whose process died without ending is
shown as stale (in the error colour) until another search replaces its status.
"""

from __future__ import annotations

import time
from typing import Any

from textual.content import Content

from tui.autotune_view import FINAL_PHASES
from tui.ui.format import duration
from tui.words import counted

ENDED_SHOWN_S = 300.0
"""How long a search that ended stays in the strip after its last update."""


def _budget(doc: dict[str, Any]) -> str:
    spent, budget = doc.get("spent") or {}, doc.get("budget") or {}
    return (
        f"{duration(float(spent.get('wall_s', 0)))} of {duration(float(budget.get('wall_s', 0)))}"
        f", {float(spent.get('explore_gpu_s', 0)):.1f}/{float(budget.get('explore_gpu_s', 0)):.0f}"
        f" GPU-s, {counted(spent.get('canaries', 0), 'canary')}"
    )


def _candidate(doc: dict[str, Any]) -> str | None:
    current = doc.get("current")
    if not isinstance(current, dict):
        return None
    look = doc.get("look") or {}
    state = "measuring" if doc.get("canary_up") else "starting"
    if look.get("intervals"):
        state += f", {look.get('intervals')} intervals: {look.get('verdict')}"
    return f"#{current.get('index')} {current.get('key')} on GPU {doc.get('gpu')} ({state})"


def autotune_line(
    doc: dict[str, Any] | None, alive: bool, now: float | None = None
) -> Content | None:
    """The search in one line, or None when there is nothing to show.

    Args:
        doc: The status document (None: no search ever ran).
        alive: Whether the process it names still runs.
        now: time.time() (tests pass a fixed one).

    Returns:
        ``autotune canary · #4 max_running_requests=32 on GPU 0 (measuring) · 12m 03s of
        4h 00m, 21.5/1800 GPU-s, 3 canaries · a: autotune``, or None.
    """
    if doc is None:
        return None
    phase = str(doc.get("phase"))
    ended = phase in FINAL_PHASES
    if ended and (now or time.time()) - float(doc.get("updated_at") or 0) > ENDED_SHOWN_S:
        return None
    stale = not ended and not alive
    if stale:
        head, style = f"autotune {phase} STALE: the search process died", "$error"
    elif ended:
        head = f"autotune {phase}"
        style = "$error" if phase == "failed" else "$success"
    else:
        head, style = f"autotune {phase}", "$accent"
    parts = []
    if doc.get("waiting_for") and not ended:
        parts.append(f"waiting for {doc['waiting_for']}")
    candidate = _candidate(doc)
    if candidate and not ended:
        parts.append(candidate)
    if ended and doc.get("reason"):
        parts.append(str(doc["reason"]))
    parts.append(_budget(doc))
    return Content.assemble(
        (head, f"bold {style}"), f" · {' · '.join(parts)}", (" · a: autotune", "dim")
    )
