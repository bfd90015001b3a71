"""The search's status document, its control requests and its lock (files in the state directory).

- **Status** (``status.json``): phase, the process running the search (pid and start time, so a
  reader can tell a live search from one that died), the incumbent and best so far, the
  candidate being measured, every candidate with its prediction and measured effect, the budget
  and what was spent, and the history of measured throughput. Replaced atomically after every
  step (``tui.state.files``: temporary file, fsync, rename), so a reader never sees half of it.
- **Control** (``control.json``): the last request (pause, resume, stop) written by
  ``gpufleet autotune pause|resume|stop`` or the console, atomically; the search reads it between
  steps, and watches it during a canary for stop.
- **Lock** (``search.lock``): one search at a time, held with the operation lock's mechanism
  (``tui.ops.lock``: a kernel ``flock`` dropped when its holder dies, holder pid AND process start
  time written in it, so a reused pid is never taken for the holder).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import psutil

from tui import paths
from tui.autotune.budget import Spent
from tui.autotune.record import candidate_line
from tui.profiles import profile_to_dict
from tui.rollout.canary_result import CanaryLook
from tui.state.files import expect, read_document, write_document
from tui.state.locks import locked
from tui.words import counted

if TYPE_CHECKING:  # the search writes its status through this module
    from tui.autotune.searchstate import SearchState

Request = Literal["pause", "resume", "stop"]
"""What an operator may ask of a running search."""

REQUESTS: tuple[str, ...] = ("pause", "resume", "stop")
"""Every request, in words."""

FINAL_PHASES = ("finished", "stopped", "failed")
"""Phases after which the search process has exited."""


def status_file() -> Path:
    """The search's status document."""
    return paths.autotune_dir() / "status.json"


def control_file() -> Path:
    """The operator's last request to the search."""
    return paths.autotune_dir() / "control.json"


def lock_file() -> Path:
    """Held by the one running search."""
    return paths.autotune_dir() / "search.lock"


def write_status(doc: dict[str, Any], path: Path | None = None) -> None:
    """Replace the status document atomically (``updated_at`` is set here)."""
    target = path or status_file()
    with locked(target):
        write_document(target, {**doc, "updated_at": time.time()})


def _parse_status(data: Any) -> dict[str, Any]:
    expect(isinstance(data, dict), "the document is not an object")
    expect(isinstance(data.get("phase"), str), "'phase' is not text")
    expect(isinstance(data.get("candidates", []), list), "'candidates' is not a list")
    return dict(data)


def read_status(path: Path | None = None) -> dict[str, Any] | None:
    """The status document, or None when no search ever ran.

    Raises:
        StateFileError: the document exists but is damaged (naming the file).
    """
    return read_document(path or status_file(), _parse_status, None)


def request(what: Request, path: Path | None = None) -> None:
    """Write an operator's request for the running search (atomically)."""
    if what not in REQUESTS:
        raise ValueError(f"request {what!r}: allowed: {', '.join(REQUESTS)}")
    target = path or control_file()
    with locked(target):
        write_document(target, {"request": what, "at": time.time()})


def _parse_control(data: Any) -> tuple[str, float]:
    expect(isinstance(data, dict), "the document is not an object")
    what = data.get("request")
    expect(what in REQUESTS, f"'request' must be one of {', '.join(REQUESTS)}")
    at = data.get("at")
    expect(isinstance(at, int | float) and not isinstance(at, bool), "'at' is not a time")
    return str(what), float(at)


@dataclass(frozen=True, slots=True)
class ControlRequest:
    """The operator's last request."""

    request: str
    """pause, resume or stop."""
    at: float
    """time.time() it was written."""


def read_request(since: float, path: Path | None = None) -> ControlRequest | None:
    """The last request written at or after ``since`` (older ones belong to an earlier search).

    Raises:
        StateFileError: the control file is damaged (naming the file).
    """
    found = read_document(path or control_file(), _parse_control, None)
    if found is None or found[1] < since:
        return None
    return ControlRequest(*found)


def holder_alive(doc: dict[str, Any]) -> bool:
    """Whether the process the status names still runs (same pid AND same start time).

    A zombie (exited, not yet reaped by the process that started it) has stopped running.
    """
    try:
        pid, create_time = int(doc["pid"]), float(doc["create_time"])
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return abs(process.create_time() - create_time) < 0.05
    except (KeyError, TypeError, ValueError, psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def describe_status(doc: dict[str, Any]) -> str:
    """A few lines for ``gpufleet autotune status``: phase, incumbent, budget, candidates."""
    phase = str(doc.get("phase"))
    alive = holder_alive(doc)
    if phase not in FINAL_PHASES and not alive:
        phase = f"{phase} (STALE: search pid {doc.get('pid')} is not running; it died)"
    lines = [f"autotune: {phase}"]
    if doc.get("waiting_for") and alive and phase not in FINAL_PHASES:
        lines.append(f"  waiting for: {doc['waiting_for']} (the fleet's operation lock)")
    if doc.get("reason"):
        lines.append(f"  why: {doc['reason']}")
    inc = doc.get("incumbent") or {}
    lines.append(f"  incumbent: {inc.get('profile')} {inc.get('knobs')}")
    if doc.get("current"):
        cur = doc["current"]
        lines.append(
            f"  measuring: {cur.get('profile')} ({cur.get('key')}) on GPU {doc.get('gpu')}"
        )
    spent, budget = doc.get("spent") or {}, doc.get("budget") or {}
    lines.append(
        f"  spent: {float(spent.get('wall_s', 0)):.0f} / {float(budget.get('wall_s', 0)):.0f} s, "
        f"{float(spent.get('explore_gpu_s', 0)):.1f} / "
        f"{float(budget.get('explore_gpu_s', 0)):.1f} GPU-s exploring, "
        f"{counted(spent.get('canaries', 0), 'canary')}"
    )
    for c in doc.get("candidates", []):
        if isinstance(c, dict):
            lines.append(f"  {candidate_line(c)}")
    return "\n".join(lines)


def look_json(look: CanaryLook) -> dict[str, Any]:
    """A canary look as the status shows it."""
    est = look.estimate
    return {
        "intervals": look.intervals,
        "window_s": look.window_s,
        "verdict": look.verdict,
        "relative": None if est is None else round(est.relative, 5),
        "canary_tokens_per_s": None if est is None else round(est.canary_mean, 3),
        "control_tokens_per_s": None if est is None else round(est.control_mean, 3),
        "rel_low": None if est is None else round(est.rel_low, 5),
        "rel_high": None if est is None else round(est.rel_high, 5),
    }


def spent_json(spent: Spent) -> dict[str, Any]:
    """What the search spent, as the status shows it."""
    return {
        "wall_s": spent.wall_s,
        "explore_gpu_s": spent.explore_gpu_s,
        "canaries": spent.canaries,
        "paused_s": spent.paused_s,
        "waited_s": spent.waited_s,
    }


def stale_summary() -> dict[str, Any] | None:
    """A summary of the status of an earlier search that died without finishing, if any."""
    with contextlib.suppress(Exception):
        doc = read_status()
        if doc is not None and doc.get("phase") not in FINAL_PHASES and not holder_alive(doc):
            inc = doc.get("incumbent") if isinstance(doc.get("incumbent"), dict) else {}
            return {
                "phase": doc.get("phase"),
                "pid": doc.get("pid"),
                "started_at": doc.get("started_at"),
                "updated_at": doc.get("updated_at"),
                "incumbent": (inc or {}).get("profile"),
            }
    return None


def status_document(search: SearchState) -> dict[str, Any]:
    """The status document of ``search`` now (``write_status`` adds ``updated_at``)."""
    inc = search.incumbent
    pid = os.getpid()
    watch = search.watch
    budget = search.options.budget
    return {
        "phase": search.phase,
        "reason": search.reason,
        "pid": pid,
        "create_time": psutil.Process(pid).create_time(),
        "started_at": search.started_at,
        "gpu": search.gpu,
        "space": search.options.space.to_json(),
        "budget": {
            "wall_s": budget.wall_s,
            "explore_gpu_s": budget.explore_gpu_s,
            "max_regression": budget.max_regression,
        },
        "spent": spent_json(search.spent),
        "incumbent": {
            "profile": inc.name if inc is not None else None,
            "knobs": search.knobs,
            "doc": profile_to_dict(inc) if inc is not None else None,
        },
        "current": search.current.to_json() if search.current is not None else None,
        "waiting_for": search.waiting_for,
        "canary_up": watch is not None and watch.up,
        "look": look_json(watch.look) if watch is not None and watch.look else None,
        "candidates": [
            r.to_json()
            for r in sorted([*search.records, *search.pending.values()], key=lambda r: r.index)
        ],
        "history": search.history,
        "stale_previous": search.stale,
    }
