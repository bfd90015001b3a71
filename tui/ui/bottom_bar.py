"""An input line docked above the footer, hidden until a key opens it (the ``:`` command bar and
the ``/`` filter bar share its look and its open/close)."""

from __future__ import annotations

from textual.widgets import Input


class BottomBar(Input):
    """One input line above the footer; hidden until ``show_with``."""

    DEFAULT_CSS = """
    BottomBar {
        dock: bottom;
        height: 1;
        border: none;
        padding: 0 1;
        background: $panel;
        display: none;
    }
    """

    def show_with(self, text: str) -> None:
        """Show the bar holding ``text``, the cursor at its end, focused."""
        self.value = text
        self.cursor_position = len(text)
        self.display = True
        self.focus()

    def hide(self) -> None:
        """Hide the bar and give the screen its keys back."""
        self.display = False
        if self.screen is not None:
            self.screen.set_focus(None)
