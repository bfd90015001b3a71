"""The ``:`` command bar: one input line above the footer, with completion (k9s habit).

``:`` opens it at once (what is typed right after ``:`` lands in it, never on the grid's keys);
the completions follow when the backend's profile names are read. Enter posts ``CommandEntered``
with the line (the main screen parses and performs it, ``tui.ui.command_line``); Escape closes
it. Tab or right arrow takes the greyed completion (a command word, or a command with a profile
name); Tab without one stays in the bar (it never moves the focus away from what is typed).
"""

from __future__ import annotations

from collections.abc import Sequence

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

    BINDINGS = [
        Binding("enter", "submit", "Run", id="command.run"),
        Binding("tab", "complete", "Complete", id="command.complete"),
        Binding("escape", "close", "Close", id="command.close"),
    ]
    """Shown in the footer while the bar has the focus (what the keys do there)."""

    def open(self, text: str = "") -> None:
        """Show the bar with ``text``, focused (completions of the commands' words only, until
        ``complete_with`` gives the profile names)."""
        self.suggester = SuggestFromList(suggestions(()), case_sensitive=False)
        self.show_with(text)

    def complete_with(self, profiles: Sequence[str]) -> None:
        """Complete the commands with these profile names too (what is typed is kept)."""
        self.suggester = SuggestFromList(suggestions(profiles), case_sensitive=False)

    def action_close(self) -> None:
        """Hide the bar, leaving the grid its keys."""
        self.hide()
        self.value = ""

    def action_complete(self) -> None:
        """Take the completion, as the right arrow does at the end of the line (Input's own
        action: the completion shown is the one taken); without one only the cursor moves to
        the end. Not Tab's move of the focus off the bar, which sent the next keys to the
        grid."""
        self.cursor_position = len(self.value)
        self.action_cursor_right()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Post the line up; the screen closes the bar once it was understood."""
        event.stop()
        self.post_message(CommandEntered(event.value))
