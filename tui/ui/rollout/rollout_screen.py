"""Rollout progress: each GPU's phases as its batch restarts, then the summary (where it stopped,
which GPU failed, which stayed on the old profile, the throughput it cost)."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from tui.retune.events import ApplyRefused, GpuFailed, GpuPhase, GpuReady
from tui.rollout.rollout import RolloutResult
from tui.ui.format import NA, duration
from tui.ui.retune.progress import ApplyProgress, advance
from tui.ui.retune.report_view import REPORT_HEADER, failure_lines, report_row
from tui.ui.rollout.describe import rollout_summary_lines
from tui.ui.rollout.messages import ProgressArrived
from tui.ui.sources import FleetActions
from tui.ui.text_table import Cell, text_table

ROLLOUT = "rollout"
"""Worker group of the rollout itself."""


class RolloutScreen(ModalScreen[RolloutResult | None]):
    """Runs one rollout through the backend and shows it; closes (Escape) once it has ended."""

    DEFAULT_CSS = """
    RolloutScreen {
        align: center bottom;
        background: $background 30%;
    }
    RolloutScreen > VerticalScroll {
        height: 72%;
        border: thick $primary;
        background: $surface;
        padding: 0 1;
    }
    RolloutScreen Static {
        margin-bottom: 1;
    }
    """

    BINDINGS = [Binding("escape,enter", "close", "Close", id="rollout.close")]

    def __init__(self, actions: FleetActions, profile: str, batch: int = 1) -> None:
        """Args:
        actions: The backend whose ``rollout`` runs here.
        profile: The profile rolled out.
        batch: GPUs restarted together.
        """
        super().__init__()
        self.actions = actions
        """The backend."""
        self.batch_size = batch
        """GPUs restarted together."""
        self.progress = ApplyProgress.start(profile, ())
        """Each GPU reached so far (a row appears when its batch starts)."""
        self.result: RolloutResult | None = None
        """The result, once the rollout ended."""
        self.error: str | None = None
        """The backend's exception, when the rollout itself raised."""

    @property
    def profile(self) -> str:
        """The profile rolled out."""
        return self.progress.profile

    def compose(self) -> ComposeResult:
        """Title, GPU rows, summary."""
        with VerticalScroll():
            yield Static(id="rollout-title")
            yield Static(id="rollout-gpus")
            yield Static(id="rollout-summary")

    def on_mount(self) -> None:
        """Start the rollout."""
        self._redraw()
        self._run_rollout()

    @work(group=ROLLOUT, exit_on_error=False)
    async def _run_rollout(self) -> RolloutResult:
        return await self.actions.rollout(self.profile, self.batch_size, on_event=self._arrived)

    def _arrived(self, event: object) -> None:
        # Each batch is one apply with its own ApplyFinished: only the rollout's returned
        # result ends the screen, so only the per-GPU events are shown.
        if isinstance(event, GpuPhase | GpuReady | GpuFailed | ApplyRefused):
            self.post_message(ProgressArrived(event))

    def on_progress_arrived(self, message: ProgressArrived) -> None:
        """Advance the GPU's row and redraw."""
        self.progress = advance(self.progress, message.item)
        self._redraw()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The rollout ended: take its result (or its error)."""
        if event.worker.group != ROLLOUT:
            return
        if event.state is WorkerState.SUCCESS and isinstance(event.worker.result, RolloutResult):
            self.result = event.worker.result
        elif event.state is WorkerState.ERROR:
            self.error = f"{type(event.worker.error).__name__}: {event.worker.error}"
        self._redraw()

    @property
    def finished(self) -> bool:
        """True once the rollout ended (result or error)."""
        return self.result is not None or self.error is not None

    def action_close(self) -> None:
        """Close once the rollout has ended (closing earlier would cancel it)."""
        if not self.finished:
            self.notify("The rollout is still running; this closes when it has ended.")
            return
        self.dismiss(self.result)

    # --- drawing -----------------------------------------------------------------------------

    def _redraw(self) -> None:
        state = "finished" if self.finished else "running"
        pace = "one GPU at a time" if self.batch_size == 1 else f"{self.batch_size} GPUs at a time"
        title = f"[b]Roll out [$accent]{self.profile}[/], {pace}[/b]  ({state})"
        self.query_one("#rollout-title", Static).update(Content.from_markup(title))
        rows: list[list[Cell]] = []
        for row in self.progress.rows:
            phase = f"{row.phase} ({duration(row.elapsed_s)})" if row.report is None else ""
            rows.append(report_row(row.gpu, row.state, phase, row.report))
        if self.result is not None:  # the GPUs the rollout never reached
            for gpu in self.result.stayed:
                rows.append([str(gpu), ("stayed", "$warning"), "old profile", *[NA] * 5])
        reports = [r.report for r in self.progress.rows if r.report is not None]
        body: list[Content] = [text_table(REPORT_HEADER, rows, left=3)] if rows else []
        if not rows:
            body.append(Content.styled("waiting for the first batch to start", "dim"))
        self.query_one("#rollout-gpus", Static).update(
            Content("\n").join([*body, *failure_lines(reports)])
        )
        self.query_one("#rollout-summary", Static).update(self._summary())

    def _summary(self) -> Content:
        if self.error is not None:
            return Content.styled(f"the rollout failed: {self.error}", "bold $error")
        if self.progress.refused:
            refused = ["refused, nothing was stopped:", *self.progress.refused]
            return Content.styled("\n".join(refused), "bold $error")
        if self.result is None:
            return Content.styled("Escape closes once the rollout has ended", "dim")
        lines = [Content.styled(text, style) for text, style in rollout_summary_lines(self.result)]
        lines.append(Content.styled("Escape: close", "dim"))
        return Content("\n").join(lines)
