"""The alerts list (``!``): what fires now, then what resolved lately.

What fires comes from the console's runner; what resolved from the alerts' journal
(``tui.paths.alerts_journal_file()``, read in a thread worker: whoever published them, this
console or the agent, journalled them there), else from what this console saw resolve. On a
console over many nodes both come from the nodes' agents (each alert naming its node): what
resolved is what this console saw resolve, each node's journal staying on its node.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Header, Static

from tui import paths
from tui.ops.alerts.engine import AlertCleared, AlertFired
from tui.ops.journal import JournalEntry, read_journal
from tui.ui.footer import FleetFooter

RESOLVED_SHOWN = 20
"""Resolved alerts listed, newest first."""


def clock(at: float) -> str:
    """A moment as the operator's local time (``2026-05-09 22:18:20``)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def firing_lines(active: Sequence[AlertFired]) -> list[Content]:
    """``FIRING since 22:18:20  crashed: GPU 2 crashed: killed by SIGKILL``, oldest first."""
    if not active:
        return [Content.styled("nothing fires", "$success")]
    return [
        Content.assemble(
            ("FIRING ", "bold $error"), f"since {clock(a.since)}  {a.rule}: {a.message}"
        )
        for a in active
    ]


def resolved_lines(
    journal: Sequence[JournalEntry] | None, seen: Sequence[AlertCleared]
) -> list[Content]:
    """The alerts that resolved lately, newest first: the journal's (None: it could not be
    read, then what this console saw)."""
    if journal is not None:
        rows = [
            (
                e.finished_at,
                e.started_at,
                str(e.detail.get("rule", "")),
                str(e.detail.get("message", "")),
            )
            for e in journal
            if e.type == "alert" and e.verdict == "resolved"
        ]
    else:
        rows = [(c.at, c.fired_at, c.rule, c.message) for c in seen]
    rows.sort(key=lambda row: -row[0])
    if not rows:
        return [Content.styled("none resolved lately", "$text-muted")]
    return [
        Content.assemble(
            ("resolved ", "$success"),
            f"{clock(at)} (fired {clock(fired)})  {rule}: {message}",
        )
        for at, fired, rule, message in rows[:RESOLVED_SHOWN]
    ]


class AlertsScreen(Screen[None]):
    """The alerts, firing and lately resolved; the app refreshes it at each poll (``show``)."""

    DEFAULT_CSS = """
    AlertsScreen #alerts-list {
        padding: 0 1;
    }
    """

    BINDINGS = [Binding("escape,q", "app.pop_screen", "Back", id="alerts.back")]

    def __init__(
        self,
        active: tuple[AlertFired, ...],
        resolved: tuple[AlertCleared, ...],
        publishing: bool,
        *,
        running: bool,
        from_nodes: bool = False,
    ) -> None:
        """Args:
        active: What fires now.
        resolved: What this console saw resolve, oldest first.
        publishing: Whether this console journals and posts the alerts.
        running: Whether this console runs the alerts at all.
        from_nodes: Whether they are the nodes' agents' (a console over many nodes).
        """
        super().__init__()
        self.active, self.resolved, self.publishing = active, resolved, publishing
        self.running, self.from_nodes = running, from_nodes
        self.journal: tuple[JournalEntry, ...] | None = None
        """The alerts' journal as last read (None: not read, or unreadable)."""
        self.journal_problem = ""

    def compose(self) -> ComposeResult:
        """Header, the list, the keys."""
        yield Header()
        with VerticalScroll():
            yield Static(id="alerts-list")
        yield FleetFooter()

    def on_mount(self) -> None:
        """Title; the list now, the journal's resolved ones once read."""
        self.title = "Alerts"
        self._draw()
        if not self.from_nodes:  # this host's journal holds none of the nodes' alerts
            self.read_journal()

    @work(thread=True, exclusive=True, group="alerts-journal", exit_on_error=False)
    def read_journal(self) -> None:
        """Read the alerts' journal off the loop."""
        found = read_journal(paths.alerts_journal_file())
        self.app.call_from_thread(self._journal_read, found.entries, found.unreadable)

    def _journal_read(self, entries: tuple[JournalEntry, ...], problem: str) -> None:
        self.journal, self.journal_problem = (None, problem) if problem else (entries, "")
        if self.is_mounted:
            self._draw()

    def show(
        self,
        active: tuple[AlertFired, ...],
        resolved: tuple[AlertCleared, ...],
        publishing: bool,
    ) -> None:
        """A new poll's alerts; the journal is read again when something resolved."""
        again = len(resolved) != len(self.resolved) or resolved[-1:] != self.resolved[-1:]
        self.active, self.resolved, self.publishing = active, resolved, publishing
        self._draw()
        if again and not self.from_nodes:
            self.read_journal()

    def _who(self) -> Content:
        if self.from_nodes:
            return Content(
                "the nodes' agents run these alerts, journal and post them (gpufleet journal "
                "--alerts on each node): this console shows them and posts nothing"
            )
        if not self.running:
            return Content.styled(
                "this console does not run the alerts (gpufleet alerts --watch, or the agent)",
                "$text-muted",
            )
        if self.publishing:
            return Content("this console journals and posts them (it holds the alerts' lock)")
        return Content(
            "another process (the agent, or gpufleet alerts) journals and posts them: this "
            "console shows them and posts nothing"
        )

    def _draw(self) -> None:
        lines = [
            self._who(),
            Content(""),
            Content.styled(f"firing ({len(self.active)})", "bold"),
            *firing_lines(self.active),
            Content(""),
            Content.styled("resolved lately", "bold"),
        ]
        if self.journal_problem:
            lines.append(Content.styled(f"alerts' journal: {self.journal_problem}", "$warning"))
        lines += resolved_lines(self.journal, self.resolved)
        self.query_one("#alerts-list", Static).update(Content("\n").join(lines))
