"""Yes/no before an operation, naming exactly what will be affected.

A destructive question (stop, relaunch, roll back, roll out: servers restart) opens with Cancel
focused, so a stray Enter does nothing, and its key line names the key that confirms (``y``).
A harmless one (a canary, which rolls a worse candidate back; a save) opens with its own button
focused: Enter starts it. Either way ``y`` confirms, ``n`` and Escape cancel, the arrows move.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from tui.ui.dialog_keys import BUTTON_KEYS, KEYS_HINT_CSS, ButtonKeys, keys_hint
from tui.ui.gate import ReadOnlyGate


class ConfirmScreen(ModalScreen[bool], ButtonKeys, ReadOnlyGate[bool]):
    """Dismisses with True on confirm, False on cancel (Escape, n or the Cancel button).

    The question and what it affects wrap to the dialog's width (a cut question can name the
    wrong profile); the dialog scrolls when it is taller than the screen.
    """

    DEFAULT_CSS = (
        """
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
    ConfirmScreen.-harmless > VerticalScroll {
        border: thick $primary;
    }
    ConfirmScreen.-harmless #confirm-title {
        color: $text;
    }
    """
        + KEYS_HINT_CSS
    )

    BINDINGS = [
        Binding("y", "confirm", "Yes", id="confirm.yes"),
        Binding("n,escape", "cancel", "No", id="confirm.no"),
        *BUTTON_KEYS,
    ]

    def __init__(
        self,
        title: str,
        affected: str,
        confirm_label: str = "Yes",
        *,
        destructive: bool = True,
        extra_keys: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Args:
        title: What will be done, e.g. 'Kill the server on GPU 3?'.
        affected: What it touches, in plain words (ports, pids, the pipeline's in-flight work).
        confirm_label: Text of the confirm button.
        destructive: It stops or restarts servers (or the job): Cancel is focused. False for a
            harmless start (a canary, a save): the confirm button is, and Enter presses it.
        extra_keys: A subclass's other ways to answer, (keys, what), named in the key line.
        """
        super().__init__(classes="" if destructive else "-harmless")
        self.title_text = title
        """The question."""
        self.affected = affected
        """What will be affected."""
        self.confirm_label = confirm_label
        """The confirm button's label."""
        self.destructive = destructive
        """Whether Cancel is the focused (safe) default."""
        self.extra_keys = tuple(extra_keys)
        """A subclass's other answers, named in the key line."""

    def compose(self) -> ComposeResult:
        """The question, what it affects, two buttons, and the line naming the keys."""
        with VerticalScroll():
            yield Label(self.title_text, id="confirm-title")
            yield Label(self.affected, id="confirm-affected")
            with Horizontal():
                yield Button(
                    self.confirm_label,
                    variant="error" if self.destructive else "success",
                    id="confirm-yes",
                )
                yield Button("Cancel", variant="primary", id="confirm-no")
            focused = "Cancel" if self.destructive else self.confirm_label
            keys = [("y", self.confirm_label), *self.extra_keys, ("n/Esc", "Cancel")]
            yield keys_hint(keys, focused)

    def on_mount(self) -> None:
        """Focus Cancel on a destructive question (a stray Enter does nothing), else the
        confirm button (Enter starts it)."""
        self.query_one("#confirm-no" if self.destructive else "#confirm-yes", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Dismiss with the button's answer."""
        self.dismiss(event.button.id == "confirm-yes")

    def action_confirm(self) -> None:
        """Yes."""
        self.dismiss(True)

    def action_cancel(self) -> None:
        """No."""
        self.dismiss(False)
