"""Rollout (and rollback) progress: each GPU's phases as its batch restarts, the fleet verdict's
windows as they fill, then the summary (where it stopped, which GPU failed, which stayed on the
old profile, the throughput it cost, the fleet's throughput before vs after)."""

from __future__ import annotations

from textual.binding import Binding
from textual.content import Content

from tui.ops.commands import Rollback, Rollout
from tui.ops.events import OpEvent
from tui.ops.port import Fleet
from tui.ops.types import (
    ApplyRefused,
    GpuFailed,
    GpuPhase,
    GpuReady,
    MeasureProgress,
    RolloutResult,
)
from tui.ui.format import NA
from tui.ui.retune.progress import ApplyProgress
from tui.ui.retune.report_view import REPORT_HEADER, failure_lines
from tui.ui.rollout.describe import (
    compact_range,
    fleet_verdict_lines,
    measuring_line,
    rollout_summary_lines,
)
from tui.ui.run_screen import ProgressArrived, RunScreen, progress_row
from tui.ui.text_table import Cell, text_table
from tui.words import counted

ROLLOUT = "rollout"
"""Worker group of the rollout itself."""


class RolloutScreen(RunScreen[RolloutResult]):
    """Runs one rollout (or rollback) on the port and shows it; closes (Escape) once it
    has ended."""

    NOUN = ROLLOUT
    RESULT = RolloutResult
    PARTS = ("rollout-title", "rollout-gpus", "rollout-verdict", "rollout-summary")

    BINDINGS = [Binding("escape,enter", "close", "Close", id="rollout.close")]

    def __init__(self, port: Fleet, command: Rollout | Rollback, words: str = "") -> None:
        """Args:
        port: The fleet it runs on.
        command: The rollout, or the rollback.
        words: A rollback's previous profile(s) in words, for its title.
        """
        rollback = isinstance(command, Rollback)
        profile = command.name if isinstance(command, Rollout) else words or "the previous profile"
        # No row yet: each GPU's appears when its batch starts.
        super().__init__(port, command, ApplyProgress.start(profile, ()))
        self.batch_size = command.batch
        """GPUs restarted together."""
        self.scope = command.gpus
        """The GPUs it may restart (None: the fleet)."""
        self.rollback = rollback
        """True when this screen runs a rollback."""
        self.all_at_once = isinstance(command, Rollback) and command.all_at_once
        """A rollback of every GPU together."""

    def _arrived(self, event: OpEvent) -> None:
        # Each batch is one apply with its own ApplyFinished: only the rollout's returned
        # result ends the screen, so only the per-GPU events and the verdict's windows show.
        if isinstance(event, GpuPhase | GpuReady | GpuFailed | ApplyRefused | MeasureProgress):
            self.post_message(ProgressArrived(event))

    def strip_head(self) -> str:
        """``rollout NAME`` or ``rollback to NAME``."""
        return f"rollback to {self.profile}" if self.rollback else super().strip_head()

    def strip_body(self) -> str:
        """The batch's phase, or where the rollout stopped."""
        result = self.result
        if result is not None and result.refused:
            return "refused: " + result.refused[0]
        if result is not None:
            done = f"{len(result.done)} of {len(result.planned)} GPUs done"
            if result.failure:
                return f"{done}; STOPPED at {result.failure}"
            verdict = result.verdict
            return f"{done}; fleet {verdict.describe()}" if verdict is not None else done
        if self.progress.refused:
            return "refused: " + self.progress.refused[0]
        measure = self.progress.measure
        if measure is not None and measure.stage == "before" and not self.progress.rows:
            return f"measuring the fleet before, {counted(measure.samples, 'sample')}"
        return super().strip_body()

    @property
    def ended_well(self) -> bool:
        """Every GPU reached and ready."""
        return self.result is not None and self.result.ok

    # --- drawing -----------------------------------------------------------------------------

    def _redraw(self) -> None:
        state = "finished" if self.finished else "running"
        pace = "one GPU at a time" if self.batch_size == 1 else f"{self.batch_size} GPUs at a time"
        if self.rollback:
            pace = "all at once" if self.all_at_once else "one GPU at a time"
            where = f"GPUs {compact_range(self.scope)}" if self.scope is not None else "the fleet"
            what = f"Roll back {where} to [$accent]{self.profile}[/]"
        else:
            where = f" to GPUs {compact_range(self.scope)}" if self.scope is not None else ""
            what = f"Roll out [$accent]{self.profile}[/]{where}"
        title = f"[b]{what}, {pace}[/b]  ({state})"
        self._part("rollout-title", Content.from_markup(title))
        rows: list[list[Cell]] = [
            progress_row(row, self.clock, self.progress) for row in self.progress.rows
        ]
        if self.result is not None:  # the GPUs the rollout never reached
            for gpu in self.result.stayed:
                rows.append([str(gpu), ("stayed", "$warning"), "old profile", *[NA] * 5])
        reports = [r.report for r in self.progress.rows if r.report is not None]
        body: list[Content] = [text_table(REPORT_HEADER, rows, left=3)] if rows else []
        if not rows:
            body.append(Content.styled("waiting for the first batch to start", "dim"))
        self._part("rollout-gpus", Content("\n").join([*body, *failure_lines(reports)]))
        self._part("rollout-verdict", self._verdict())
        self._part("rollout-summary", self._summary())

    def _verdict(self) -> Content:
        if self.result is not None and not self.result.refused:
            lines = fleet_verdict_lines(self.result.verdict)
            return Content("\n").join(Content.styled(text, style) for text, style in lines)
        if self.finished:
            return Content("")
        return Content.styled(measuring_line(self.progress.measure), "dim")

    def _summary(self) -> Content:
        if self.error is not None:
            started = bool(self.progress.rows)
            if self.rollback and not started:
                why = self.error.removeprefix("rollback: ")
                return Content.styled(f"nothing to roll back: {why}", "bold $warning")
            what = "rollback" if self.rollback else "rollout"
            return Content.styled(f"the {what} failed: {self.error}", "bold $error")
        if self.progress.refused:
            refused = ["refused, nothing was stopped:", *self.progress.refused]
            return Content.styled("\n".join(refused), "bold $error")
        if self.result is None:
            what = "rollback" if self.rollback else "rollout"
            return Content.styled(f"Escape: hide (the {what} goes on; w opens this again)", "dim")
        lines = [Content.styled(text, style) for text, style in rollout_summary_lines(self.result)]
        lines.append(Content.styled("Escape: close", "dim"))
        return Content("\n").join(lines)
