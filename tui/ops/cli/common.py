"""What the operations commands share: GPU lists, the event printer, exit codes, one-line errors.

Exit codes: 0 done (on every GPU), 1 an operation was refused or failed on a GPU (what runs there
is not verified as the fleet's, or it did not get there: the GPU is named), 2 refused before
anything was stopped (bad input, an invalid profile, another operation holding the fleet, a
damaged state file, a state lock held past its deadline, a journal that cannot be written).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from tui.control.stop_release import DrainProgress
from tui.inputs import InputError
from tui.ops.events import OperationFinished, OperationStarted, OpEvent
from tui.ops.journal import JournalError
from tui.ops.lock import OperationBusy
from tui.ops.service import OperationError
from tui.profiles import ProfileError
from tui.retune.events import ApplyRefused, GpuFailed, GpuPhase, GpuReady, MeasureProgress
from tui.rollout.canary_result import CanaryLook
from tui.state.files import StateFileError

REFUSALS = (ProfileError, OperationBusy, StateFileError, OperationError, JournalError, InputError)
"""Errors that mean nothing was changed: reported in one line, exit 2 (a state lock held past
its deadline is a ``StateFileError``: ``tui.state.locks.LockBusy``)."""


class UsageError(ValueError):
    """Bad command-line input (exit 2)."""


def parse_gpus(text: str, option: str = "--gpus") -> list[int]:
    """'0,5' -> [0, 5]; raises UsageError naming the bad value."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not (part.isascii() and part.isdigit()) or int(part) > 255:
            raise UsageError(f"{option}: {part!r} is not a GPU index 0-255 (expected e.g. 0,5)")
        out.append(int(part))
    return sorted(set(out))


def print_event(event: OpEvent) -> None:
    """One line per event worth a line, for the headless commands."""
    if isinstance(event, GpuPhase):
        print(f"GPU {event.gpu}: {event.phase} ({event.elapsed_s:.1f} s)", flush=True)
    elif isinstance(event, GpuReady):
        report = event.report
        ready = ready_words(report.time_to_ready_s, report.stop_s)
        print(f"GPU {event.gpu}: READY {ready}", flush=True)
    elif isinstance(event, GpuFailed):
        word = "REFUSED" if event.report.status == "refused" else "FAILED"
        print(f"GPU {event.gpu}: {word} {event.report.failure}", flush=True)
        if event.report.error_line:
            print(f"  log line: {event.report.error_line}", flush=True)
    elif isinstance(event, MeasureProgress) and event.samples == 0:
        print(f"throughput: {event.stage} window {event.window_s:g} s", flush=True)
    elif isinstance(event, ApplyRefused):
        for error in event.errors:
            print(f"refused: {error}", file=sys.stderr, flush=True)
    elif isinstance(event, DrainProgress) and event.stage == "draining":
        load = "" if event.running is None else f": {event.running} running, {event.queued} queued"
        print(f"GPU {event.gpu}: draining {event.elapsed_s:.0f} s{load}", flush=True)
    elif isinstance(event, CanaryLook):
        print(f"look at {event.intervals} intervals: {event.verdict} ({event.reason})", flush=True)
    elif isinstance(event, OperationStarted | OperationFinished):
        pass  # the command prints its own header and result


def run_refusing(prog: str, work: Callable[[], Any]) -> tuple[int, Any]:
    """Run ``work``; a refusal becomes one line on stderr and exit status 2.

    Returns:
        (0, its value), or (2, None) after a refusal.
    """
    try:
        return 0, work()
    except (UsageError, *REFUSALS) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2, None


def ready_words(start_s: object, stop_s: object) -> str:
    """'in 22.0 s (stop 20.0 s, start 2.0 s)': the time out of service, the stop included."""
    if not isinstance(start_s, int | float):
        return "in ? s"
    if not isinstance(stop_s, int | float) or stop_s <= 0:
        return f"in {start_s:.1f} s"
    return f"in {stop_s + start_s:.1f} s (stop {stop_s:.1f} s, start {start_s:.1f} s)"


def gb(n: object) -> str:
    """Bytes as '12.3 GB', or '?'."""
    return f"{n / 1e9:.1f} GB" if isinstance(n, int | float) else "?"


def format_report(rep: dict[str, Any]) -> str:
    """One GPU's verify line: requested vs effective, KV, Mamba, free memory, time to ready or
    why not (from a journal or a result's report dict; read defensively)."""
    req = rep.get("requested") if isinstance(rep.get("requested"), dict) else {}
    eff = rep.get("effective") if isinstance(rep.get("effective"), dict) else {}
    assert isinstance(req, dict) and isinstance(eff, dict)
    head = f"GPU {rep.get('gpu')}: "
    if not rep.get("ok"):
        word = "REFUSED" if rep.get("error_reason") == "refused" else "FAILED"
        return head + f"{word} {rep.get('failure') or ''}".rstrip()
    cap = " (CAPPED)" if rep.get("capped") else ""
    ready = ready_words(rep.get("time_to_ready_s"), rep.get("stop_s"))
    return head + (
        f"ready {ready}; max_running requested "
        f"{req.get('max_running_requests') or 'auto'} -> effective "
        f"{eff.get('max_running_requests') or '?'}{cap}; "
        f"mamba slots {eff.get('mamba_slots') or '?'}"
        f"; KV tokens {eff.get('kv_tokens') or '?'}; free {gb(rep.get('free_memory_bytes'))}"
    )
