"""Apply progress: live per-GPU phases, then the verify report, the throughput verdict, the
journal. A modal over the lower part of the screen, so the grid above keeps updating. (A
rollback walks the fleet like a rollout: ``tui.ui.rollout.rollout_screen`` shows it.)

The apply runs in the background (``tui.ui.background``): Escape hides the report while it goes
on, the status strip shows it, ``w`` opens it again. A failed apply offers ``b``: roll back."""

from __future__ import annotations

from textual import work
from textual.binding import Binding
from textual.content import Content

from tui.ops.commands import Apply
from tui.ops.port import Fleet
from tui.ops.types import ApplyResult, lost_summary
from tui.ui.background import close_report, rows_phrase, strip_content
from tui.ui.format import duration
from tui.ui.gate import ReadOnlyGate
from tui.ui.retune.progress import ApplyProgress, finish
from tui.ui.retune.report_view import REPORT_HEADER, failure_lines, report_row, verdict_lines
from tui.ui.rollout.describe import compact_range
from tui.ui.run_screen import RunScreen
from tui.ui.text_table import text_table
from tui.ui.tuning.candidate import gpu_range
from tui.words import counted

APPLY = "apply"
"""Worker group of the apply itself."""


class ApplyScreen(RunScreen[ApplyResult], ReadOnlyGate[ApplyResult | None]):
    """Runs one apply on the port and shows it; Escape hides it while it runs (it goes
    on in the background) and closes it once it has ended."""

    NOUN = APPLY
    RESULT = ApplyResult
    PARTS = ("apply-title", "apply-gpus", "apply-throughput", "apply-summary")

    BINDINGS = [
        Binding("escape,enter", "close", "Close", id="apply.close"),
        Binding("b", "rollback", "Roll back", id="apply.rollback"),
    ]

    def __init__(self, port: Fleet, apply: Apply) -> None:
        """Args:
        port: The fleet the apply runs on (its journal says whether it was recorded).
        apply: The apply (its GPUs; None: every GPU of its profile).
        """
        gpus = apply.gpus if apply.gpus is not None else _profile_gpus(apply)
        targets = tuple(sorted(gpus))
        super().__init__(port, apply, ApplyProgress.start(apply.name, targets))
        self.gpus = targets
        """Targeted GPUs."""
        self.journal_note = ""
        """Whether the result is in the journal, once checked."""

    def _took_result(self) -> None:
        """The apply ended: show its result, then look for it in the journal."""
        assert self.result is not None
        self.progress = finish(self.progress, self.result)
        self.journal_note = "checking the journal..."
        self._check_journal(self.result)

    def _worker_changed(self) -> None:
        if self.finished:
            self.refresh_bindings()  # `b` appears on a failed apply

    @work(thread=True, group="apply-journal", exit_on_error=False)
    def _check_journal(self, result: ApplyResult) -> None:
        read = self.port.reads.journal()
        found = any(
            e.type == "apply" and e.target == result.profile and e.started_at == result.started_at
            for e in read.entries
        )
        note = "written to the journal" if found else "NOT found in the journal"
        self.app.call_from_thread(self._set_journal_note, note)

    def _set_journal_note(self, note: str) -> None:
        self.journal_note = note
        self._redraw()

    @property
    def finished(self) -> bool:
        """True once the apply ended (its last event, a refusal, or an error)."""
        return self.progress.finished or self.error is not None

    def action_close(self) -> None:
        """Hide the report while the apply runs (it goes on); close it once it has ended."""
        close_report(self, self.finished, self.progress.result)

    @property
    def rollback_offered(self) -> bool:
        """A finished apply that failed on a GPU it changed offers its rollback; a refused
        apply, or one refused on every GPU (nothing signalled), changed nothing to roll back."""
        result = self.progress.result
        return (
            result is not None
            and not result.ok
            and not result.refused
            and any(r.status != "refused" for r in result.reports)
        )

    def check_operation(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`b` appears only on a failed apply."""
        if action == "rollback":
            return self.rollback_offered
        return True

    def action_rollback(self) -> None:
        """Close this report and ask to roll back (the main screen's rollback, confirmed)."""
        if not self.rollback_offered:
            return
        close_report(self, True, self.progress.result)
        # Textual's own dispatch: the main screen's `rollback` action, as its key would run it.
        self.app.call_after_refresh(self.app.run_action, "rollback", self.app.get_default_screen())

    def strip_line(self) -> Content:
        """The apply in one line, for the status strip."""
        plural = "s" if len(self.gpus) != 1 else ""
        gpus = f"GPU{plural} {compact_range(self.gpus)}" if self.gpus else "the fleet"
        head = f"apply {self.progress.profile} {gpus}"
        result = self.progress.result
        if self.error is not None:
            body = self.error
        elif self.progress.refused:
            body = "refused: " + self.progress.refused[0]
        else:
            body = rows_phrase(self.progress, self.clock)
            if result is not None and result.throughput is not None:
                body += f"; {result.throughput.describe()}"
            elif self.progress.measure is not None and result is None:
                body += f"; measuring {self.progress.measure.stage}"
        if result is not None and (lost := lost_summary(result.reports)):
            body += f"; {lost}"
        ok = result is not None and result.ok and not result.lost_requests and self.error is None
        return strip_content(head, body, self.clock, self.finished, ok)

    # --- drawing -----------------------------------------------------------------------------

    def _redraw(self) -> None:
        progress = self.progress
        state = "running" if not self.finished else "finished"
        plural = "s" if len(self.gpus) > 1 else ""
        gpus = f"GPU{plural} {gpu_range(self.gpus)}" if self.gpus else "the fleet"
        name = f"[$accent]{progress.profile}[/]"
        what = f"[b]Apply {name} to {gpus}[/b]"
        self._part("apply-title", Content.from_markup(f"{what}  ({state})"))
        rows = []
        for row in progress.rows:
            phase = f"{progress.phase_text(row)} ({duration(self.clock.phase_s(row))})"
            state = row.state
            if row.report is None and self.finished:
                # it ended without a report for this GPU: it never started, or was cut short
                state = "not started" if row.phase == "waiting" else "interrupted"
                phase = row.phase if row.phase != "waiting" else ""
            rows.append(report_row(row.gpu, state, phase if row.report is None else "", row.report))
        reports = [r.report for r in progress.rows if r.report is not None]
        table = text_table(REPORT_HEADER, rows, left=3)
        self._part("apply-gpus", Content("\n").join([table, *failure_lines(reports)]))
        self._part("apply-throughput", self._throughput())
        self._part("apply-summary", self._summary())

    def _throughput(self) -> Content:
        result = self.progress.result
        if result is not None:
            return Content("\n").join(verdict_lines(result.throughput))
        measure = self.progress.measure
        if measure is None:
            return Content.styled("throughput: measured once every GPU has settled", "dim")
        return Content(
            f"throughput: measuring {measure.stage}, {counted(measure.samples, 'sample')} "
            f"({measure.window_s:.0f} s window)"
        )

    def _summary(self) -> Content:
        if self.error is not None:
            return Content.styled(f"the apply failed: {self.error}", "bold $error")
        if self.progress.refused:
            refused = ["refused, nothing was stopped:", *self.progress.refused]
            return Content.styled("\n".join(refused), "bold $error")
        result = self.progress.result
        if result is None:
            return Content.styled("Escape: hide (the apply goes on; w opens this again)", "dim")
        failed = [r for r in result.reports if not r.ok]
        ready = len(result.reports) - len(failed)
        text = f"{ready} of {len(result.reports)} GPUs ready"
        if failed:
            text += "; failed: " + ", ".join(
                f"GPU {r.gpu} ({r.error_reason or 'failed'})" for r in failed
            )
        lost = lost_summary(result.reports)
        if lost:
            text += f"; {lost}"
        text += f"; took {duration(result.finished_at - result.started_at)}"
        style = "bold $success" if result.ok and not lost else "bold $error"
        lines = [Content.styled(text, style)]
        if self.journal_note:
            lines.append(Content(f"journal: {self.journal_note}"))
        keys = "b: roll back  Escape: close" if self.rollback_offered else "Escape: close"
        lines.append(Content.styled(keys, "dim"))
        return Content("\n").join(lines)


def _profile_gpus(apply: Apply) -> tuple[int, ...]:
    """The GPUs of the apply's profile (none known for a profile named only)."""
    return () if isinstance(apply.profile, str) else apply.profile.gpus
