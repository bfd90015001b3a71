"""Type-ahead for a screen that opens before its inputs exist: no key typed into it is lost.

A screen pushed at once (its data still loading in a thread) has nothing focused, so the app
hands each key to the screen itself, where it would be dropped. The screen gives such keys to
``TypeAhead.hold``, which keeps them (all but Escape, which must still close the screen at once);
once the inputs exist and one has focus, ``release`` plays them, in order, as if they were typed
then: a printable one lands in the focused input, Backspace or Tab run their binding.

They are played one after the other, each finished before the next: posted back to the app as
key events they would race (Textual routes a printable key straight to the input, but Backspace
through the bindings after it bubbled up: ``a``, Backspace, ``b`` posted at once gives ``ab``).

A printable key the app handed to the screen while nothing had focus, but that the screen only
processes after an input got focus, is typed into that input (an input handles every printable
key itself, so such a key cannot be one that bubbled up from it).
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, TextArea

PASS_THROUGH = frozenset({"escape"})
"""Keys never held: Escape closes the screen even while it loads."""


def type_into(widget: Widget | None, text: str) -> bool:
    """Type ``text`` into ``widget`` at its cursor (over its selection), as keystrokes would.

    Args:
        widget: The focused widget, if any.
        text: The characters.

    Returns:
        True when the widget takes text (an Input or an editable TextArea), False otherwise.
    """
    if isinstance(widget, Input):
        selection = widget.selection
        if selection.is_empty:
            widget.insert_text_at_cursor(text)
        else:
            widget.replace(text, *selection)
        return True
    if isinstance(widget, TextArea) and not widget.read_only:
        widget.replace(text, *widget.selection)
        return True
    return False


class TypeAhead:
    """The keys typed into a screen before its inputs could take them."""

    def __init__(self) -> None:
        self.ready = False
        """Whether the screen's inputs exist and one has focus."""
        self.held: list[tuple[str, str | None]] = []
        """(key, character) of each key kept while not ready, oldest first."""

    def hold(self, event: events.Key, focused: Widget | None) -> bool:
        """Take a key that reached the screen itself (not one an input handled).

        Args:
            event: The key.
            focused: The screen's focused widget now.

        Returns:
            True when the key was kept or typed (the caller stops it), False to let it go on to
            the bindings.
        """
        if event.key in PASS_THROUGH:
            return False
        if not self.ready:
            self.held.append((event.key, event.character))
            return True
        return event.is_printable and type_into(focused, event.character or "")

    async def release(self, screen: Screen[Any]) -> int:
        """The screen is ready (an input has focus): play the held keys, in order.

        Args:
            screen: The screen; each key goes to what has focus when its turn comes.

        Returns:
            How many keys were played.
        """
        self.ready = True
        held, self.held = self.held, []
        for key, character in held:
            printable = character is not None and character.isprintable()
            if printable and type_into(screen.focused, character or ""):
                continue
            active = screen.active_bindings.get(key)
            if active is not None and active.enabled:
                await screen.app.run_action(active.binding.action, active.node)
        return len(held)
