"""An input line docked above the footer, hidden until a key opens it (the ``:`` command bar and
the ``/`` filter bar share its look and its open/close).

It is a compact ``Input`` (no border, one row) in the screen's flow, not docked: a plain
``Input`` is three rows with a tall border, and squeezed to one row and docked at the bottom it
lay under the footer (docked widgets overlap), its top border the only row that showed, so the
operator typed blind. In the flow it takes the row above the footer, and the grid gives it up.
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Input


class BottomBar(Input):
    """One input line above the footer; hidden until ``show_with``."""

    DEFAULT_CSS = """
    BottomBar {
        height: 1;
        padding: 0 1;
        background: $panel;
        display: none;
        &.-textual-compact {
            padding: 0 1;
        }
    }
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("compact", True)
        super().__init__(*args, **kwargs)

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
