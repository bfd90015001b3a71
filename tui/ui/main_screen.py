"""The main screen: the GPU grid and the generation pane. It owns the fleet state.

The screen composes the grid and binds it to the fleet, moves the selection and opens the views
(detail, generation pane, journal, autotune, an operation's report). Its other keys are grouped
by concept in mixins: the operations' keys (``tui.ui.grid.operation_keys``), the filter and the
marks (``tui.ui.grid.habits``), the command line (``tui.ui.command_mode``), which keys apply now
(``tui.ui.grid.key_states``) and read-only mode (``tui.ui.gate``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.widgets import Header

from tui.fleet.snapshot import FleetSnapshot
from tui.ops.marks import OperationMark
from tui.ops.port import Fleet
from tui.pipeline.status import PipelineStatus
from tui.ui.autotune.autotune_screen import AutotuneScreen
from tui.ui.command_bar import CommandBar
from tui.ui.command_mode import COMMAND_BINDING, CommandMode
from tui.ui.describe import adoptable
from tui.ui.footer import FleetFooter
from tui.ui.gate import ReadOnlyGate
from tui.ui.grid.filter_bar import FilterBar
from tui.ui.grid.fleet_row import FleetRow
from tui.ui.grid.gpu_grid import GpuGrid
from tui.ui.grid.habits import HABIT_BINDINGS, MARK_NODE_BINDING, GridHabits
from tui.ui.grid.key_states import KeyStates
from tui.ui.grid.node_groups import NodeGroups
from tui.ui.grid.operation_keys import NODE_BINDINGS, OperationKeys
from tui.ui.journal.journal_screen import JournalScreen
from tui.ui.messages import PanelOpened, PanelSelected
from tui.ui.operation_host import OperationHost
from tui.ui.operation_strip import OperationStrip
from tui.ui.pipeline.generation_pane import GenerationPane
from tui.ui.render.hooks import install_compositor


class MainScreen(CommandMode, GridHabits, OperationKeys, KeyStates, ReadOnlyGate[None]):
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
        MARK_NODE_BINDING,
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

    # --- the bars (command line, filter) --------------------------------------------------

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

    # --- views ----------------------------------------------------------------------------

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

    def action_journal(self) -> None:
        """Show the journal."""
        self.app.push_screen(JournalScreen(self.port.reads.journal))

    def action_autotune(self) -> None:
        """Show the autotune search (re-attaches to a running one)."""
        self.app.push_screen(AutotuneScreen(self.port, gpus=tuple(self._indices)))
