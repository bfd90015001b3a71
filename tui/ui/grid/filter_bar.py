"""The ``/`` filter bar: the grid keeps only the panels the typed words match, as they are typed.

Enter closes the bar and keeps the filter (the header names it); Escape clears it.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input

from tui.ui.bottom_bar import BottomBar


class FilterChanged(Message):
    """The grid's filter changed."""

    def __init__(self, text: str) -> None:
        self.text = text
        """The filter as typed ("" for none)."""
        super().__init__()


class FilterBar(BottomBar):
    """The filter line; hidden until opened."""

    BINDINGS = [
        Binding("enter", "submit", "Keep filter", id="filter.keep"),
        Binding("escape", "clear", "Clear filter", id="filter.clear"),
    ]
    """Shown in the footer while the bar has the focus."""

    def open(self, text: str) -> None:
        """Show the bar with the current filter, focused."""
        self.show_with(text)

    def on_input_changed(self, event: Input.Changed) -> None:
        """Filter as the words are typed."""
        event.stop()
        self.post_message(FilterChanged(event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Keep the filter, close the bar."""
        event.stop()
        self.hide()

    def action_clear(self) -> None:
        """Clear the filter, close the bar."""
        self.value = ""
        self.post_message(FilterChanged(""))
        self.hide()
