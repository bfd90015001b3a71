"""Quitting the console: stop the fleet, keep it running (the default), or stay."""

from __future__ import annotations

from enum import StrEnum

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from tui.ui.dialog_keys import BUTTON_KEYS, KEYS_HINT_CSS, ButtonKeys, keys_hint
from tui.ui.gate import ReadOnlyGate


class QuitChoice(StrEnum):
    """The answers the quit screen can give."""

    STOP_FLEET = "stop"
    """Stop every server, then quit."""
    KEEP_FLEET = "keep"
    """Quit the console only; the fleet and the pipeline keep running."""
    CANCEL = "cancel"
    """Do not quit."""


class QuitScreen(ModalScreen[QuitChoice], ButtonKeys, ReadOnlyGate[QuitChoice]):
    """Asks what should happen to the fleet when the console closes."""

    DEFAULT_CSS = (
        """
    QuitScreen {
        align: center middle;
    }
    QuitScreen > Vertical {
        width: 70;
        max-width: 100%;
        height: auto;
        border: thick $primary;
        background: $surface;
        padding: 1 2;
    }
    QuitScreen Horizontal {
        height: auto;
        margin-top: 1;
    }
    QuitScreen Button {
        margin-right: 1;
    }
    QuitScreen #quit-readonly, QuitScreen #quit-text {
        width: 100%;
    }
    """
        + KEYS_HINT_CSS
    )

    BINDINGS = [
        Binding("s", "choose('stop')", "Stop fleet and quit", id="quit.stop"),
        Binding("k", "choose('keep')", "Keep fleet, quit", id="quit.keep"),
        Binding("escape,c", "choose('cancel')", "Cancel", id="quit.cancel"),
        *BUTTON_KEYS,
    ]

    def __init__(
        self,
        can_stop_fleet: bool,
        server_count: int,
        *,
        readonly: bool = False,
        stops_pipeline: bool = False,
    ) -> None:
        """Args:
        can_stop_fleet: Whether the backend can stop the fleet (else that choice is disabled).
        server_count: How many servers would be stopped, for the question.
        readonly: The console only watches: say that quitting leaves the fleet as it is.
        stops_pipeline: Stopping the fleet stops the pipeline too (the console started it):
            say so, not that it waits.
        """
        super().__init__()
        self.can_stop_fleet = can_stop_fleet
        """Whether 'stop the fleet' is offered."""
        self.server_count = server_count
        """Servers that stopping would affect."""
        self.readonly = readonly
        """Whether the console is read-only (stopping the fleet is not offered)."""
        self.stops_pipeline = stops_pipeline
        """Whether stopping the fleet stops the pipeline too."""

    def compose(self) -> ComposeResult:
        """The question and the three choices; Keep is focused, so quitting stops nothing."""
        with Vertical():
            yield Label("Quit the console?", id="quit-title")
            if self.readonly:
                yield Label(
                    f"This console is read-only: quitting leaves the {self.server_count} servers "
                    "and the pipeline as they are; stopping the fleet is disabled.",
                    id="quit-readonly",
                )
            else:
                pipeline = (
                    "and the pipeline first (its durable shards are kept; a new run resumes)"
                    if self.stops_pipeline
                    else "; the pipeline then waits for them"
                )
                yield Label(
                    f"Stopping the fleet stops {self.server_count} servers"
                    f"{' ' if self.stops_pipeline else ''}{pipeline}. Keeping it leaves servers "
                    "and pipeline running; reopen the console to re-attach.",
                    id="quit-text",  # wraps: cut, it hid what happens to the pipeline
                )
            with Horizontal():
                yield Button(
                    "Stop fleet",
                    variant="error",
                    id="quit-stop",
                    disabled=not self.can_stop_fleet,
                )
                yield Button("Keep running", variant="primary", id="quit-keep")
                yield Button("Cancel", id="quit-cancel")
            keys = [("k", "Keep running, quit")]
            if self.can_stop_fleet:
                keys.append(("s", "Stop fleet, quit"))
            keys.append(("c/Esc", "Cancel"))
            yield keys_hint(keys, "Keep running")

    def on_mount(self) -> None:
        """Focus the safe choice."""
        self.query_one("#quit-keep", Button).focus()

    def check_operation(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """'s' only when the backend can stop the fleet."""
        if action == "choose" and parameters == ("stop",):
            return self.can_stop_fleet or None
        return True

    def disabled_reason(self, action: str, parameters: tuple[object, ...]) -> str:
        """Why stopping the fleet is off here."""
        if action == "choose" and parameters == ("stop",):
            return "this console cannot stop the fleet (it only watches)"
        return ""

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Dismiss with the pressed button's choice."""
        choice = {"quit-stop": QuitChoice.STOP_FLEET, "quit-keep": QuitChoice.KEEP_FLEET}
        self.dismiss(choice.get(event.button.id or "", QuitChoice.CANCEL))

    def action_choose(self, choice: str) -> None:
        """Dismiss with ``choice``."""
        self.dismiss(QuitChoice(choice))


class AfterFailedStop(StrEnum):
    """What the operator chooses when Stop fleet left servers running."""

    RETRY = "retry"
    """Try to stop the fleet again."""
    LEAVE = "leave"
    """Quit, leaving the servers it could not stop running."""
    STAY = "stay"
    """Keep the console open (to look, or to stop them one by one)."""


class StopFailedScreen(ModalScreen[AfterFailedStop], ReadOnlyGate[AfterFailedStop]):
    """Stop fleet did not stop everything: say which servers still run and why, and let the
    operator retry, leave them running and quit, or keep the console open (the default: the
    console never closes on its own while servers it could not stop still run)."""

    DEFAULT_CSS = """
    StopFailedScreen {
        align: center middle;
    }
    StopFailedScreen > Vertical {
        width: 90;
        max-width: 100%;
        height: auto;
        border: thick $error;
        background: $surface;
        padding: 1 2;
    }
    StopFailedScreen #stopfail-title {
        text-style: bold;
        color: $error;
    }
    StopFailedScreen #stopfail-why, StopFailedScreen #stopfail-what {
        width: 100%;
        margin-top: 1;
    }
    StopFailedScreen Horizontal {
        height: auto;
        margin-top: 1;
    }
    StopFailedScreen Button {
        margin-right: 1;
    }
    """

    BINDINGS = [
        Binding("r", "choose('retry')", "Retry the stop", id="quitfail.retry"),
        Binding("l", "choose('leave')", "Leave them running, quit", id="quitfail.leave"),
        Binding("escape,c", "choose('stay')", "Keep the console open", id="quitfail.stay"),
    ]

    def __init__(self, why: str) -> None:
        """Args:
        why: What was not stopped, per GPU, and why (the stop's error).
        """
        super().__init__()
        self.why = why
        """The stop's error, naming each GPU it left running."""

    def compose(self) -> ComposeResult:
        """The title, what still runs and why, what can be done, the three choices."""
        with Vertical():
            yield Label("The fleet was not stopped: some servers still run", id="stopfail-title")
            yield Label(self.why, id="stopfail-why")
            yield Label(
                "Retry, leave them running and quit (reopen the console to re-attach), or keep "
                "the console open to stop them one by one (k names each server before it is "
                "signalled).",
                id="stopfail-what",
            )
            with Horizontal():
                # The keys are on the buttons: this dialog has no footer.
                yield Button("Retry (r)", variant="error", id="stopfail-retry")
                yield Button("Leave running, quit (l)", id="stopfail-leave")
                yield Button("Keep console open (esc)", variant="primary", id="stopfail-stay")

    def on_mount(self) -> None:
        """Focus the choice that changes nothing."""
        self.query_one("#stopfail-stay", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Dismiss with the pressed button's choice."""
        pressed = (event.button.id or "").removeprefix("stopfail-")
        self.dismiss(AfterFailedStop(pressed) if pressed else AfterFailedStop.STAY)

    def action_choose(self, choice: str) -> None:
        """Dismiss with ``choice``."""
        self.dismiss(AfterFailedStop(choice))
