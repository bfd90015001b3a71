"""The console's ``A``: adopt the watched servers, after a dialog showing what will be written.

The dialog asks the profile's name (a fresh one is offered), reads the plan in a worker
(``FleetOps.plan_adoption``: each server, its GPU, log and release, the profile file's text,
and a line for each flag it cannot hold) and shows it; Enter in the name reads it again. The
Adopt button answers with the plan shown, and only while it is the plan of the name typed;
nothing is written before. A refusal (a port held by no SGLang server, a name that exists) is
the plan's place, in one line, and Adopt stays off.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from tui.fleet.snapshot import FleetSnapshot
from tui.ops.adoption import AdoptError, AdoptPlan
from tui.ops.port import FleetReads
from tui.ops.types import StateFileError
from tui.ui.describe import adoptable
from tui.ui.dialog_keys import BUTTON_KEYS, KEYS_HINT_CSS, ButtonKeys, keys_hint
from tui.ui.gate import ReadOnlyGate
from tui.words import gpus_words, spans

Planner = Callable[[str], Awaitable[AdoptPlan]]
"""Reads the plan of adopting the watched servers as the named profile."""

PLAN_GROUP = "adopt-plan"
"""Worker group of the plan's read (one at a time: a newer name replaces it)."""


class AdoptScreen(ModalScreen[AdoptPlan | None], ButtonKeys, ReadOnlyGate[AdoptPlan | None]):
    """Dismisses with the plan to write (Adopt), or None (Cancel, Escape)."""

    DEFAULT_CSS = (
        """
    AdoptScreen {
        align: center middle;
    }
    AdoptScreen > Vertical {
        width: 100;
        max-width: 100%;
        height: 90%;
        border: thick $warning;
        background: $surface;
        padding: 1 2;
    }
    AdoptScreen #adopt-plan-scroll {
        height: 1fr;
        margin: 1 0;
        border: round $panel;
    }
    AdoptScreen #adopt-title {
        width: 100%;
        text-style: bold;
    }
    AdoptScreen #adopt-name-row {
        height: auto;
        margin-top: 1;
    }
    AdoptScreen #adopt-name-label {
        padding: 1 1 0 0;
    }
    AdoptScreen #adopt-name {
        width: 1fr;
    }
    AdoptScreen #adopt-problem {
        width: 100%;
        color: $error;
    }
    AdoptScreen #adopt-plan {
        width: 100%;
    }
    AdoptScreen Horizontal#adopt-buttons {
        height: auto;
        align-horizontal: right;
    }
    AdoptScreen Button {
        margin-left: 2;
    }
    """
        + KEYS_HINT_CSS
    )

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="adopt.cancel"), *BUTTON_KEYS]

    def __init__(self, title: str, name: str, planner: Planner) -> None:
        """Args:
        title: What is adopted, e.g. 'Adopt ports 30000-30006 (GPUs 0-6)?'.
        name: The profile name offered.
        planner: Reads the plan for a name (in a worker: it reads the process table).
        """
        super().__init__()
        self.title_text = title
        """The question."""
        self.offered = name
        """The name offered when the dialog opened."""
        self.planner = planner
        """Reads a plan."""
        self.plan: AdoptPlan | None = None
        """The plan shown (None: being read, or refused)."""

    def compose(self) -> ComposeResult:
        """The question, the name, the plan (or why not), two buttons and the key line."""
        with Vertical():
            yield Label(self.title_text, id="adopt-title")
            yield Label(
                "Nothing is signalled: the servers keep serving. What will be written:",
                id="adopt-subtitle",
            )
            with Horizontal(id="adopt-name-row"):
                yield Label("profile name", id="adopt-name-label")
                yield Input(self.offered, id="adopt-name")
            yield Label("", id="adopt-problem")
            with VerticalScroll(id="adopt-plan-scroll"):  # the buttons stay in sight below
                yield Static("reading the servers...", id="adopt-plan", markup=False)
            with Horizontal(id="adopt-buttons"):
                yield Button("Adopt", variant="warning", id="adopt-yes", disabled=True)
                yield Button("Cancel", variant="primary", id="adopt-no")
            # The name has the focus: Enter reads it again (a button's focus says what it presses).
            choices = [("Tab", "to the buttons"), ("Esc", "Cancel")]
            yield keys_hint(choices, "read the plan for this name")

    def on_mount(self) -> None:
        """Read the plan for the offered name."""
        self.read_plan(self.offered)

    @work(group=PLAN_GROUP, exclusive=True, exit_on_error=False)
    async def read_plan(self, name: str) -> None:
        """Read the plan of ``name`` and show it, or why it is refused."""
        self.plan = None
        self.query_one("#adopt-yes", Button).disabled = True
        problem = self.query_one("#adopt-problem", Label)
        shown = self.query_one("#adopt-plan", Static)
        try:
            plan = await self.planner(name)
        except (AdoptError, StateFileError) as refused:
            problem.update(str(refused))
            shown.update("nothing will be written")
            return
        problem.update("")
        self.plan = plan
        shown.update("\n".join([*plan.describe(), f"--- {plan.path}", plan.toml().rstrip()]))
        self.query_one("#adopt-yes", Button).disabled = False

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the name: read the plan for it."""
        event.stop()
        self.read_plan(event.value.strip())

    def on_input_changed(self, event: Input.Changed) -> None:
        """A name typed is not the plan's until it is read: Adopt waits for Enter."""
        event.stop()
        fresh = self.plan is not None and event.value.strip() == self.plan.profile.name
        self.query_one("#adopt-yes", Button).disabled = not fresh

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Adopt answers with the plan shown; Cancel with None."""
        event.stop()
        if event.button.id == "adopt-yes" and self.plan is not None:
            self.dismiss(self.plan)
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        """Nothing is written."""
        self.dismiss(None)


def open_adoption(
    app: App[None],
    reads: FleetReads,
    fleet: FleetSnapshot,
    on_plan: Callable[[AdoptPlan], object],
) -> None:
    """Open the dialog on the servers of ``fleet`` the fleet state records nothing of.

    Args:
        app: The console.
        reads: The port's reads (the plan is read there; the app runs the ``Adopt``).
        fleet: What the grid shows (its ``stranger`` servers are adopted).
        on_plan: Called with the plan after Adopt (not after Cancel).
    """
    found = adoptable(fleet)
    if not found:
        return
    gpus, ports = tuple(g for g, _ in found), tuple(p for _, p in found)

    async def planner(name: str) -> AdoptPlan:
        return await reads.plan_adoption(ports, gpus, name)

    def done(plan: AdoptPlan | None) -> None:
        if plan is not None:
            on_plan(plan)

    title = f"Adopt the servers on ports {spans(ports)} ({gpus_words(gpus)})?"
    name = time.strftime("adopted-%Y%m%d-%H%M")
    app.push_screen(AdoptScreen(title, name, planner), done)
