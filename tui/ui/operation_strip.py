"""The status strip: the operation running in the background, in one line above the footer.

It shows the app's current operation (``FleetApp.operation``, a report screen, see
``tui.ui.background``): which GPUs, the phase, the elapsed time and the verdict so far, and
stays after the end until the report is closed. Hidden when there is none. It reads the report
every ``TICK_S`` so its timer ticks between events.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from tui.ui.background import TICK_S, OperationReport


class OperationStrip(Static):
    """One line: the background operation, or nothing (hidden)."""

    DEFAULT_CSS = """
    OperationStrip {
        height: 1;
        padding: 0 1;
        background: $panel;
        display: none;
    }
    """

    def on_mount(self) -> None:
        """Look at the operation once a tick."""
        self.set_interval(TICK_S, self.refresh_line)

    def refresh_line(self) -> None:
        """Show the operation's line (hide the strip when there is none)."""
        report = getattr(self.app, "operation", None)
        if not isinstance(report, OperationReport):
            self.display = False
            return
        line = report.strip_line()
        self.display = True
        if not isinstance(self.content, Content) or line.plain != self.content.plain:
            self.update(line)
