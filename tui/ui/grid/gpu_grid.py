"""The grid of GPU panels: 1-16 GPUs, columns computed from the room it has on every resize."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from textual import events, work
from textual.containers import ScrollableContainer
from textual.reactive import reactive

from tui.fleet.snapshot import FleetSnapshot
from tui.history import HistoryRecorder
from tui.ui.grid.filter import filtered
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.grid.layout import GridShape, choose_shape, last_row_columns
from tui.ui.grid.panel_graphs import (
    GRAPHS,
    MIN_SPARE_ROWS,
    SETTLE_S,
    SPARK_METRIC,
    PanelRead,
    PanelSeries,
    cells_due,
    graph_span,
    read_every_s,
    read_series,
    spark_span,
    spark_top,
)
from tui.ui.grid.panel_lines import spark_cells
from tui.ui.host import host_of


class GpuGrid(ScrollableContainer, can_focus=False):
    """Panels in GPU order. The screen binds ``fleet`` and ``selected``; the grid hands each
    panel its part (attributes down)."""

    DEFAULT_CSS = """
    GpuGrid {
        layout: grid;
        grid-size: 3;
        grid-rows: 1fr;
        height: 1fr;
    }
    GpuGrid.-overflow {
        grid-rows: 5;
    }
    """

    fleet: reactive[FleetSnapshot] = reactive(FleetSnapshot, always_update=True, repaint=False)
    """The whole fleet; bound to the screen's ``fleet``. Data only: repainting the grid would
    resend every panel to the terminal each second; each panel repaints what changed in it."""
    selected: reactive[int] = reactive(0, repaint=False)
    """GPU index of the selected panel; bound to the screen's ``selected``."""
    marked: reactive[frozenset[int]] = reactive(frozenset, repaint=False)
    """GPUs marked (space) for the next operation; bound to the screen's ``marked``."""
    grid_filter: reactive[str] = reactive("", repaint=False)
    """The ``/`` filter: only the panels it matches are shown (``tui.ui.grid.filter``)."""
    shape: reactive[GridShape] = reactive(
        GridShape(columns=3, rows=3, full=False, fits=True), repaint=False
    )
    """The arrangement in use (recomputed on resize and when the GPU count changes)."""

    AGE_TICK_S = 1.0
    """How often the panels look at the age of what they show while the next reading is late:
    a monitor whose next reading is late by more than the dim bound dims every panel with its
    age."""
    LATE_AFTER_S = 1.0
    """Lateness below this is none: a poll takes a moment, so the next reading is always a
    little later than one interval; counting that made every panel build its lines again at
    every tick (ages are shown in whole seconds, from three missed polls)."""

    _received_at = 0.0
    """time.monotonic() when the snapshot shown arrived."""
    _graph_cells: dict[int, tuple[object, int]] = {}
    """Each panel's size and the cell its history was last read for."""
    _every_for: tuple[object, ...] = ()
    """The panels' sizes ``_every`` is for."""
    _every: tuple[float, ...] = ()
    """Each panel's cell, seconds (``read_every_s``)."""
    _late_check: asyncio.TimerHandle | None = None
    """The look at the ages, due when the next reading would be late (``_expect_reading``)."""

    def on_mount(self) -> None:
        """Count the snapshot's age from now; look at the ages once the next reading is late."""
        self.clock: Callable[[], float] = time.time
        """Wall time for the graphs' cells (tests set it)."""
        self._graph_cells = {}
        self._reads_issued = 0
        """Reads of the history issued so far (each is numbered)."""
        self._read_shown: dict[int, int] = {}
        """Each panel's newest read shown, by number."""
        self._received_at = time.monotonic()
        self._expect_reading()

    def on_unmount(self) -> None:
        """No look at the ages of a grid that is gone."""
        if self._late_check is not None:
            self._late_check.cancel()
            self._late_check = None

    def _expect_reading(self, after_s: float | None = None) -> None:
        """Look at the ages ``after_s`` from now (default: when the next reading is late).

        Why not a Textual interval: the age changes nothing while readings arrive (nearly
        always), yet each tick of a ``set_interval`` cost Textual a task step, a sleep and a
        signature look-up (~0.2 ms a second with seven panels, 2% of the console). Each
        reading pushes this one-shot asyncio timer back; it fires only when no reading came,
        and then once a second until one does.
        """
        if self._late_check is not None:
            self._late_check.cancel()
        if after_s is None:
            after_s = self._poll_interval_s() + self.LATE_AFTER_S
        self._late_check = asyncio.get_running_loop().call_later(after_s, self._reading_late)

    def _reading_late(self) -> None:
        self._late_check = None
        if self.is_attached:
            # through the grid's own queue: Textual's error handling, in the app's context
            self.call_next(self._tick)
            self._expect_reading(self.AGE_TICK_S)

    def _views(self) -> list[GpuPanelView]:
        """The panels, in order. Why not ``query_children``: a DOM query builds a selector and
        matches it against each child; the grid asks at every tick and every reading."""
        return [child for child in self.children if isinstance(child, GpuPanelView)]

    def _tick(self) -> None:
        self._age_panels()
        self._graphs_if_due()

    def _graphs_if_due(self) -> None:
        """Read the history of the panels whose cell completed, or whose size changed.

        Why: a graph or a sparkline moves only when a cell completes (about every 16 s at
        200x50, 9 s at 80x24); reading every 5 s cost a history read in a thread, and a redraw
        of every panel's rows whenever a partly written bucket had filled a little more. Why
        per panel: panels of other widths have cells of other lengths (the wide last row's),
        and each panel's completed cell re-read all seven (~2.5 ms of reading a panel).
        """
        views = self._views()
        sizes = tuple(view.size for view in views)  # one look-up each: it finds the widget
        if sizes != self._every_for:  # the cells' lengths change with the panels' sizes only
            self._every_for = sizes
            self._every = tuple(
                read_every_s(size.width, spark_cells(size.width, full), full)
                for view, size in zip(views, sizes, strict=True)
                for full in (view.has_room_for_graphs(size),)
            )
        cells = cells_due(self._every, self.clock())
        drawn = self._graph_cells
        due = [
            view
            for view, size, cell in zip(views, sizes, cells, strict=True)
            if drawn.get(view.gpu_index) != (size, cell)
        ]
        if due:
            self._graph_cells = {
                view.gpu_index: (size, cell)
                for view, size, cell in zip(views, sizes, cells, strict=True)
            }
            self._graph_panels(due)

    def _poll_interval_s(self) -> float:
        """The console's seconds between polls (1 s in another app)."""
        host = host_of(self)
        return host.poll_interval_s if host is not None else 1.0

    def _history(self) -> HistoryRecorder | None:
        """The console's history (None in another app: no graphs)."""
        host = host_of(self)
        return host.history if host is not None else None

    def _graph_panels(self, views: list[GpuPanelView] | None = None) -> None:
        """Read the history for ``views`` (default: every panel), up to ``SETTLE_S`` ago (the
        buckets written completely): all the graphed metrics for the panels with spare rows
        (nvitop's per-GPU graphs), the sparkline's for the others."""
        wanted = self._views() if views is None else views
        reads = tuple(read for read in map(panel_read, wanted) if read is not None)
        if reads and self._history() is not None:
            self._reads_issued += 1
            self._read_graphs(reads, self.clock() - SETTLE_S, self._reads_issued)

    @work(thread=True, group="panel-graphs", exit_on_error=False)
    def _read_graphs(self, reads: tuple[PanelRead, ...], now: float, number: int) -> None:
        recorder = self._history()
        store = recorder.open() if recorder is not None else None
        if store is not None:
            series = read_series(store, reads, now)
            self.app.call_from_thread(self._take_graphs, reads, series, number)

    def _take_graphs(
        self, reads: tuple[PanelRead, ...], series: dict[int, PanelSeries], number: int
    ) -> None:
        """Hand the panels read their series; the sparklines' shared scale over every panel's
        (the others keep theirs, and are drawn again only when the scale moved). A read issued
        before the one a panel already shows (two reads in flight) changes nothing of it."""
        views = self._views()
        numbers = self._read_shown
        read = {one.gpu for one in reads if numbers.get(one.gpu, 0) <= number}
        numbers.update(dict.fromkeys(read, number))
        latest = {
            view.gpu_index: series.get(view.gpu_index) if view.gpu_index in read else view.graphs
            for view in views
        }
        shown = {gpu: one for gpu, one in latest.items() if one is not None}
        top = spark_top(shown, {view.gpu_index: view.spark_cells() for view in views})
        for view in views:
            if view.gpu_index in read or view.spark_top != top:
                view.show_graphs(latest[view.gpu_index], top)

    def _age_panels(self) -> None:
        """Tell each panel how late the next reading is (0 while it is not yet due)."""
        every = self._poll_interval_s()
        since = time.monotonic() - self._received_at
        late = max(since - every, 0.0)
        if late < self.LATE_AFTER_S:
            late = 0.0
        for view in self._views():
            view.age_by(late)

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        """GPU index of each panel shown, in display order."""
        return tuple(panel.gpu_index for panel in filtered(self.fleet, self.grid_filter).panels)

    async def watch_grid_filter(self, text: str) -> None:
        """Show the panels the new filter keeps."""
        await self._show(filtered(self.fleet, text))

    def watch_marked(self, marked: frozenset[int]) -> None:
        """Mark the marked panels."""
        for view in self._views():
            view.marked = view.gpu_index in marked

    def watch_fleet(self, fleet: FleetSnapshot) -> Awaitable[None] | None:
        """Hand each panel its part; when the set of GPUs shown changed, return the rebuild
        (Textual awaits a watcher's awaitable).

        Why not an async watcher: Textual schedules every awaited watcher through a fresh
        callback (a ``functools.partial`` whose signature it inspects, and a message), once a
        reading; the same GPUs as before, nearly every reading, need no await.
        """
        self._received_at = time.monotonic()
        mounted = self.is_mounted  # (the screen binds ``fleet`` before the grid is mounted)
        if mounted:
            self._expect_reading()
        shown = filtered(fleet, self.grid_filter)
        views = self._views()
        if tuple(view.gpu_index for view in views) != tuple(p.gpu_index for p in shown.panels):
            return self._show(shown)
        self._hand_out(views, shown)
        if mounted:
            self._graphs_if_due()  # at each reading: the graphs' cells complete as time passes
        return None

    async def _show(self, fleet: FleetSnapshot) -> None:
        """Rebuild the panels when the set of GPUs changed, then hand each its part."""
        views = self._views()
        wanted = tuple(p.gpu_index for p in fleet.panels)
        if tuple(view.gpu_index for view in views) != wanted:
            await self.remove_children()
            views = [GpuPanelView(index, id=f"gpu-{index}") for index in wanted]
            await self.mount_all(views)
            self._reshape()
        self._hand_out(views, fleet)
        if self.is_mounted:
            self._graphs_if_due()

    def _hand_out(self, views: list[GpuPanelView], fleet: FleetSnapshot) -> None:
        selected, marked = self.selected, self.marked
        for view, panel in zip(views, fleet.panels, strict=True):
            view.show(panel)
            # Set only what changed: a reactive's set costs Textual its validation and
            # bookkeeping even for the same value (two per panel per reading, a tenth of it).
            if view.selected != (is_selected := panel.gpu_index == selected):
                view.selected = is_selected
            if view.marked != (is_marked := panel.gpu_index in marked):
                view.marked = is_marked

    def watch_selected(self, selected: int) -> None:
        """Move the selection border."""
        for view in self._views():
            view.selected = view.gpu_index == selected

    def on_resize(self, event: events.Resize) -> None:
        """Recompute the columns for the new size."""
        self._reshape()

    def _reshape(self) -> None:
        """The shape for the room and the panels shown; the last row's panels share its width.

        Why the spans: seven panels in five columns left three empty panels' room in the
        second row (a band of nothing at 200x50); the grid counts ``last_row_columns`` and the
        last row's panels each span more of them (wider graphs: more history, nvitop's way).
        """
        views = self._views()
        shape = choose_shape(len(views), self.size.width, self.size.height)
        self.shape = shape
        columns, spans = last_row_columns(len(views), shape.columns)
        if self.styles.grid_size_columns != columns:
            self.styles.grid_size_columns = columns
        for view, span in zip(views, spans, strict=True):
            if view.styles.column_span != span:
                view.styles.column_span = span
        self.set_class(not shape.fits, "-overflow")


def panel_read(view: GpuPanelView) -> PanelRead | None:
    """What one panel draws from the history (None: no room for a sparkline or a graph)."""
    cells = view.spark_cells()
    if view.spare_rows() >= MIN_SPARE_ROWS:
        span = max(graph_span(view.size.width), spark_span(cells))
        return PanelRead(view.gpu_index, span, tuple(graph.metric for graph in GRAPHS))
    if cells > 0:
        return PanelRead(view.gpu_index, spark_span(cells), (SPARK_METRIC,))
    return None
