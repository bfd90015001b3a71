"""The status strip: the operation running in the background, in one line above the footer.

It shows the app's current operation (``FleetApp.operation``, a report screen, see
``tui.ui.background``): which GPUs, the phase, the elapsed time and the verdict so far, and
stays after the end until the report is closed. Without one, it shows the autotune search
(``tui.ui.autotune.strip_line``), whether this console started it or the CLI did: the search
runs detached, so the strip reads its status through the port (in a thread, every
``AUTOTUNE_READ_S``, while there is a document: its absence is one ``stat`` on the loop, no
thread hop), where the port follows a search (``Capabilities.follows_autotune``: not on many
nodes, where a search runs on one node).
Hidden when there is neither. While it shows something it reads the report every ``TICK_S``
so its timer ticks between events; hidden, that tick is paused (``OperationHost`` wakes the strip
when an operation starts).
"""

from __future__ import annotations

import asyncio
from typing import Any

from textual.content import Content
from textual.timer import Timer
from textual.widgets import Static

from tui.autotune_view import status_file
from tui.ops.port import Fleet, FleetReads
from tui.ops.types import StateFileError
from tui.ui.autotune.strip_line import autotune_line
from tui.ui.background import TICK_S, OperationReport
from tui.ui.host import host_of

AUTOTUNE_READ_S = 2.0
"""How often the autotune search's status document is read."""


class OperationStrip(Static):
    """One line: the background operation, or the autotune search, or nothing (hidden)."""

    DEFAULT_CSS = """
    OperationStrip {
        height: 1;
        padding: 0 1;
        background: $panel;
        display: none;
    }
    """

    _ticks: Timer | None = None
    """The once-a-``TICK_S`` look at the operation (paused while the strip is hidden)."""

    def __init__(self, port: Fleet, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.port = port
        """The console's port (the search's status is read through it)."""
        self.autotune: Content | None = None
        """The autotune search's line as last read (None: none to show)."""

    def on_mount(self) -> None:
        """Look at the operation once a tick, and at the autotune search's status."""
        # Paused while hidden: most consoles run no operation most of the time, and each tick
        # of an interval costs Textual a task step, a sleep and a signature look-up.
        self._ticks = self.set_interval(TICK_S, self.refresh_line, pause=True)
        self.set_interval(AUTOTUNE_READ_S, self.read_autotune)
        self.call_later(self.read_autotune)

    async def read_autotune(self) -> None:
        """Read the autotune search's status document (in a thread) and redraw.

        Why the look first: most consoles never see a search, and the thread hop every two
        seconds (an executor job, two futures, a wake-up of the loop) cost more than the
        strip's whole line; a missing document is a ``stat`` of a small directory, and then
        there is nothing to show.
        """
        if not self.port.capabilities().follows_autotune or not status_file().exists():
            line = None
        else:
            line = await asyncio.to_thread(_autotune_now, self.port.reads)
        changed = line != self.autotune
        self.autotune = line
        if changed:
            self.refresh_line()

    def refresh_line(self) -> None:
        """Show the operation's line, else the search's (hide the strip when neither)."""
        host = host_of(self)
        report = host.operation if host is not None else None
        if isinstance(report, OperationReport):
            line: Content | None = report.strip_line()
        else:
            line = self.autotune
        if line is None:
            self.display = False
            if self._ticks is not None:
                self._ticks.pause()
            return
        self.display = True
        if self._ticks is not None:
            self._ticks.resume()
        if not isinstance(self.content, Content) or line.plain != self.content.plain:
            self.update(line)


def _autotune_now(reads: FleetReads) -> Content | None:
    """The search's line from its status now (blocking; a damaged document reads as none: the
    autotune screen names the damage)."""
    try:
        read = reads.autotune_status()
    except StateFileError:
        return None
    return None if read is None else autotune_line(read.doc, read.alive)
