"""The app's slot for the one operation that runs in the background (``tui.ui.background``):
its report screen installed, shown, hidden, reopened (``w``) and forgotten, and a second
operation refused while one runs."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen

from tui.ui.background import OPERATION_SCREEN, OperationReport
from tui.ui.host import ConsoleHost
from tui.ui.operation_strip import OperationStrip


class OperationHost(ConsoleHost):
    """An app holding at most one background operation's report (``operation``)."""

    _operations = 0
    """Operations started (names each report's install)."""

    async def start_operation(self, screen: Screen[Any]) -> bool:
        """Run an operation's report screen in the background and show it.

        A second operation while one runs is refused with a notification naming the first
        (one at a time, never queued); a finished one's report is closed first.

        Returns:
            Whether it started.
        """
        if self.refuse_if_busy():
            return False
        current = self.operation
        if current is not None:
            await self.forget_operation(current)
        self.operation = screen
        # One name per operation: a finished report still under another screen (forgotten
        # later) must not block the next one's install.
        self._operations += 1
        self.install_screen(screen, f"{OPERATION_SCREEN}-{self._operations}")
        await self.push_screen(screen)
        default = self.get_default_screen()
        default.refresh_bindings()
        for strip in default.query(OperationStrip):
            strip.refresh_line()  # shown, and ticking, from now (hidden, its tick is paused)
        return True

    def refuse_if_busy(self) -> bool:
        """Whether an operation runs in the background; if so, say which (a notification).

        Returns:
            True when a new operation must be refused.
        """
        current = self.operation
        if not isinstance(current, OperationReport) or current.finished:
            return False
        what = current.strip_line().plain.split(" · ")[0]
        self.notify(
            f"{what} is running: one operation at a time (w opens its report)",
            title="Busy",
            severity="warning",
        )
        return True

    async def forget_operation(self, screen: Screen[Any]) -> None:
        """Close an ended operation's report for good (the strip forgets it); idempotent."""
        if self.operation is screen:
            self.operation = None
        if not self.is_screen_installed(screen):
            return
        if screen in self.screen_stack:
            if self.screen is not screen:
                return  # under another screen: forgotten when the next operation starts
            await self.pop_screen()
        self.uninstall_screen(screen)
        await screen.remove()
        self.get_default_screen().refresh_bindings()

    def show_operation(self) -> None:
        """Open the background operation's report again (``w``)."""
        screen = self.operation
        if screen is None:
            self.notify("No operation is running.", timeout=3)
        elif screen not in self.screen_stack:
            self.push_screen(screen)
