"""How to stop a server: the operator's choice of drain, terminate or kill (as nvitop offers its
signals), with what each costs the requests in flight."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from tui.control.stop import StopMode
from tui.ui.dialog_keys import BUTTON_KEYS, KEYS_HINT_CSS, ButtonKeys, keys_hint
from tui.ui.gate import ReadOnlyGate

CHOICES: tuple[tuple[StopMode, str, str], ...] = (
    (
        "drain",
        "Drain",
        "drain (d): the pipeline stops sending, SIGTERM to the main pid, every in-flight "
        "request finishes; the group is signalled only after the deadline",
    ),
    (
        "terminate",
        "Terminate",
        "terminate (t): SIGTERM to the whole process group at once; SGLang's children die "
        "and the requests in flight are lost",
    ),
    ("kill", "Kill", "kill (9): SIGKILL to the process group; nothing is cleaned up"),
)
"""Each mode, its button, and what it does."""


class StopScreen(ModalScreen[StopMode | None], ButtonKeys, ReadOnlyGate[StopMode | None]):
    """Asks how to stop the named servers; dismisses with the mode, or None to cancel.

    Cancel is focused (a stray Enter stops nothing); each mode has its key, named under the
    buttons, and the arrows move among them."""

    DEFAULT_CSS = (
        """
    StopScreen {
        align: center middle;
    }
    StopScreen > Vertical {
        width: 76;
        max-width: 100%;
        height: auto;
        border: thick $error;
        background: $surface;
        padding: 1 2;
    }
    StopScreen #stop-title {
        text-style: bold;
        color: $error;
    }
    StopScreen .stop-line {
        width: 100%;
    }
    StopScreen #stop-affected {
        margin: 1 0;
        width: 100%;
    }
    StopScreen Horizontal {
        height: auto;
        margin-top: 1;
    }
    StopScreen Button {
        margin-right: 1;
    }
    """
        + KEYS_HINT_CSS
    )

    BINDINGS = [
        Binding("d,y", "choose('drain')", "Drain", id="stop.drain"),
        Binding("t", "choose('terminate')", "Terminate", id="stop.terminate"),
        Binding("9", "choose('kill')", "Kill", id="stop.kill"),
        Binding("n,escape", "cancel", "Cancel", id="stop.cancel"),
        *BUTTON_KEYS,
    ]

    def __init__(self, title: str, affected: str) -> None:
        """Args:
        title: What will be stopped, e.g. 'Stop the server on GPU 3?'.
        affected: What it touches, in plain words (ports, pids, requests in flight).
        """
        super().__init__()
        self.title_text = title
        self.affected = affected

    def compose(self) -> ComposeResult:
        """Title, what is affected, what each mode does, the buttons."""
        with Vertical():
            yield Label(self.title_text, id="stop-title")
            yield Label(self.affected, id="stop-affected")
            for _, _, text in CHOICES:
                yield Label(text, classes="stop-line")
            with Horizontal():
                for mode, label, _ in CHOICES:
                    safe = mode == "drain"
                    yield Button(label, variant="primary" if safe else "error", id=f"stop-{mode}")
                yield Button("Cancel", id="stop-cancel")
            keys = [("d/y", "Drain"), ("t", "Terminate"), ("9", "Kill"), ("n/Esc", "Cancel")]
            yield keys_hint(keys, "Cancel")

    def on_mount(self) -> None:
        """Cancel has the focus: stopping a server is never what a stray Enter does."""
        self.query_one("#stop-cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """A button chooses its mode; Cancel chooses nothing."""
        pressed = (event.button.id or "").removeprefix("stop-")
        self.dismiss(next((m for m, _, _ in CHOICES if m == pressed), None))

    def action_choose(self, mode: str) -> None:
        """Stop this way."""
        self.dismiss(next(m for m, _, _ in CHOICES if m == mode))

    def action_cancel(self) -> None:
        """Stop nothing."""
        self.dismiss(None)
