"""What the apply, canary and rollout screens share: a modal that runs one command on the port
and shows it.

The subclass names the operation (``NOUN``, also its worker group), the result type it returns,
its parts and how it draws them; this base runs the command in a worker on mount, folds its
events into the GPU rows, takes the result (or the port's exception). Escape hides the report
while the operation runs (it goes on in the background, ``tui.ui.background``) and closes it
once ended.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from tui.ops.commands import Op
from tui.ops.events import OpEvent
from tui.ops.port import Fleet
from tui.ui.background import (
    TICK_S,
    PhaseClock,
    close_report,
    error_text,
    rows_phrase,
    strip_content,
)
from tui.ui.format import duration
from tui.ui.retune.progress import ApplyProgress, GpuRow, advance
from tui.ui.retune.report_view import report_row
from tui.ui.text_table import Cell

ResultT = TypeVar("ResultT")


class ProgressArrived(Message):
    """One event of the running command (a retune event, a canary look; posted: the port never
    touches widgets)."""

    def __init__(self, event: OpEvent) -> None:
        self.event = event
        """The event."""
        super().__init__()


class RunScreen(ModalScreen[ResultT | None], Generic[ResultT]):
    """Runs one command and shows it; closes (Escape) once it has ended."""

    DEFAULT_CSS = """
    RunScreen {
        align: center bottom;
        background: $background 30%;
    }
    RunScreen > VerticalScroll {
        height: 72%;
        border: thick $primary;
        background: $surface;
        padding: 0 1;
    }
    RunScreen Static {
        margin-bottom: 1;
    }
    """

    NOUN: ClassVar[str]
    """What runs ("apply", "canary", "rollout"): the worker group and the word in the
    messages."""
    RESULT: ClassVar[type[Any]]
    """The type of the worker's result (another value is not taken as the result)."""
    PARTS: ClassVar[tuple[str, ...]]
    """Ids of the Static parts, top to bottom."""

    def __init__(self, port: Fleet, command: Op[ResultT], progress: ApplyProgress) -> None:
        """Args:
        port: The fleet the command runs on.
        command: What runs here.
        progress: The GPU rows at the start.
        """
        super().__init__()
        self.port = port
        """The fleet."""
        self.command = command
        """What runs."""
        self.progress = progress
        """The GPUs' restart rows."""
        self.result: ResultT | None = None
        """The result, once the operation ended."""
        self.error: str | None = None
        """The port's exception, when the command itself raised."""
        self.clock = PhaseClock()
        """The operation's and each GPU's phase time."""

    @property
    def profile(self) -> str:
        """The profile the operation applies."""
        return self.progress.profile

    def compose(self) -> ComposeResult:
        """One Static per part, in a scroll."""
        with VerticalScroll():
            for part in self.PARTS:
                yield Static(id=part)

    def on_mount(self) -> None:
        """Start the operation."""
        self._redraw()
        self.run_worker(self._operate(), group=self.NOUN, exit_on_error=False)
        self.set_interval(TICK_S, self._tick)

    def _tick(self) -> None:
        if not self.finished:
            self._redraw()

    async def _operate(self) -> ResultT:
        """Run the command, each of its events posted to this screen."""
        return await self.port.run(self.command, self._arrived)

    def _arrived(self, event: OpEvent) -> None:
        """An event of the command (on the loop): shown by ``on_progress_arrived``."""
        self.post_message(ProgressArrived(event))

    def on_progress_arrived(self, message: ProgressArrived) -> None:
        """Take what the port reported and redraw."""
        self._take(message.event)
        self.clock.saw(self.progress)
        if self.finished:  # an apply ends with its last event, before its worker returns
            self.clock.end()
        self._redraw()

    def _take(self, event: OpEvent) -> None:
        """Advance the GPU rows by a retune event."""
        self.progress = advance(self.progress, event)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The operation ended: take its result (or its error)."""
        if event.worker.group != self.NOUN:
            return
        if event.state is WorkerState.SUCCESS and isinstance(event.worker.result, self.RESULT):
            self.result = event.worker.result
            self._took_result()
        elif event.state is WorkerState.SUCCESS:
            self._took_no_result()
        elif event.state is WorkerState.ERROR and event.worker.error is not None:
            self.error = error_text(event.worker.error)
        if self.finished:
            self.clock.end()
        self._worker_changed()
        self._redraw()

    def _took_result(self) -> None:
        """Hook: ``result`` was just taken."""

    def _took_no_result(self) -> None:
        """Hook: the worker returned something that is not a result (e.g. None)."""

    def _worker_changed(self) -> None:
        """Hook: the worker changed state (before the redraw)."""

    @property
    def finished(self) -> bool:
        """True once the operation ended (result or error)."""
        return self.result is not None or self.error is not None

    def action_close(self) -> None:
        """Hide the report while the operation runs (it goes on); close it once ended."""
        close_report(self, self.finished, self.result)

    def strip_line(self) -> Content:
        """The operation in one line, for the status strip."""
        body = self.error or self.strip_body()
        return strip_content(self.strip_head(), body, self.clock, self.finished, self.ended_well)

    def strip_head(self) -> str:
        """What runs, on which GPUs (``canary NAME GPU 3``)."""
        return f"{self.NOUN} {self.profile}"

    def strip_body(self) -> str:
        """Its phase, or its result, in a few words."""
        return rows_phrase(self.progress, self.clock)

    @property
    def ended_well(self) -> bool:
        """Whether it ended with the outcome asked for (colours the strip)."""
        return self.result is not None

    # --- drawing -----------------------------------------------------------------------------

    def _redraw(self) -> None:
        """Draw every part from the current state."""
        raise NotImplementedError

    def _part(self, part: str, content: Content) -> None:
        """Show ``content`` in the part of that id."""
        self.query_one(f"#{part}", Static).update(content)


def progress_row(
    row: GpuRow, clock: PhaseClock | None = None, progress: ApplyProgress | None = None
) -> list[Cell]:
    """A GPU's report row, its current phase (what it waits for, with ``progress``) and time
    in it (ticking) while it has no report."""
    elapsed = clock.phase_s(row) if clock is not None else row.elapsed_s
    words = progress.phase_text(row) if progress is not None else row.phase
    phase = f"{words} ({duration(elapsed)})" if row.report is None else ""
    return report_row(row.gpu, row.state, phase, row.report)
