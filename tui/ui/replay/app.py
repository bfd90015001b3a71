"""``ReplayApp``: the console (``FleetApp``, the same screens) on a replay's port, with the time
cursor's keys.

The port (``tui.ops.replay.ReplayFleet``) gives the history at its cursor as each snapshot and
runs nothing (every key that would change the fleet is off: "replay"). The keys here move the
cursor and show the moment at once; the header names it (the snapshot's ``gpu_source``). The
console's history is read, never written (``HistoryRecorder.reading``): the grid's graphs and
the generation pane's chart read it up to the cursor, their clock.
"""

from __future__ import annotations

from pathlib import Path

from textual.binding import Binding

from tui.history import HistoryRecorder
from tui.ops.replay import ReplayFleet
from tui.ui.app import FleetApp
from tui.ui.grid.gpu_grid import GpuGrid
from tui.ui.messages import FleetUpdated
from tui.ui.pipeline.generation_pane import GenerationPane

CURSOR = "replay-cursor"
"""Worker group of the read after a cursor key (the newest key wins)."""
MINUTE_S = 60.0
NO_STATUS = "the job's status document is not recorded (its output rate is: the chart)"
"""What the generation pane says in a replay instead of 'press p to start it'."""


class ReplayApp(FleetApp):
    """The console on the recorded history.

    Args:
        port: The replay's port (its cursor set at ``--at``).
        poll_interval_s: Seconds between reads at the cursor (a followed history grows).
    """

    # The console's stylesheet (Textual reads a relative path beside the declaring module).
    CSS_PATH = str(Path(__file__).parent.parent / "app.tcss")
    TITLE = "gpufleet replay"
    BINDINGS = [
        *FleetApp.BINDINGS,
        Binding("comma", "step(-1)", "Back a step", id="replay.back", key_display=","),
        Binding("full_stop", "step(1)", "Forward a step", id="replay.forward", key_display="."),
        Binding(
            "less_than_sign",
            f"step(-1, {MINUTE_S})",
            "Back a minute",
            id="replay.back_minute",
            key_display="<",
        ),
        Binding(
            "greater_than_sign",
            f"step(1, {MINUTE_S})",
            "Forward a minute",
            id="replay.forward_minute",
            key_display=">",
        ),
        Binding("home", "jump(False)", "Start", id="replay.start", tooltip="The first moment"),
        Binding("end", "jump(True)", "End", id="replay.end", tooltip="The last moment recorded"),
        Binding("n", "follow", "Now", id="replay.now", tooltip="Follow the newest moment"),
    ]

    def __init__(self, port: ReplayFleet, *, poll_interval_s: float = 1.0) -> None:
        # Read-only: the keys that would change the fleet stay out of the Footer (the cursor's
        # keys fit beside the others) and say why when pressed; the port refuses them anyway.
        super().__init__(
            port,
            poll_interval_s=poll_interval_s,
            readonly=True,
            history=HistoryRecorder.reading(port.store),
        )
        self.replay = port
        """The port, its cursor."""
        self._fitted = False
        """Whether the grid and the pane are fitted to the replay (``_fit_widgets``)."""

    def action_step(self, steps: int, seconds: float | None = None) -> None:
        """Move the cursor a bucket (``seconds``: that long) back or forward."""
        self.replay.step(steps, None if seconds is None else steps * seconds)
        self._read_at_cursor()

    def action_jump(self, to_end: bool) -> None:
        """The cursor on the history's first moment, or its last."""
        self.replay.jump(to_end)
        self._read_at_cursor()

    def action_follow(self) -> None:
        """The cursor on the newest moment, following the history as it grows."""
        self.replay.follow()
        self._read_at_cursor()

    def _read_at_cursor(self) -> None:
        async def read() -> None:
            self.post_message(FleetUpdated(await self.replay.snapshot()))

        self.run_worker(read(), group=CURSOR, exclusive=True, exit_on_error=False)

    def on_fleet_updated(self, message: FleetUpdated) -> None:
        """Show a snapshot of the cursor (one read before a key moved it is dropped), the
        graphs' and the chart's clock on the cursor."""
        if message.snapshot.taken_at != self.replay.cursor:
            return
        super().on_fleet_updated(message)
        if not self._fitted:
            self._fit_widgets()

    def _fit_widgets(self) -> None:
        """The grid's graphs and the job's chart end at the cursor, not now, and the pane says
        why it has no status document (set once the widgets are mounted: the grid sets its own
        clock as it mounts)."""
        screen = self.main_screen
        grids = [grid for grid in screen.query(GpuGrid) if grid.is_mounted]
        panes = list(screen.query(GenerationPane))
        if not grids or not panes:
            return
        for grid in grids:
            grid.clock = self._cursor
        for pane in panes:
            pane.clock = self._cursor
            pane.no_status = NO_STATUS
        self._fitted = True

    def _cursor(self) -> float:
        return self.replay.cursor

    def action_request_quit(self) -> None:
        """Quit at once: a replay changes nothing, so there is nothing to ask."""
        self.exit()
