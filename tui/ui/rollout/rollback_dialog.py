"""The rollback's confirm: one GPU at a time (the default, as a rollout goes) or, only when the
operator chooses it, every GPU back together."""

from __future__ import annotations

from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Button

from tui.ui.confirm import ConfirmScreen

ONE_AT_A_TIME = "One GPU at a time"
"""The confirm button: the walk back, each GPU verified before the next."""
ALL_AT_ONCE = "All at once"
"""The second button: every GPU of the scope stopped and relaunched together."""
KEYS = (("a", "All at once (every server down together)"),)
"""The second way to confirm, named in the dialog's key line (with y and n)."""


class RollbackScreen(ConfirmScreen):
    """A ``ConfirmScreen`` with a second way to confirm: True with ``all_at_once`` set when the
    operator chose every GPU together, True alone for one GPU at a time, False to cancel."""

    BINDINGS = [Binding("a", "all_at_once", ALL_AT_ONCE, id="rollback.all_at_once")]

    def __init__(self, title: str, affected: str) -> None:
        """Args:
        title: The question, naming the GPUs and the profile they return to.
        affected: What each GPU returns to, and the scope.
        """
        super().__init__(title, affected, ONE_AT_A_TIME, extra_keys=KEYS)
        self.all_at_once = False
        """The operator chose every GPU together."""

    def on_mount(self) -> None:
        """The second button, beside the first (the confirm's own ``on_mount`` runs after
        this one: Cancel keeps the focus)."""
        confirm = self.query_one("#confirm-yes", Button)
        if isinstance(confirm.parent, Widget):
            confirm.parent.mount(
                Button(ALL_AT_ONCE, variant="error", id="rollback-all"), after=confirm
            )

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """All at once; the confirm's own buttons go on to its handler (Textual calls the
        handler of every class of the screen, unless one prevents the default)."""
        if event.button.id == "rollback-all":
            event.prevent_default()
            self.action_all_at_once()

    def action_all_at_once(self) -> None:
        """Every GPU back together."""
        self.all_at_once = True
        self.dismiss(True)
