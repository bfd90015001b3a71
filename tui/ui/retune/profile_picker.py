"""A small picker: which profile to relaunch with (the running one preselected), or to try or
roll out (the first other one preselected: Enter never canaries the running profile). Its key
line, like every dialog's, names what Enter picks now (it follows the highlight)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from tui.ui.dialog_keys import KEYS_HINT_CSS, KeysHint, keys_hint


class ProfilePickerScreen(ModalScreen[str | None]):
    """Dismisses with the chosen profile name (Enter), or None (Escape)."""

    DEFAULT_CSS = (
        """
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
        + KEYS_HINT_CSS
    )

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="picker.cancel")]

    def __init__(
        self, title: str, names: list[str], current: str | None, other_first: bool = False
    ) -> None:
        """Args:
        title: What the choice is for, e.g. 'Relaunch GPU 3 with which profile?'.
        names: Saved profile names.
        current: The running profile (marked 'running'; highlighted unless ``other_first``).
        other_first: Highlight the first profile that is not the running one (a canary or a
            rollout of the running profile changes nothing: Enter on it ran one anyway).
        """
        super().__init__()
        self.title_text = title
        """The question."""
        self.names = sorted(set(names) | ({current} if current else set()))
        """Choices."""
        self.current = current
        """The running profile."""
        others = [n for n in self.names if n != current]
        self.preselected = others[0] if other_first and others else current
        """The profile highlighted when the picker opens."""

    def compose(self) -> ComposeResult:
        """The question and the list."""
        options = [
            Option(f"{name}  (running)" if name == self.current else name, id=name)
            for name in self.names
        ]
        with Vertical():
            yield Label(self.title_text)
            yield OptionList(*options, id="picker-list")
            # Enter picks, the arrows move the highlight (left/right do nothing in a list).
            yield keys_hint([("Esc", "Cancel")], self._pick(self.preselected), move="↑/↓")

    def on_mount(self) -> None:
        """Highlight the preselected profile (the running one, so Enter keeps it; for a canary
        or a rollout the first other one)."""
        options = self.query_one(OptionList)
        if self.preselected in self.names:
            options.highlighted = self.names.index(self.preselected)
        options.focus()

    @staticmethod
    def _pick(name: str | None) -> str:
        return f"Pick {name}" if name else "Pick"

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        """The key line says which profile Enter picks now."""
        self.query_one(KeysHint).enter_presses(self._pick(event.option.id))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Chosen."""
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        """Nothing chosen."""
        self.dismiss(None)
