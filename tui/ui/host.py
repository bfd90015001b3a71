"""What the console's widgets read of the app they run in: one typed base, ``ConsoleHost``.

The console (``tui.ui.app.FleetApp``) is a ``ConsoleHost`` and sets these; a widget mounted in
another app (a test's bare ``App``) gets None from ``host_of`` and uses its own default. Before
this base the widgets probed the app with ``getattr(self.app, "...", default)``: nothing checked
the names, and one of them read an attribute that no app set (the job's energy line never showed
in the console; it now reads through the port, ``FleetReads.job_energy``).

It imports nothing of the console's widgets, so every widget may import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.dom import DOMNode
from textual.screen import Screen

from tui.history import HistoryRecorder

if TYPE_CHECKING:
    from tui.ui.pipeline.chart_read import SeriesSource


class ConsoleHost(App[None]):
    """The app-wide values the console's widgets read (the console sets them)."""

    readonly: bool = False
    """Whether the console only watches (``tui.ui.gate``)."""
    poll_interval_s: float = 1.0
    """Seconds between the fleet's polls (a panel's reading is late after this)."""
    history: HistoryRecorder | None = None
    """The fleet's time series (the panels' graphs and the generation pane's chart)."""
    chart_source: SeriesSource | None = None
    """Where the generation pane's chart reads instead of ``history`` (``--prometheus``)."""
    operation: Screen[Any] | None = None
    """The report of the operation running in the background (or of the last one, until its
    report is closed; ``tui.ui.operation_host``)."""

    async def forget_operation(self, screen: Screen[Any]) -> None:
        """Close an ended operation's report for good (``tui.ui.operation_host``)."""


def host_of(node: DOMNode) -> ConsoleHost | None:
    """The console ``node`` runs in (None: another app, which has none of these)."""
    app = node.app
    return app if isinstance(app, ConsoleHost) else None
