"""The ``:`` command bar: one input line above the footer, with completion (k9s habit).

``:`` opens it; Enter posts ``CommandEntered`` with the line (the main screen parses and
performs it, ``tui.ui.command_line``); Escape closes it. Tab or right arrow takes the greyed
completion (a command word, or a command with a profile name).
"""

from __future__ import annotations

from collections.abc import Sequence

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.suggester import SuggestFromList
from textual.widgets import Input

from tui.ui.bottom_bar import BottomBar
from tui.ui.command_line import suggestions


class CommandEntered(Message):
    """A command line was entered."""

    def __init__(self, line: str) -> None:
        self.line = line
        """What was typed."""
        super().__init__()


class CommandBar(BottomBar):
    """The command line; hidden until opened."""

    BINDINGS = [Binding("escape", "close", "Close", show=False, id="command.close")]

    def open(self, profiles: Sequence[str], text: str = "") -> None:
        """Show the bar with ``text`` and completions for these profiles, focused."""
        self.suggester = SuggestFromList(suggestions(profiles), case_sensitive=False)
        self.show_with(text)

    def action_close(self) -> None:
        """Hide the bar, leaving the grid its keys."""
        self.hide()
        self.value = ""

    def on_key(self, event: events.Key) -> None:
        """Tab takes the completion (as the right arrow does) instead of moving focus."""
        if event.key == "tab" and self._suggestion:
            event.stop()
            event.prevent_default()
            self.value = self._suggestion
            self.cursor_position = len(self.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Post the line up; the screen closes the bar once it was understood."""
        event.stop()
        self.post_message(CommandEntered(event.value))
