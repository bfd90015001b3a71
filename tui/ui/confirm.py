"""Yes/no before anything destructive, naming exactly what will be affected."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from tui.ui.gate import ReadOnlyGate


class ConfirmScreen(ModalScreen[bool], ReadOnlyGate[bool]):
    """Dismisses with True on confirm, False on cancel (Escape, n or the Cancel button).

    The question and what it affects wrap to the dialog's width (a cut question can name the
    wrong profile); the dialog scrolls when it is taller than the screen.
    """

    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
    }
    ConfirmScreen > VerticalScroll {
        width: 64;
        max-width: 100%;
        height: auto;
        max-height: 100%;
        border: thick $error;
        background: $surface;
        padding: 1 2;
    }
    ConfirmScreen #confirm-title {
        width: 100%;
        text-style: bold;
        color: $error;
    }
    ConfirmScreen #confirm-affected {
        width: 100%;
        margin: 1 0;
    }
    ConfirmScreen Horizontal {
        height: auto;
        align-horizontal: right;
    }
    ConfirmScreen Button {
        margin-left: 2;
    }
    """

    BINDINGS = [
        Binding("y", "confirm", "Yes", id="confirm.yes"),
        Binding("n,escape", "cancel", "No", id="confirm.no"),
    ]

    def __init__(self, title: str, affected: str, confirm_label: str = "Yes") -> None:
        """Args:
        title: What will be done, e.g. 'Kill the server on GPU 3?'.
        affected: What it touches, in plain words (ports, pids, the pipeline's in-flight work).
        confirm_label: Text of the confirm button.
        """
        super().__init__()
        self.title_text = title
        """The question."""
        self.affected = affected
        """What will be affected."""
        self.confirm_label = confirm_label
        """The confirm button's label."""

    def compose(self) -> ComposeResult:
        """The question, what it affects, and two buttons (Cancel focused: the safe default)."""
        with VerticalScroll():
            yield Label(self.title_text, id="confirm-title")
            yield Label(self.affected, id="confirm-affected")
            with Horizontal():
                yield Button(self.confirm_label, variant="error", id="confirm-yes")
                yield Button("Cancel", variant="primary", id="confirm-no")

    def on_mount(self) -> None:
        """Focus Cancel so a stray Enter does nothing destructive."""
        self.query_one("#confirm-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Dismiss with the button's answer."""
        self.dismiss(event.button.id == "confirm-yes")

    def action_confirm(self) -> None:
        """Yes."""
        self.dismiss(True)

    def action_cancel(self) -> None:
        """No."""
        self.dismiss(False)
