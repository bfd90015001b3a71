"""The state of one apply as the console shows it, advanced by each retune event (pure)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tui.ops.events import OpEvent
from tui.ops.types import (
    ApplyFinished,
    ApplyRefused,
    ApplyResult,
    GpuFailed,
    GpuPhase,
    GpuReady,
    MeasureProgress,
    VerifyReport,
)

WAITING = "waiting"
"""The phase of a GPU the operation has not reached yet (``ApplyProgress.phase_text`` says
what it waits for)."""


@dataclass(frozen=True, slots=True)
class GpuRow:
    """One GPU's line: its newest phase, and its verify report once it settled."""

    gpu: int
    """GPU index."""
    phase: str = WAITING
    """Newest step or startup phase in words."""
    elapsed_s: float = 0.0
    """Seconds since this GPU's apply began, at the newest phase."""
    report: VerifyReport | None = None
    """The verify report (ready or failed)."""

    @property
    def state(self) -> str:
        """'ready', 'failed' or 'in progress'."""
        if self.report is None:
            return "in progress"
        return "ready" if self.report.ok else "failed"


@dataclass(frozen=True, slots=True)
class ApplyProgress:
    """Everything the apply screen shows."""

    profile: str
    """Profile being applied."""
    rows: tuple[GpuRow, ...]
    """One per targeted GPU, in GPU order."""
    measure: MeasureProgress | None = None
    """The newest throughput measurement step."""
    refused: tuple[str, ...] = ()
    """Why the apply was refused (nothing was stopped)."""
    result: ApplyResult | None = None
    """The final result, once the apply ended."""
    waits_for: str = "its turn to stop"
    """What a GPU not reached yet waits for, when no measurement says more (a canary: the
    baseline its controls are measured against)."""

    @classmethod
    def start(
        cls, profile: str, gpus: tuple[int, ...], waits_for: str = "its turn to stop"
    ) -> ApplyProgress:
        """Every GPU waiting (for ``waits_for``)."""
        return cls(profile, tuple(GpuRow(g) for g in sorted(gpus)), waits_for=waits_for)

    def phase_text(self, row: GpuRow) -> str:
        """The row's phase in words; a waiting GPU says what for ('GPU 0 waiting 7s' never
        said: an apply measures the throughput before it stops anything)."""
        if row.phase != WAITING:
            return row.phase
        measure = self.measure
        if measure is not None and measure.stage == "before":
            return f"waiting for the throughput before ({measure.window_s:g} s window)"
        return f"waiting for {self.waits_for}"

    @property
    def finished(self) -> bool:
        """True once the result (or a refusal) arrived."""
        return self.result is not None or bool(self.refused)

    def _with_row(self, gpu: int, **changes: object) -> ApplyProgress:
        rows = list(self.rows)
        index = next((i for i, r in enumerate(rows) if r.gpu == gpu), None)
        if index is None:  # a GPU the screen was not told about: show it anyway
            rows.append(GpuRow(gpu))
            rows.sort(key=lambda r: r.gpu)
            index = next(i for i, r in enumerate(rows) if r.gpu == gpu)
        rows[index] = replace(rows[index], **changes)  # type: ignore[arg-type]
        return replace(self, rows=tuple(rows))


def advance(progress: ApplyProgress, event: OpEvent) -> ApplyProgress:
    """The progress after ``event`` (the events of other phases change nothing).

    Args:
        progress: The progress so far.
        event: An operation's event (``tui.ops.events.OpEvent``).

    Returns:
        The new progress.
    """
    match event:
        case GpuPhase(gpu, phase, elapsed_s):
            return progress._with_row(gpu, phase=phase, elapsed_s=elapsed_s)
        case GpuReady(gpu, report):
            return progress._with_row(gpu, phase="ready", report=report)
        case GpuFailed(gpu, report):
            return progress._with_row(gpu, phase="failed", report=report)
        case MeasureProgress():
            return replace(progress, measure=event)
        case ApplyRefused(errors):
            return replace(progress, refused=errors)
        case ApplyFinished(result):
            return finish(progress, result)
    return progress


def finish(progress: ApplyProgress, result: ApplyResult) -> ApplyProgress:
    """Take the final result: every report it holds fills its row."""
    done = replace(progress, result=result, refused=result.refused or progress.refused)
    for report in result.reports:
        done = done._with_row(report.gpu, phase="ready" if report.ok else "failed", report=report)
    if not result.refused:  # a walk that stopped at a failure never reached these GPUs
        reported = {report.gpu for report in result.reports}
        for gpu in result.gpus:
            if gpu not in reported:
                done = done._with_row(gpu, phase="untouched")
    return done
