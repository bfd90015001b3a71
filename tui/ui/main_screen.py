"""The main screen: the GPU grid and the generation pane. It owns the fleet state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Header

from tui.fleet.snapshot import FleetSnapshot
from tui.ops.commands import (
    Adopt,
    Apply,
    Canary,
    Kill,
    Kind,
    Relaunch,
    Rollback,
    Rollout,
    StartPipeline,
    StopPipeline,
)
from tui.ops.marks import OperationMark
from tui.ops.port import Fleet
from tui.pipeline.status import PipelineStatus
from tui.ui.adopt_screen import open_adoption
from tui.ui.autotune.autotune_screen import AutotuneScreen
from tui.ui.command_bar import CommandBar
from tui.ui.command_mode import COMMAND_BINDING, CommandMode
from tui.ui.confirm import ConfirmScreen
from tui.ui.describe import (
    adoptable,
    describe_fresh_job,
    describe_pipeline_stop,
    describe_servers,
    unknown_servers,
)
from tui.ui.footer import FleetFooter
from tui.ui.gate import ReadOnlyGate
from tui.ui.grid.filter_bar import FilterBar
from tui.ui.grid.fleet_row import FleetRow
from tui.ui.grid.gpu_grid import GpuGrid
from tui.ui.grid.habits import HABIT_BINDINGS, GridHabits
from tui.ui.grid.key_states import KeyStates
from tui.ui.grid.node_groups import NodeGroups
from tui.ui.grid.node_keys import NODE_BINDINGS, NodeKeys
from tui.ui.grid.scope import scope_words
from tui.ui.journal.journal_screen import JournalScreen
from tui.ui.messages import OperationRequested, PanelOpened, PanelSelected
from tui.ui.operation_host import OperationHost
from tui.ui.operation_strip import OperationStrip
from tui.ui.pipeline.generation_pane import GenerationPane
from tui.ui.render.hooks import install_compositor
from tui.ui.retune.flows import choose_relaunch, confirm_rollback
from tui.ui.rollout.describe import compact_range
from tui.ui.rollout.flows import choose_canary, choose_rollout
from tui.ui.stop_screen import StopChoice, StopScreen
from tui.ui.tuning.form_screen import open_tuning


class MainScreen(CommandMode, GridHabits, NodeKeys, KeyStates, ReadOnlyGate[None]):
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
        # The Footer shows them in this order: what a new operator looks for first, then the
        # seed loop's keys; at 80 columns the later ones are a scroll (or ?) away.
        Binding("enter", "open_detail", "Detail", id="grid.detail"),
        COMMAND_BINDING,
        *HABIT_BINDINGS,
        Binding("g", "toggle_generation", "Job", id="pipeline.pane", tooltip="Generation pane"),
        Binding(
            "p",
            "toggle_pipeline",
            "Pipeline",
            id="pipeline.start_stop",
            tooltip="Start/stop pipeline",
        ),
        Binding("k", "kill_selected", "Kill", id="fleet.kill"),
        Binding("K", "kill_all", "Kill all", id="fleet.kill_all"),
        Binding("r", "relaunch_selected", "Relaunch", id="fleet.relaunch"),
        Binding("R", "relaunch_all", "Relaunch all", id="fleet.relaunch_all"),
        Binding("t", "tune", "Tune", id="fleet.tune", tooltip="Tune GPU"),
        Binding("T", "tune_all", "Tune all", id="fleet.tune_all"),
        Binding("b", "rollback", "Rollback", id="fleet.rollback"),
        Binding("j", "journal", "Journal", id="fleet.journal"),
        Binding("c", "canary", "Canary", id="fleet.canary"),
        Binding("o", "rollout", "Roll out", id="fleet.rollout"),
        Binding("A", "adopt", "Adopt", id="fleet.adopt", tooltip="Take over servers"),
        # The status strip says "w: report" while an operation runs: not in the Footer too.
        Binding("w", "operation_report", "Operation", id="grid.operation", show=False),
        # The search runs detached; the screen follows it (its own keys change the fleet).
        Binding("a", "autotune", "Autotune", id="grid.autotune"),
        # A console over many nodes' agents (node groups): the selected panel's whole node.
        *NODE_BINDINGS,
    ]

    # Data reactives never repaint the screen itself: a screen repaint resends every cell to
    # the terminal (tens of KB a second over SSH); the widgets bound to them repaint their part.
    fleet: reactive[FleetSnapshot] = reactive(FleetSnapshot, always_update=True, repaint=False)
    """The newest fleet snapshot; the grid binds to it."""
    selected: reactive[int] = reactive(0, repaint=False)
    """GPU index of the selected panel."""
    marked: reactive[frozenset[int]] = reactive(frozenset, repaint=False)
    """GPUs marked (space) for the next stop or relaunch (``tui.ui.grid.habits``)."""
    grid_filter: reactive[str] = reactive("", repaint=False)
    """The ``/`` filter of the grid ("" shows every panel)."""
    pipeline_status: reactive[PipelineStatus | None] = reactive(None, repaint=False)
    """The newest pipeline status document."""
    retune_marks: reactive[tuple[OperationMark, ...]] = reactive((), repaint=False)
    """The journal's operations that changed servers, oldest first."""

    if TYPE_CHECKING:  # the console's app runs one operation at a time (OperationHost)
        app: OperationHost

    def __init__(
        self, port: Fleet, profile: str | None = None, *, node_groups: bool = False
    ) -> None:
        """Args:
        port: The fleet: its capabilities and the reads made before asking (commands go up
            to the app as messages).
        profile: The profile named on the command line, when the port knows no running one.
        node_groups: Show the panels in node groups (a console over many nodes' agents).
        """
        super().__init__()
        install_compositor(self)  # the panels' changed lines only (tui.ui.render)
        self.port = port
        """What the fleet offers and reads."""
        self.profile = profile
        """Profile to start the tuning form from when the port knows no running one."""
        self.node_groups = node_groups
        """Panels grouped by node, a heading each (many nodes)."""
        self._binding_inputs: dict[str, object] = {}
        """The inputs of ``check_action`` at the last Footer refresh (see _bindings_may_change)."""

    def compose(self) -> ComposeResult:
        """Header, grid, the fleet's totals, generation pane (hidden until `g`), footer."""
        yield Header()
        if self.node_groups:
            yield NodeGroups(id="grid").data_bind(
                MainScreen.fleet, MainScreen.selected, MainScreen.marked
            )
        else:
            yield GpuGrid(id="grid").data_bind(
                MainScreen.fleet, MainScreen.selected, MainScreen.marked, MainScreen.grid_filter
            )
        yield FleetRow(id="fleet-row").data_bind(
            fleet=MainScreen.fleet, status=MainScreen.pipeline_status
        )
        pane = GenerationPane(self.port.reads, id="generation").data_bind(
            status=MainScreen.pipeline_status, retune_marks=MainScreen.retune_marks
        )
        pane.display = False
        yield pane
        yield OperationStrip(self.port, id="operation-strip")
        yield FilterBar(placeholder="filter: GPU index, state or profile words")
        yield CommandBar(placeholder="command: apply NAME 3,5 | canary NAME 2 | logs 4 | ...")
        yield FleetFooter()

    def watch_fleet(self, fleet: FleetSnapshot) -> None:
        """Keep the selection on an existing GPU and the header on the GPU source."""
        self._retitle()
        indices = [panel.gpu_index for panel in fleet.panels]
        if indices and self.selected not in indices:
            self.selected = indices[0]
        self._bindings_may_change("fleet", bool(indices))
        self._bindings_may_change("adoptable", bool(adoptable(fleet)))

    def record_pipeline(
        self, status: PipelineStatus | None, marks: tuple[OperationMark, ...]
    ) -> None:
        """Take a new status reading: keep it, set the marks (the app records its history).

        Args:
            status: The document, or None when there is none.
            marks: The journal's operations that changed servers.
        """
        self.pipeline_status = status
        self.retune_marks = marks
        self._bindings_may_change("pipeline", None if status is None else status.state)

    def _bindings_may_change(self, name: str, value: object) -> None:
        """Refresh the Footer's keys only when what ``check_action`` reads has changed.

        Why: a refresh recomposes the Footer (new widgets, a layout pass and a repaint of the
        line); doing it on every reading cost more CPU than the panels themselves.
        """
        if name not in self._binding_inputs or self._binding_inputs[name] != value:
            self._binding_inputs[name] = value
            self.refresh_bindings()

    # --- which keys apply now -------------------------------------------------------------

    # --- selection -----------------------------------------------------------------------

    @property
    def _indices(self) -> list[int]:
        return [panel.gpu_index for panel in self.fleet.panels]

    def _step(self, delta: int) -> None:
        indices = self._shown
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
        """Select the panel of GPU ``gpu`` (ignored when there is none shown)."""
        if gpu in self._shown:
            self.selected = gpu

    def on_panel_selected(self, message: PanelSelected) -> None:
        """A panel was clicked."""
        message.stop()
        self.selected = message.gpu

    def take_typed(self, event: events.Key) -> bool:
        """A key that reaches the app while a bar is open but not focused yet is the bar's
        text (``BottomBar.take``), never one of the grid's keys. The app asks before it tries
        the bindings: a burst's keys all bubble up before the first one's binding opens the
        bar. Returns whether a bar took it."""
        return any(bar.take(event) for bar in (self._bar(), self._filter_bar()))

    def _filter_bar(self) -> FilterBar:
        """The ``/`` filter bar (``tui.ui.grid.habits``)."""
        return self.query_one(FilterBar)

    def _bar(self) -> CommandBar:
        """The command bar (command mode, ``tui.ui.command_mode``)."""
        return self.query_one(CommandBar)

    def _busy(self) -> bool:
        """True (after a notification naming it) while an operation runs in the background:
        one at a time, refused before anything is asked, never queued."""
        return self.app.refuse_if_busy()

    def action_operation_report(self) -> None:
        """Open the report of the operation running in the background."""
        self.app.show_operation()

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

    def _confirm_then_post(
        self, title: str, affected: str, message: Message, *, confirm: str = "Yes"
    ) -> None:
        """Ask, and post ``message`` (up to the app, which performs it) only on yes; a canary
        is the harmless kind of question (Enter starts it), the rest keep Cancel focused."""

        def done(confirmed: bool | None) -> None:
            if confirmed:
                self.post_message(message)

        harmless = isinstance(message, OperationRequested) and isinstance(message.command, Canary)
        self.app.push_screen(
            ConfirmScreen(title, affected, confirm, destructive=not harmless), done
        )

    def _ask_how_to_stop(self, title: str, gpus: tuple[int, ...]) -> None:
        """Ask how (drain, terminate, kill), and post the stop only when one was chosen."""

        shown = self.fleet  # what the confirmation names is what may be signalled

        def done(choice: StopChoice | None) -> None:
            if choice is not None:
                unknown = unknown_servers(shown, gpus)
                kill = Kill(gpus, choice.mode, unknown, choice.drain_s)
                self.post_message(OperationRequested(kill))

        self.app.push_screen(StopScreen(title, describe_servers(shown, gpus)), done)

    def action_kill_selected(self) -> None:
        """Stop the marked GPUs' servers (else the selected one's), the way the operator
        chooses."""
        if self._busy():
            return
        gpus = self.targets()
        plural = (
            f"servers on GPUs {compact_range(gpus)}"
            if len(gpus) > 1
            else f"server on GPU {gpus[0]}"
        )
        self._ask_how_to_stop(f"Stop the {plural}?", gpus)

    def action_kill_all(self) -> None:
        """Stop every server, the way the operator chooses."""
        if self._busy():
            return
        gpus = tuple(self._indices)
        self._ask_how_to_stop(f"Stop all {len(gpus)} servers?", gpus)

    def action_relaunch_selected(self) -> None:
        """Relaunch the marked GPUs' servers (else the selected one's) with a chosen profile,
        after confirmation."""
        if self._busy():
            return
        self._relaunch_flow(self.targets())

    def action_relaunch_all(self) -> None:
        """Relaunch every server with a chosen profile, after confirmation."""
        if self._busy():
            return
        self._relaunch_flow(tuple(self._indices))

    @work(group="ask", exclusive=True, exit_on_error=False)
    async def _relaunch_flow(self, gpus: tuple[int, ...]) -> None:
        shown = self.fleet  # what the confirmation names is what may be signalled
        reads = self.port.reads
        choice = await choose_relaunch(self.app, reads, gpus, describe_servers(shown, gpus))
        if choice is None:
            return
        if choice.same or choice.profile is None:
            self.post_message(OperationRequested(Relaunch(gpus, unknown_servers(shown, gpus))))
        else:
            self.post_message(OperationRequested(Apply(choice.profile, gpus)))

    def action_tune(self) -> None:
        """Open the tuning form on the selected GPU (a per-GPU override)."""
        if self._busy():
            return
        self._tune_flow(self.selected)

    def action_tune_all(self) -> None:
        """Open the tuning form on every GPU."""
        if self._busy():
            return
        self._tune_flow(None)

    def _tune_flow(self, gpu: int | None) -> None:
        # Pushed at once, not from a worker: the keys typed right after `t` go to the form.
        open_tuning(
            self.app,
            self.port,
            gpu,
            self.profile,
            lambda apply: self.post_message(OperationRequested(apply)),
        )

    def action_rollback(self) -> None:
        """Return the marked GPUs (else the fleet) to their previous profile, after a
        confirmation naming it, the GPUs and their nodes."""
        if self._busy():
            return
        self._rollback_flow(self.scope())

    @work(group="ask", exclusive=True, exit_on_error=False)
    async def _rollback_flow(self, scope: tuple[int, ...] | None) -> None:
        words = scope_words(self.fleet, scope)
        gpus = scope if scope is not None else tuple(self._indices)
        scoped = scope is not None
        choice = await confirm_rollback(self.app, self.port.reads.running, gpus, words, scoped)
        if choice is not None:
            back = Rollback(choice.gpus if choice.scoped else None, all_at_once=choice.all_at_once)
            self.post_message(OperationRequested(back, choice.target))

    def action_canary(self) -> None:
        """Try a profile on the selected GPU, the others as control, after confirmation."""
        if self._busy():
            return
        self._canary_flow(self.selected)

    @work(group="ask", exclusive=True, exit_on_error=False)
    async def _canary_flow(self, gpu: int) -> None:
        # A many-node console's port picks the controls (the GPUs running the canary GPU's
        # profile on every node): the confirm names those; on one node, every other GPU.
        controls = self.port.reads.canary_controls(gpu)
        fleet = (gpu, *controls) if controls is not None else tuple(self._indices)
        profile = await choose_canary(
            self.app, self.port, gpu, fleet, describe_servers(self.fleet, (gpu,))
        )
        if profile is not None:
            self.post_message(OperationRequested(Canary(profile, gpu)))

    def action_rollout(self) -> None:
        """Roll a profile out to the marked GPUs (else the fleet) one GPU at a time, after a
        confirmation naming the GPUs and their nodes."""
        if self._busy():
            return
        self._rollout_flow(self.scope())

    @work(group="ask", exclusive=True, exit_on_error=False)
    async def _rollout_flow(self, scope: tuple[int, ...] | None) -> None:
        gpus = scope if scope is not None else tuple(self._indices)
        words = scope_words(self.fleet, scope)
        profile = await choose_rollout(self.app, self.port.reads, gpus, words)
        if profile is not None:
            self.post_message(OperationRequested(Rollout(profile, 1, scope)))

    def action_adopt(self) -> None:
        """Take over the servers shown that the fleet state records nothing of (started by the
        operator's own script), after a dialog showing what will be written."""
        if self._busy() or Kind.ADOPT not in self.port.capabilities():
            return
        open_adoption(
            self.app,
            self.port.reads,
            self.fleet,
            lambda plan: self.post_message(OperationRequested(Adopt(plan))),
        )

    def action_journal(self) -> None:
        """Show the journal."""
        self.app.push_screen(JournalScreen(self.port.reads.journal))

    def action_autotune(self) -> None:
        """Show the autotune search (re-attaches to a running one)."""
        self.app.push_screen(AutotuneScreen(self.port, gpus=tuple(self._indices)))

    def action_toggle_pipeline(self) -> None:
        """Start the pipeline, or stop it (after confirmation) when it is running; the demo's
        job, once finished, is started afresh after confirmation."""
        status = self.pipeline_status
        if status is not None and status.state == "running":
            self._confirm_then_post(
                "Stop the generation pipeline?",
                describe_pipeline_stop(status),
                OperationRequested(StopPipeline()),
                confirm="Stop pipeline",
            )
        elif status is not None and status.state == "finished" and self._starts_fresh_job:
            self._confirm_then_post(
                "Start a fresh demo job?",
                describe_fresh_job(status),
                OperationRequested(StartPipeline()),
            )
        else:
            self.post_message(OperationRequested(StartPipeline()))

    @property
    def _starts_fresh_job(self) -> bool:
        """The port starts a finished job afresh (the demo's)."""
        return self.port.capabilities().starts_fresh_job
