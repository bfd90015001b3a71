"""Canary progress: the canary GPU's restart phases, each look of the window, then the verdict.

A modal over the lower part of the screen (the grid above keeps updating). After a "better"
verdict, `o` offers to roll the profile out to the remaining GPUs one at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual import work
from textual.binding import Binding
from textual.content import Content

from tui.ops.commands import Canary, Kind, Rollout
from tui.ops.events import OpEvent
from tui.ops.port import Fleet
from tui.ops.types import CanaryLook, CanaryResult, GpuFailed, GpuReady
from tui.ui.confirm import ConfirmScreen
from tui.ui.gate import ReadOnlyGate
from tui.ui.messages import OperationRequested
from tui.ui.retune.progress import ApplyProgress, advance
from tui.ui.retune.report_view import REPORT_HEADER, failure_lines
from tui.ui.rollout.describe import (
    canary_verdict_lines,
    compact_range,
    look_line,
    rollout_question,
)
from tui.ui.run_screen import RunScreen, progress_row
from tui.ui.text_table import text_table

CANARY = "canary"
"""Worker group of the canary itself."""


class CanaryScreen(RunScreen[CanaryResult], ReadOnlyGate[CanaryResult | None]):
    """Runs one canary on the port and shows it; closes (Escape) once it has ended."""

    NOUN = CANARY
    RESULT = CanaryResult
    PARTS = ("canary-title", "canary-gpu", "canary-looks", "canary-verdict")

    BINDINGS = [
        Binding("escape,enter", "close", "Close", id="canary.close"),
        Binding("o", "rollout", "Roll out", id="canary.rollout"),
    ]

    def __init__(
        self,
        port: Fleet,
        canary: Canary,
        fleet: tuple[int, ...],
        controls: tuple[int, ...] | None = None,
    ) -> None:
        """Args:
        port: The fleet the canary runs on.
        canary: The canary (its candidate and GPU).
        fleet: Every GPU of the fleet (the others are the control, unless ``controls``).
        controls: The control GPUs when the port picks them (a many-node console: the GPUs
            running the canary GPU's profile on every node); the result's once it ends.
        """
        # Before its restart the canary measures the GPUs' baseline: that is what GPU waits for.
        gpu = canary.gpu
        super().__init__(port, canary, ApplyProgress.start(canary.name, (gpu,), "the baseline"))
        self.canary = canary
        """The canary."""
        self.gpu = gpu
        """The canary GPU."""
        self.fleet = tuple(sorted(fleet))
        """Every GPU of the fleet."""
        self.looks: list[CanaryLook] = []
        """Every look so far."""
        self.controls = controls
        """The control GPUs the port picked (None: every other GPU of the fleet)."""

    def _take(self, event: OpEvent) -> None:
        """A look joins the list; a retune event advances the GPU's row."""
        if isinstance(event, CanaryLook):
            self.looks.append(event)
        else:
            super()._take(event)

    def _took_result(self) -> None:
        """A port may end without the ready/failed event: the report settles the row."""
        if self.result is not None and self.result.report is not None:
            self.progress = advance(self.progress, _settled(self.result))

    def _worker_changed(self) -> None:
        """`o` may now apply."""
        self.refresh_bindings()

    @property
    def rollout_offered(self) -> bool:
        """True after a 'better' verdict when the port can roll out."""
        return (
            self.result is not None
            and self.result.verdict == "better"
            and Kind.ROLLOUT in self.port.capabilities()
        )

    def check_operation(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`o` appears only after a 'better' verdict."""
        if action == "rollout":
            return self.rollout_offered
        return True

    def disabled_reason(self, action: str, parameters: tuple[object, ...]) -> str:
        """Why `o` is not offered yet."""
        if action != "rollout":
            return ""
        if self.result is None:
            return "o rolls the profile out after a 'better' verdict; the canary is measuring"
        return f"o rolls out a 'better' profile only; this canary ended {self.result.verdict}"

    def action_rollout(self) -> None:
        """Roll the winner out to the remaining GPUs one at a time, after confirmation."""
        if self.rollout_offered:
            self._confirm_rollout()

    @work(group="ask", exclusive=True, exit_on_error=False)
    async def _confirm_rollout(self) -> None:
        remaining = tuple(g for g in self.fleet if g != self.gpu)
        title, detail = rollout_question(self.profile, remaining)
        if await self.app.push_screen_wait(ConfirmScreen(title, detail, "Roll out")):
            self.app.post_message(OperationRequested(Rollout(self.canary.profile)))

    def strip_head(self) -> str:
        """``canary NAME GPU 3``."""
        return f"canary {self.profile} GPU {self.gpu}"

    def strip_body(self) -> str:
        """The GPU's phase, then the newest look's verdict so far, then the verdict."""
        if self.result is not None:
            refused = "; ".join(self.result.refused)
            return f"refused: {refused}" if refused else f"{self.result.verdict}"
        if self.looks:
            look = self.looks[-1]
            return f"look {len(self.looks)}: {look.verdict} so far ({look.reason})"
        return super().strip_body()

    @property
    def ended_well(self) -> bool:
        """A 'better' verdict."""
        return self.result is not None and self.result.verdict == "better"

    # --- drawing -----------------------------------------------------------------------------

    def _redraw(self) -> None:
        state = "finished" if self.finished else "running"
        if self.result is not None and not self.result.refused:
            chosen: Sequence[int] = self.result.controls
        elif self.controls is not None:
            chosen = self.controls
        else:
            chosen = [g for g in self.fleet if g != self.gpu]
        controls = compact_range(chosen)
        title = (
            f"[b]Canary of [$accent]{self.profile}[/] on GPU {self.gpu}[/b]  "
            f"(control: GPUs {controls}; {state})"
        )
        self._part("canary-title", Content.from_markup(title))
        row = self.progress.rows[0]
        table = text_table(REPORT_HEADER, [progress_row(row, self.clock, self.progress)], left=3)
        reports = [row.report] if row.report is not None else []
        self._part("canary-gpu", Content("\n").join([table, *failure_lines(reports)]))
        self._part("canary-looks", self._looks())
        self._part("canary-verdict", self._verdict())

    def _looks(self) -> Content:
        if not self.looks:
            return Content.styled("looks: measured once the canary is ready and warmed up", "dim")
        shown = self.looks[-8:]  # the newest looks; the verdict summarises them all
        lines = [Content.styled(f"looks ({len(self.looks)}):", "bold")]
        lines += [Content(f"  {look_line(look)}") for look in shown]
        return Content("\n").join(lines)

    def _verdict(self) -> Content:
        if self.error is not None:
            return Content.styled(f"the canary failed: {self.error}", "bold $error")
        if self.result is None:
            return Content.styled("Escape: hide (the canary goes on; w opens this again)", "dim")
        lines = [Content.styled(text, style) for text, style in canary_verdict_lines(self.result)]
        keys = "o: roll out to the other GPUs one at a time  Escape: close"
        lines.append(Content.styled(keys if self.rollout_offered else "Escape: close", "dim"))
        return Content("\n").join(lines)


def _settled(result: CanaryResult) -> GpuReady | GpuFailed:
    """The ready/failed event a result implies (a port may not have sent one)."""
    report = result.report
    assert report is not None
    return GpuReady(report.gpu, report) if report.ok else GpuFailed(report.gpu, report)
