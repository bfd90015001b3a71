"""The keys every dialog shares: left and right move among its buttons, and one line under the
buttons says which key does what and what Enter presses now.

Why: the dialogs opened with Cancel focused, the arrows did nothing and no key was named, so an
operator's Enter silently cancelled two canaries. Now a dialog that starts something harmless
(a canary, a save) focuses that button, one that stops or restarts servers keeps Cancel focused
and names the key that confirms, and the arrows move as they do in any dialog.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def keys_hint(choices: Sequence[tuple[str, str]], focused: str) -> Label:
    """The dialog's key line: ``Enter: Cancel (focused) · y: Roll back · n/Esc: Cancel · ←/→``.

    Args:
        choices: (keys, what they do) in the order the dialog shows its buttons.
        focused: The label of the button focused when the dialog opens (what Enter presses).

    Returns:
        The line, wrapping to the dialog's width.
    """
    parts = [f"[b]Enter[/b]: {focused}", *(f"[b]{keys}[/b]: {what}" for keys, what in choices)]
    parts.append("[b]←/→[/b]: move")
    return Label(" · ".join(parts), classes="dialog-keys")


class ButtonKeys:
    """Mixed into a dialog screen (with ``BUTTON_KEYS`` in its BINDINGS): the arrows move the
    focus among its enabled buttons, stopping at either end."""

    def action_move_button(self, step: int) -> None:
        """Focus the previous (-1) or next (1) enabled button."""
        assert isinstance(self, Screen)
        buttons = [b for b in self.query(Button) if not b.disabled and b.display]
        if not buttons:
            return
        focused = self.focused
        index = buttons.index(focused) if focused in buttons else 0
        buttons[max(0, min(len(buttons) - 1, index + step))].focus()
