"""The console's Footer: Textual's, saying "read-only" in words when the screen's keys that
would change the fleet are off.

Why: read-only mode showed the disabled keys side by side under one label, and at 80 columns
the Footer began with ``pkKrRtTbco read-only``. The gate (``tui.ui.gate``) keeps those keys out
of the Footer (the help and the command palette still list them, each marked disabled, and a
press says why); this Footer puts one line of words first instead.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Label

from tui.ui.gate import refused_by_read_only

READ_ONLY_NOTE = "read-only: changes off"
"""What the Footer says first while the screen's changing keys are off (short: at 80 columns the
keys that work follow it; the help, ``?``, lists the others, each marked disabled)."""


class ReadOnlyNote(Label):
    """The note, in the look of the Footer's own labels (``FooterLabel``'s colours)."""

    DEFAULT_CSS = """
    ReadOnlyNote {
        color: $warning;
        background: $footer-description-background;
        text-style: bold;
        margin: 0 1;
    }
    """


class FleetFooter(Footer):
    """Textual's Footer, compact (one space less around each key: the grid's keys, the habits
    ``:`` ``/`` space ``a`` among them, fit 200 columns), with the read-only note first when it
    applies."""

    DEFAULT_CSS = """
    /* Compact, Textual gives every key a right margin, the palette's docked key too: the last
       column was left to the keys behind it, and at 80 columns the row ended '^p palettea'
       (the letter of a key cut under it). */
    FleetFooter.-compact FooterKey.-command-palette {
        margin-right: 0;
    }
    """

    def __init__(self) -> None:
        super().__init__(compact=True)
        self.keys_known = False
        """Whether the screen's bindings have been announced (before, the Footer shows none,
        and the note would stand alone)."""

    def bindings_changed(self, screen: Screen) -> None:
        """Textual's (the keys are composed again), once the bindings are known."""
        self.keys_known = True
        super().bindings_changed(screen)

    def compose(self) -> ComposeResult:
        """The note (in read-only mode, when a key of the screen is off), then the keys."""
        if self.keys_known and any(
            refused_by_read_only(entry) for entry in self.screen.active_bindings.values()
        ):
            yield ReadOnlyNote(READ_ONLY_NOTE)
        yield from super().compose()
