"""The main screen: the GPU grid and the generation pane. It owns the fleet state."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Header

from tui.fleet.snapshot import FleetSnapshot
from tui.pipeline.status import PipelineStatus
from tui.ui.confirm import ConfirmScreen
from tui.ui.describe import describe_pipeline_stop, describe_servers
from tui.ui.grid.gpu_grid import GpuGrid
from tui.ui.messages import (
    ApplyProfileRequested,
    KillRequested,
    PanelOpened,
    PanelSelected,
    PipelineStartRequested,
    PipelineStopRequested,
    RelaunchRequested,
    RollbackRequested,
)
from tui.ui.pipeline.generation_pane import GenerationPane
from tui.ui.pipeline.throughput_history import Sample, append_sample
from tui.ui.sources import FleetActions, Intent

ACTION_INTENTS: dict[str, Intent] = {
    "kill_selected": Intent.KILL,
    "kill_all": Intent.KILL,
    "relaunch_selected": Intent.RELAUNCH,
    "relaunch_all": Intent.RELAUNCH,
    "tune": Intent.TUNE,
    "rollback": Intent.ROLLBACK,
    "journal": Intent.JOURNAL,
    "toggle_pipeline": Intent.PIPELINE,
}
"""Which backend capability each operation key needs (disabled in the Footer without it)."""


class MainScreen(Screen[None]):
    """Grid of panels plus the generation pane; selection and operations by keyboard."""

    BINDINGS = [
        Binding("left", "move(-1)", "Previous GPU", id="grid.left", show=False),
        Binding("right", "move(1)", "Next GPU", id="grid.right", show=False),
        Binding("up", "move_row(-1)", "GPU above", id="grid.up", show=False),
        Binding("down", "move_row(1)", "GPU below", id="grid.down", show=False),
        *[
            Binding(str(d), f"select({d})", f"Select GPU {d}", id=f"grid.select_{d}", show=False)
            for d in range(10)
        ],
        Binding("enter", "open_detail", "Detail", id="grid.detail"),
        Binding("g", "toggle_generation", "Generation", id="pipeline.pane"),
        Binding("p", "toggle_pipeline", "Start/stop pipeline", id="pipeline.start_stop"),
        Binding("k", "kill_selected", "Kill", id="fleet.kill"),
        Binding("K", "kill_all", "Kill all", id="fleet.kill_all"),
        Binding("r", "relaunch_selected", "Relaunch", id="fleet.relaunch"),
        Binding("R", "relaunch_all", "Relaunch all", id="fleet.relaunch_all"),
        Binding("t", "tune", "Tune", id="fleet.tune"),
        Binding("b", "rollback", "Rollback", id="fleet.rollback"),
        Binding("j", "journal", "Journal", id="fleet.journal"),
    ]

    fleet: reactive[FleetSnapshot] = reactive(FleetSnapshot, always_update=True)
    """The newest fleet snapshot; the grid binds to it."""
    selected: reactive[int] = reactive(0)
    """GPU index of the selected panel."""
    pipeline_status: reactive[PipelineStatus | None] = reactive(None)
    """The newest pipeline status document."""
    pipeline_history: reactive[tuple[Sample, ...]] = reactive(())
    """Output tok/s over the last hour, from successive status documents."""
    retune_marks: reactive[tuple[float, ...]] = reactive(())
    """time.time() of each retune, from the journal."""

    def __init__(self, actions: FleetActions, profile: str | None = None) -> None:
        """Args:
        actions: The backend; only its ``supports`` is used here (intents go up as messages).
        profile: The profile named on the command line, offered by the tune key.
        """
        super().__init__()
        self.actions = actions
        """What the backend can do."""
        self.profile = profile
        """Profile to apply with the tune key, when one was given."""

    def compose(self) -> ComposeResult:
        """Header, grid, generation pane (hidden until `g`), footer."""
        yield Header()
        yield GpuGrid(id="grid").data_bind(MainScreen.fleet, MainScreen.selected)
        pane = GenerationPane(id="generation").data_bind(
            status=MainScreen.pipeline_status,
            history=MainScreen.pipeline_history,
            retune_marks=MainScreen.retune_marks,
        )
        pane.display = False
        yield pane
        yield Footer()

    def watch_fleet(self, fleet: FleetSnapshot) -> None:
        """Keep the selection on an existing GPU and the header on the GPU source."""
        self.sub_title = fleet.gpu_source
        indices = [panel.gpu_index for panel in fleet.panels]
        if indices and self.selected not in indices:
            self.selected = indices[0]
        self.refresh_bindings()

    def record_pipeline(self, status: PipelineStatus | None, marks: tuple[float, ...]) -> None:
        """Take a new status reading: keep it, extend the hour of history, set the marks.

        Args:
            status: The document, or None when there is none.
            marks: Retune timestamps from the journal.
        """
        self.pipeline_status = status
        if status is not None:
            self.pipeline_history = append_sample(self.pipeline_history, status)
        self.retune_marks = marks
        self.refresh_bindings()

    # --- which keys apply now -------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Operation keys show disabled (None) without backend support or without GPUs."""
        intent = ACTION_INTENTS.get(action)
        if intent is None:
            return True
        if not self.actions.supports(intent):
            return None
        if action in ("kill_selected", "relaunch_selected", "kill_all", "relaunch_all"):
            return bool(self.fleet.panels) or None
        return True

    # --- selection -----------------------------------------------------------------------

    @property
    def _indices(self) -> list[int]:
        return [panel.gpu_index for panel in self.fleet.panels]

    def _step(self, delta: int) -> None:
        indices = self._indices
        if not indices:
            return
        position = indices.index(self.selected) if self.selected in indices else 0
        self.selected = indices[max(0, min(len(indices) - 1, position + delta))]

    def action_move(self, delta: int) -> None:
        """Select the previous (-1) or next (1) panel."""
        self._step(delta)

    def action_move_row(self, delta: int) -> None:
        """Select the panel a row above (-1) or below (1)."""
        self._step(delta * self.query_one(GpuGrid).shape.columns)

    def action_select(self, gpu: int) -> None:
        """Select the panel of GPU ``gpu`` (ignored when there is none)."""
        if gpu in self._indices:
            self.selected = gpu

    def on_panel_selected(self, message: PanelSelected) -> None:
        """A panel was clicked."""
        message.stop()
        self.selected = message.gpu

    def action_open_detail(self) -> None:
        """Ask the app for the selected panel's detail screen."""
        if self.selected in self._indices:
            self.post_message(PanelOpened(self.selected))

    def action_toggle_generation(self) -> None:
        """Show and focus the generation pane, or hide it when it already has focus."""
        pane = self.query_one(GenerationPane)
        if pane.display and pane.has_focus:
            pane.display = False
            return
        pane.display = True
        pane.focus()

    # --- operations (confirmed here, performed by the app through the backend) ----------------

    def _confirm_then_post(self, title: str, affected: str, message: Message) -> None:
        """Ask, and post ``message`` (up to the app, which performs it) only on yes."""

        def done(confirmed: bool | None) -> None:
            if confirmed:
                self.post_message(message)

        self.app.push_screen(ConfirmScreen(title, affected), done)

    def action_kill_selected(self) -> None:
        """Kill the selected GPU's server, after confirmation."""
        gpus = (self.selected,)
        self._confirm_then_post(
            f"Kill the server on GPU {self.selected}?",
            describe_servers(self.fleet, gpus),
            KillRequested(gpus),
        )

    def action_kill_all(self) -> None:
        """Kill every server, after confirmation."""
        gpus = tuple(self._indices)
        self._confirm_then_post(
            f"Kill all {len(gpus)} servers?",
            describe_servers(self.fleet, gpus),
            KillRequested(gpus),
        )

    def action_relaunch_selected(self) -> None:
        """Relaunch the selected GPU's server, after confirmation."""
        gpus = (self.selected,)
        self._confirm_then_post(
            f"Relaunch the server on GPU {self.selected}?",
            describe_servers(self.fleet, gpus),
            RelaunchRequested(gpus),
        )

    def action_relaunch_all(self) -> None:
        """Relaunch every server, after confirmation."""
        gpus = tuple(self._indices)
        self._confirm_then_post(
            f"Relaunch all {len(gpus)} servers?",
            describe_servers(self.fleet, gpus),
            RelaunchRequested(gpus),
        )

    def action_tune(self) -> None:
        """Apply the command line's profile to every GPU (the tuning form is later work)."""
        if self.profile is None:
            self.notify(
                "No profile given: start the console with --profile NAME "
                "(the tuning form is not built yet).",
                title="Tune",
                severity="warning",
            )
            return
        gpus = tuple(self._indices)
        self._confirm_then_post(
            f"Apply profile {self.profile!r} to all {len(gpus)} GPUs?",
            "Each server is stopped and relaunched with the profile:\n"
            + describe_servers(self.fleet, gpus),
            ApplyProfileRequested(self.profile, gpus),
        )

    def action_rollback(self) -> None:
        """Return to the previous profile, after confirmation."""
        self._confirm_then_post(
            "Roll back to the previous profile?",
            "Every server is relaunched:\n" + describe_servers(self.fleet, self._indices),
            RollbackRequested(),
        )

    def action_journal(self) -> None:
        """The journal view is later work; say where the journal is readable meanwhile."""
        self.notify("The journal view is not built yet; run 'gpufleet journal'.", title="Journal")

    def action_toggle_pipeline(self) -> None:
        """Start the pipeline, or stop it (after confirmation) when it is running."""
        status = self.pipeline_status
        if status is not None and status.state == "running":
            self._confirm_then_post(
                "Stop the generation pipeline?",
                describe_pipeline_stop(status),
                PipelineStopRequested(),
            )
        else:
            self.post_message(PipelineStartRequested())
