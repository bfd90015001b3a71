"""An input line docked above the footer, hidden until a key opens it (the ``:`` command bar and
the ``/`` filter bar share its look and its open/close).

It is a compact ``Input`` (no border, one row) in the screen's flow, not docked: a plain
``Input`` is three rows with a tall border, and squeezed to one row and docked at the bottom it
lay under the footer (docked widgets overlap), its top border the only row that showed, so the
operator typed blind. In the flow it takes the row above the footer, and the grid gives it up.
"""

from __future__ import annotations

from typing import Any

from textual import events
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

    def take(self, event: events.Key) -> bool:
        """Type ``event`` into the bar when it is open but not focused yet: a terminal delivers
        '/ready' in one read, and the keys after '/' reached the grid before the focus moved
        (the 'a' of 'ready' opened the autotune screen). Returns whether it took the key."""
        if not self.display or self.has_focus or not event.is_printable or not event.character:
            return False
        event.stop()
        event.prevent_default()
        self.insert_text_at_cursor(event.character)
        if self.screen is not None:
            self.screen.set_focus(self)
        return True

    def hide(self) -> None:
        """Hide the bar and give the screen its keys back."""
        self.display = False
        if self.screen is not None:
            self.screen.set_focus(None)
