"""A small picker: which profile to relaunch with (the running one preselected)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option


class ProfilePickerScreen(ModalScreen[str | None]):
    """Dismisses with the chosen profile name (Enter), or None (Escape)."""

    DEFAULT_CSS = """
    ProfilePickerScreen {
        align: center middle;
    }
    ProfilePickerScreen > Vertical {
        width: 60;
        max-width: 100%;
        height: auto;
        border: thick $primary;
        background: $surface;
        padding: 1 2;
    }
    ProfilePickerScreen OptionList {
        height: auto;
        max-height: 12;
        margin-top: 1;
    }
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="picker.cancel")]

    def __init__(self, title: str, names: list[str], current: str | None) -> None:
        """Args:
        title: What the choice is for, e.g. 'Relaunch GPU 3 with which profile?'.
        names: Saved profile names.
        current: The running profile (highlighted, marked 'running').
        """
        super().__init__()
        self.title_text = title
        """The question."""
        self.names = sorted(set(names) | ({current} if current else set()))
        """Choices."""
        self.current = current
        """The running profile."""

    def compose(self) -> ComposeResult:
        """The question and the list."""
        options = [
            Option(f"{name}  (running)" if name == self.current else name, id=name)
            for name in self.names
        ]
        with Vertical():
            yield Label(self.title_text)
            yield OptionList(*options, id="picker-list")

    def on_mount(self) -> None:
        """Highlight the running profile, so Enter keeps it."""
        options = self.query_one(OptionList)
        if self.current in self.names:
            options.highlighted = self.names.index(self.current)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Chosen."""
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        """Nothing chosen."""
        self.dismiss(None)
