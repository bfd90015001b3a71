"""Operations in the background: an apply, rollback, canary or rollout outlives its report.

The report screen of an operation (``ApplyScreen``, ``CanaryScreen``, ``RolloutScreen``) runs
the backend's coroutine in its own worker. The app installs that screen (``OPERATION_SCREEN``),
so closing it while the operation runs only hides it: the worker goes on, the grid, the details
and the logs stay usable, the status strip (``tui.ui.operation_strip``) shows its progress in
one line, and ``w`` opens the report again. One operation at a time: a second one is refused
with a notification naming the first (the operations core would refuse it too, with
``OperationBusy``), never queued.

Each report's phase timer ticks: a GPU's time in its phase is the backend's elapsed time at the
newest event plus the time since that event arrived (``PhaseClock``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from textual.content import Content
from textual.screen import Screen

from tui.ops.lock import OperationBusy
from tui.ops.service import OperationError
from tui.ui.format import duration
from tui.ui.host import host_of
from tui.ui.retune.progress import ApplyProgress, GpuRow

OPERATION_SCREEN = "operation"
"""The prefix of the names operations' reports are installed under (``operation-N``)."""
TICK_S = 1.0
"""How often a running report redraws its timers."""


@runtime_checkable
class OperationReport(Protocol):
    """What the app and the strip need of an operation's report screen."""

    @property
    def finished(self) -> bool:
        """True once the operation ended (result, refusal or error)."""
        ...

    def strip_line(self) -> Content:
        """The operation in one line: what, which GPUs, phase, elapsed, verdict so far."""
        ...


def error_text(error: BaseException) -> str:
    """A refusal of the operations core in its own words (one line); anything else with its
    type, since it was not expected."""
    if isinstance(error, OperationError | OperationBusy):
        return " ".join(str(error).split())
    return f"{type(error).__name__}: {error}"


class PhaseClock:
    """When each GPU's newest event arrived, so its phase time ticks between events."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Args:
        clock: Monotonic seconds (tests pass a fake one).
        """
        self._clock = clock
        self._arrived: dict[int, tuple[float, float]] = {}
        self.started_at = clock()
        """When the operation started."""
        self.ended_at: float | None = None
        """When it ended (its elapsed time stops there)."""

    def saw(self, progress: ApplyProgress) -> None:
        """Note the rows whose elapsed time changed (a new phase event) as arrived now."""
        now = self._clock()
        for row in progress.rows:
            known = self._arrived.get(row.gpu)
            if known is None or known[1] != row.elapsed_s:
                self._arrived[row.gpu] = (now, row.elapsed_s)

    def end(self) -> None:
        """The operation ended: stop every timer."""
        if self.ended_at is None:
            self.ended_at = self._clock()

    def elapsed(self) -> float:
        """Seconds since the operation started (up to its end)."""
        return (self.ended_at or self._clock()) - self.started_at

    def phase_s(self, row: GpuRow) -> float:
        """Seconds of this GPU's apply so far, ticking between its events."""
        arrived = self._arrived.get(row.gpu)
        if arrived is None or row.report is not None:
            return row.elapsed_s
        return row.elapsed_s + max((self.ended_at or self._clock()) - arrived[0], 0.0)


def rows_phrase(progress: ApplyProgress, clock: PhaseClock) -> str:
    """The GPUs in a few words: ``GPU 3 loading weights 12s, +2, 1 ready, 1 failed`` (the
    first GPU still in progress, how many more are, how many settled)."""
    moving = [r for r in progress.rows if r.report is None]
    ready = sum(1 for r in progress.rows if r.report is not None and r.report.ok)
    failed = sum(1 for r in progress.rows if r.report is not None and not r.report.ok)
    parts = []
    if moving:
        row = moving[0]
        parts.append(f"GPU {row.gpu} {progress.phase_text(row)} {duration(clock.phase_s(row))}")
        if len(moving) > 1:
            parts.append(f"+{len(moving) - 1}")
    if ready:
        parts.append(f"{ready} ready")
    if failed:
        parts.append(f"{failed} failed")
    return ", ".join(parts) or "starting"


def strip_content(head: str, body: str, clock: PhaseClock, finished: bool, ok: bool) -> Content:
    """One strip line: ``apply NAME GPU 3,5 · body · 1m 12s · w: report``.

    Args:
        head: What runs, on which GPUs.
        body: Its phase (or result) in words.
        clock: The operation's clock (elapsed time).
        finished: Whether it ended.
        ok: Whether it ended well (colours the line).
    """
    style = "$accent" if not finished else ("$success" if ok else "$error")
    state = "" if not finished else " done:"
    return Content.assemble(
        (f"{head}{state}", f"bold {style}"),
        f" · {body} · {duration(clock.elapsed())}",
        (" · w: report", "dim"),
    )


def close_report(screen: Screen[Any], finished: bool, result: object) -> None:
    """Escape on a report: hide it while the operation runs (it goes on), else dismiss it.

    Args:
        screen: The report screen.
        finished: Whether its operation ended.
        result: What to dismiss it with once ended.
    """
    if not finished:
        screen.app.pop_screen()
        screen.app.notify("It goes on in the background; w opens its report.", timeout=3)
        return
    screen.dismiss(result)
    host = host_of(screen)
    if host is not None:
        host.call_after_refresh(host.forget_operation, screen)
