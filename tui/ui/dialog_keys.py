"""The keys every dialog shares: left and right move among its buttons, and one line under the
buttons says which key does what and what Enter presses now.

Why: the dialogs opened with Cancel focused, the arrows did nothing and no key was named, so an
operator's Enter silently cancelled two canaries. Now a dialog that starts something harmless
(a canary, a save) focuses that button, one that stops or restarts servers keeps Cancel focused
and names the key that confirms, and the arrows move as they do in any dialog.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual import events
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Button, Label

BUTTON_KEYS = [
    Binding("left", "move_button(-1)", "Previous button", id="dialog.left", show=False),
    Binding("right", "move_button(1)", "Next button", id="dialog.right", show=False),
]
"""The arrows of every dialog (they change nothing: ``tui.ui.readonly`` lists them as views)."""

KEYS_HINT_CSS = """
    .dialog-keys {
        width: 100%;
        margin-top: 1;
        color: $text-muted;
    }
"""
"""The look of the key line (a dialog puts it in its DEFAULT_CSS)."""


class KeysHint(Label):
    """The dialog's key line: ``Enter: Cancel · y: Roll back · n/Esc: Cancel · ←/→: move``.

    Its ``Enter`` part names the focused button and follows the focus (``ButtonKeys``): a line
    written once at compose still said ``Enter: Cancel`` after the arrows had moved to ``Roll
    out``, and Enter then started the rollout.
    """

    def __init__(self, choices: Sequence[tuple[str, str]], focused: str, move: str = "←/→") -> None:
        """Args:
        choices: (keys, what they do) in the order the dialog shows its buttons.
        focused: The label of the button focused when the dialog opens (what Enter presses).
        move: The keys that move what Enter presses (``↑/↓`` in a list).
        """
        self.choices = tuple(choices)
        """The keys named after ``Enter``."""
        self.move = move
        """The keys that move, named last."""
        super().__init__(self._text(focused), classes="dialog-keys")

    def _text(self, focused: str) -> str:
        parts = [
            f"[b]Enter[/b]: {focused}",
            *(f"[b]{keys}[/b]: {what}" for keys, what in self.choices),
        ]
        parts.append(f"[b]{self.move}[/b]: move")
        return " · ".join(parts)

    def enter_presses(self, label: str) -> None:
        """Say that Enter presses the button labelled ``label`` now."""
        self.update(self._text(label))


def keys_hint(choices: Sequence[tuple[str, str]], focused: str, move: str = "←/→") -> KeysHint:
    """The dialog's key line (``KeysHint``), wrapping to the dialog's width.

    Args:
        choices: (keys, what they do) in the order the dialog shows its buttons.
        focused: The label of the button focused when the dialog opens (what Enter presses).
        move: The keys that move what Enter presses.
    """
    return KeysHint(choices, focused, move)


class ButtonKeys:
    """Mixed into a dialog screen (with ``BUTTON_KEYS`` in its BINDINGS): the arrows move the
    focus among its enabled buttons, stopping at either end, and the key line's ``Enter`` part
    follows the focus."""

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """A button took the focus: Enter presses it now, and the key line says so."""
        assert isinstance(self, Screen)
        if isinstance(event.widget, Button):
            for hint in self.query(KeysHint):
                hint.enter_presses(str(event.widget.label))

    def action_move_button(self, step: int) -> None:
        """Focus the previous (-1) or next (1) enabled button."""
        assert isinstance(self, Screen)
        buttons = [b for b in self.query(Button) if not b.disabled and b.display]
        if not buttons:
            return
        focused = self.focused
        index = buttons.index(focused) if focused in buttons else 0
        buttons[max(0, min(len(buttons) - 1, index + step))].focus()
