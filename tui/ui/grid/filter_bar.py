"""The ``/`` filter bar: the grid keeps only the panels the typed words match, as they are typed.

Enter closes the bar and keeps the filter (the header names it); Escape clears it.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input


class FilterChanged(Message):
    """The grid's filter changed."""

    def __init__(self, text: str) -> None:
        self.text = text
        """The filter as typed ("" for none)."""
        super().__init__()


class FilterBar(Input):
    """The filter line; hidden until opened."""

    DEFAULT_CSS = """
    FilterBar {
        dock: bottom;
        height: 1;
        border: none;
        padding: 0 1;
        background: $panel;
        display: none;
    }
    """

    BINDINGS = [Binding("escape", "clear", "Clear", show=False, id="filter.clear")]

    def open(self, text: str) -> None:
        """Show the bar with the current filter, focused."""
        self.value = text
        self.cursor_position = len(text)
        self.display = True
        self.focus()

    def _close(self) -> None:
        self.display = False
        if self.screen is not None:
            self.screen.set_focus(None)

    def on_input_changed(self, event: Input.Changed) -> None:
        """Filter as the words are typed."""
        event.stop()
        self.post_message(FilterChanged(event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Keep the filter, close the bar."""
        event.stop()
        self._close()

    def action_clear(self) -> None:
        """Clear the filter, close the bar."""
        self.value = ""
        self.post_message(FilterChanged(""))
        self._close()
