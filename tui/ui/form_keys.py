"""A form's keys take effect in the order they were typed, at any typing speed.

Textual runs a widget's key bindings (an Input's backspace, ctrl+u, home, ...) and the App's
Tab once the key has bubbled up from the focused Input to the App, a message queue at a time,
while the App goes on handing the next keys to the widget focused *then*. Typed at key-repeat
speed (35 ms a key) or delivered by a terminal in one burst, the keys after a Tab reached the
field it was leaving (``0.6`` became ``.6`` in the next field; ``Tab 0.93 Tab 200`` gave one
field ``0.880.93200``), and a ctrl+u typed before a value cleared it after the value had been
typed. Two parts, each keeping one order:

- **Tab and shift+tab** are priority bindings of the form (``FIELD_KEYS``): the App runs them
  before it forwards the next key, so each key goes to the field focused when it was typed;
- **a field's editing keys** run in the field itself (``FieldInput``), in its own queue, in
  order with the characters typed around them, instead of bubbling up to the App.
"""

from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Input

FIELD_KEYS = [
    Binding("tab", "next_field", "Next field", id="form.next", show=False, priority=True),
    Binding(
        "shift+tab",
        "previous_field",
        "Previous field",
        id="form.previous",
        show=False,
        priority=True,
    ),
]
"""A form's field keys (they change nothing: ``tui.ui.readonly`` lists them as views). A form
whose fields do not exist yet disables them in its ``check_action``: the key then reaches the
screen (a type-ahead keeps it for when they do)."""


class FieldKeys:
    """The actions of ``FIELD_KEYS`` (a form screen lists the bindings and inherits these)."""

    def action_next_field(self) -> None:
        """Focus the next field."""
        assert isinstance(self, Screen), "FieldKeys is a mixin of a form screen"
        self.focus_next()

    def action_previous_field(self) -> None:
        """Focus the previous field."""
        assert isinstance(self, Screen), "FieldKeys is a mixin of a form screen"
        self.focus_previous()


EDITING = frozenset(
    {
        "cursor_left",
        "cursor_right",
        "cursor_left_word",
        "cursor_right_word",
        "delete_left",
        "delete_right",
        "delete_left_all",
        "delete_right_all",
        "delete_left_word",
        "delete_right_word",
        "home",
        "end",
        "select_all",
    }
)
"""Input's actions that edit or move in its text (its other keys, Enter among them, bubble
up as Textual routes them)."""


def _editing_keys() -> dict[str, str]:
    """Key -> action of Input's own bindings whose action edits or moves (``home(True)``
    included: shift+home selects to the start)."""
    keys: dict[str, str] = {}
    for binding in Input.BINDINGS:
        if not isinstance(binding, Binding) or binding.action.split("(")[0] not in EDITING:
            continue
        for key in binding.key.split(","):
            keys.setdefault(key.strip(), binding.action)
    return keys


class FieldInput(Input):
    """An Input whose editing keys run where the characters do, in the order typed (see
    module): a key Input binds to an edit runs its action here and goes no further."""

    EDIT_KEYS = _editing_keys()
    """Key -> action, from Input's own bindings."""

    async def on_key(self, event: events.Key) -> None:
        """Run an editing key's action now, in this field's queue."""
        action = self.EDIT_KEYS.get(event.key)
        if action is None or event.is_printable:
            return
        event.stop()
        event.prevent_default()
        await self.run_action(action)
