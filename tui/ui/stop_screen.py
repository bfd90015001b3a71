"""How to stop a server: the operator's choice of drain, terminate or kill (as nvitop offers its
signals), with what each costs the requests in flight, and the drain's deadline.

A client that never reads ``/health`` (the seed's own script) keeps a SGLang drain going until
its deadline, and then the group's signal loses what is in flight: the deadline is the
operator's to set here (empty: the profile's ``[stop] drain_timeout_s``, else 60 s)."""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label

from tui.ops.types import StopMode
from tui.profiles.model import DRAIN_TIMEOUT_MAX_S
from tui.ui.dialog_keys import BUTTON_KEYS, KEYS_HINT_CSS, ButtonKeys, KeysHint, keys_hint
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

DEADLINE_RANGE = f"seconds in (0, {DRAIN_TIMEOUT_MAX_S:.0f}]"
"""What the deadline field takes, in the words of its error."""


@dataclass(frozen=True, slots=True)
class StopChoice:
    """How the operator chose to stop the servers."""

    mode: StopMode
    """drain, terminate or kill."""
    drain_s: float | None = None
    """The deadline typed (None: the profiles' ``[stop] drain_timeout_s``, else 60 s)."""


def parse_deadline(text: str) -> float | None:
    """The typed deadline in seconds (None when empty).

    Raises:
        ValueError: one line naming the field and the range.
    """
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"drain deadline {text!r}: must be {DEADLINE_RANGE}") from None
    if not 0 < value <= DRAIN_TIMEOUT_MAX_S:  # also NaN
        raise ValueError(f"drain deadline {text!r}: must be {DEADLINE_RANGE}")
    return value


class StopScreen(ModalScreen[StopChoice | None], ButtonKeys, ReadOnlyGate[StopChoice | None]):
    """Asks how to stop the named servers; dismisses with the choice, or None to cancel.

    Cancel is focused (a stray Enter stops nothing); each mode has its key, named under the
    buttons, and the arrows move among them. Tab reaches the drain's deadline; Enter there
    drains with it. A deadline that is not seconds in range is named in one line and nothing
    is stopped."""

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
    StopScreen #stop-deadline {
        height: auto;
        margin-top: 1;
    }
    StopScreen #stop-deadline Label {
        padding: 1 1 0 0;
    }
    StopScreen #stop-drain-s {
        width: 1fr;
    }
    StopScreen #stop-deadline-error {
        color: $error;
        display: none;
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
            with Horizontal(id="stop-deadline"):
                yield Label("drain deadline (s):")
                yield Input(
                    placeholder="the profile's [stop] drain_timeout_s, else 60",
                    id="stop-drain-s",
                    restrict=r"[0-9.]*",
                    max_length=12,
                )
            yield Label("", id="stop-deadline-error")
            with Horizontal():
                for mode, label, _ in CHOICES:
                    safe = mode == "drain"
                    yield Button(label, variant="primary" if safe else "error", id=f"stop-{mode}")
                yield Button("Cancel", id="stop-cancel")
            keys = [("d/y", "Drain"), ("t", "Terminate"), ("9", "Kill"), ("n/Esc", "Cancel")]
            keys.append(("Tab", "drain deadline"))
            yield keys_hint(keys, "Cancel")

    def on_mount(self) -> None:
        """Cancel has the focus: stopping a server is never what a stray Enter does."""
        self.query_one("#stop-cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """A button chooses its mode; Cancel chooses nothing."""
        pressed = (event.button.id or "").removeprefix("stop-")
        mode = next((m for m, _, _ in CHOICES if m == pressed), None)
        if mode is None:
            self.dismiss(None)
        else:
            self._choose(mode)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the deadline drains with it."""
        event.stop()
        self._choose("drain")

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """The key line names what Enter does: the focused button, or Drain in the field."""
        super().on_descendant_focus(event)
        if isinstance(event.widget, Input):
            for hint in self.query(KeysHint):
                hint.enter_presses("Drain")

    def action_choose(self, mode: str) -> None:
        """Stop this way."""
        self._choose(next(m for m, _, _ in CHOICES if m == mode))

    def _choose(self, mode: StopMode) -> None:
        """Dismiss with ``mode`` and the typed deadline, or name what is wrong with it."""
        error = self.query_one("#stop-deadline-error", Label)
        try:
            drain_s = parse_deadline(self.query_one("#stop-drain-s", Input).value)
        except ValueError as exc:
            error.update(str(exc))
            error.display = True
            return
        self.dismiss(StopChoice(mode, drain_s))

    def action_cancel(self) -> None:
        """Stop nothing."""
        self.dismiss(None)
