"""One GPU and the server on it, in a bordered panel that adapts to the room it gets."""

from __future__ import annotations

from dataclasses import replace

from rich.cells import cell_len
from textual import events
from textual.content import Content
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import Visual
from textual.widget import Widget

from tui import plain
from tui.fleet.snapshot import GpuPanel, ServerState
from tui.ui.format import fit
from tui.ui.grid.layout import FULL_PANEL_HEIGHT, FULL_PANEL_WIDTH
from tui.ui.grid.line_diff import changed_span
from tui.ui.grid.panel_graphs import (
    SPARK_METRIC,
    PanelSeries,
    SparkDrawn,
    drawn_key,
    drawn_spark,
    graph_lines,
)
from tui.ui.grid.panel_lines import Spark, compact_lines, full_lines, spark_cells
from tui.ui.grid.panel_rows import FramedRows
from tui.ui.grid.panel_strips import StripDrawer
from tui.ui.messages import PanelOpened, PanelSelected

ALARMING = frozenset(
    {ServerState.FAILED, ServerState.CRASHED, ServerState.STUCK, ServerState.UNKNOWN}
)
"""States whose panel's border turns to the error colour."""


def _is_error_prose(line: Content) -> bool:
    """A line of ``error_line``'s text (all of it in $error), continued on the next lines."""
    return len(line.spans) == 1 and line.spans[0].style == "$error" and line.spans[0].start == 0


class GpuPanelView(Widget):
    """A panel of the grid. The grid sets ``panel`` and ``selected``; clicks post messages up.

    A new reading repaints only the cells whose text changed (see ``changed_span``), not the
    panel: the grid gets a new snapshot every second and most of it is the same.
    """

    DEFAULT_CSS = """
    GpuPanelView {
        border: round $panel-lighten-2;
        border-title-color: $text;
        border-title-style: bold;
        height: 1fr;
        width: 1fr;
        padding: 0 0;
    }
    GpuPanelView.-marked {
        border: round $warning;
        border-title-color: $warning;
    }
    GpuPanelView.-selected {
        border: heavy $accent;
    }
    GpuPanelView.-failed {
        border-title-color: $error;
    }
    """

    panel: reactive[GpuPanel | None] = reactive(None, layout=False, repaint=False)
    """The GPU and server this panel shows (the watcher repaints what changed)."""
    selected: reactive[bool] = reactive(False)
    """Whether this is the selected panel (keyboard focus of the grid)."""
    marked: reactive[bool] = reactive(False)
    """Whether this GPU is marked (space) for the next operation: ``●`` in the title."""

    def __init__(self, gpu_index: int, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.gpu_index = gpu_index
        """The GPU this panel is for; fixed for the panel's life."""
        self._title = ""
        self._profile = ""
        """The profile label in the bottom border (what the server runs)."""
        self._shown: list[Content] | None = None
        """The lines last rendered (None: nothing yet)."""
        self._shown_size = (0, 0)
        """The size they were rendered for (another size lays them out anew)."""
        self._strips: list[Strip | None] = []
        """Each shown line as rendered cells; None until asked for (or after it changed)."""
        self._strip_style: VisualStyle | None = None
        """The style the strips were rendered in."""
        self._drawer = None if plain.off("strips") else StripDrawer()
        """Its lines drawn as cells, kept for when they show again (None: each drawn by
        Textual's ``Visual.to_strips``)."""
        self.late_s = 0.0
        """Seconds since the grid got the snapshot this panel shows (set with ``age_by``)."""
        self.graphs: PanelSeries | None = None
        """This GPU's history (``show_graphs``): graphed in the spare rows of a full panel,
        and its tok/s in every panel's sparkline."""
        self.spark_top = 0.0
        """The sparklines' shared scale (``panel_graphs.spark_top``)."""
        self._spark_drawn: SparkDrawn | None = None
        """The sparkline last drawn, and what from."""
        self._line_diff = not plain.off("linediff")
        """Whether a reading repaints only the cells whose text changed (else the panel)."""
        self._render_size: Size | None = None
        """The size while ``render_lines`` renders (None otherwise)."""
        self._rows = None if plain.off("rows") else FramedRows()
        """Its content rows framed cheaply (``panel_rows``; None: Textual's own rows)."""
        self._fitted: dict[tuple[object, ...], Content] = {}
        """The lines ``_fit`` cut at the last reading, by text, spans and width."""
        self._fitting: dict[tuple[object, ...], Content] = {}
        """Those it cuts at this one."""
        self._graphs_drawn: (
            tuple[PanelSeries, int, int, tuple[object, ...], list[Content]] | None
        ) = None
        """The series last drawn, the width and rows it was drawn in, its ``drawn_key`` and
        the lines."""

    def spare_rows(self) -> int:
        """Rows a full panel leaves under its numbers (0 in the compact layout)."""
        if self.panel is None or not self._full():
            return 0
        return self.size.height - len(full_lines(self.panel, self.size.width, self.late_s))

    def has_room_for_graphs(self, size: Size | None = None) -> bool:
        """Whether the panel is in the full layout (where spare rows may hold graphs) at its
        size (``size``: the caller's look-up of it)."""
        return self.panel is not None and self._full(size)

    def spark_cells(self) -> int:
        """Cells of this panel's sparkline in its current layout (what the grid reads for)."""
        return spark_cells(self.size.width, self._full())

    def show_graphs(self, series: PanelSeries | None, spark_top: float = 0.0) -> None:
        """Draw ``series`` (None: none): the graphs in the spare rows, the sparkline on the
        shared scale ``spark_top``; repaint what changed (a series that draws what is shown
        already, no cell completed since, changes nothing)."""
        old, old_top = self.graphs, self.spark_top
        self.graphs, self.spark_top = series, spark_top
        if series is None or old is None or spark_top != old_top:
            self._repaint_changes()
            return
        graphs, spark = self._graphs_drawn, self._spark_drawn
        if graphs is not None and drawn_key(series, graphs[1], graphs[2]) != graphs[3]:
            self._repaint_changes()
            return
        if spark is not None and not spark.draws_same(series, spark_top):
            self._repaint_changes()
            return
        # the same cells: only the series they are drawn from is newer
        if graphs is not None:
            self._graphs_drawn = (series, *graphs[1:])
        if spark is not None:
            self._spark_drawn = replace(spark, series=series)

    def _drawn_spark(self, width: int, full: bool) -> Spark | None:
        """The sparkline from the history with its scale, drawn again only when the series,
        the cells or the scale changed (not at every reading); None without a series."""
        series = self.graphs
        cells = spark_cells(width, full)
        if series is None or cells == 0 or self.spark_top <= 0:
            return None
        if not series.points.get(SPARK_METRIC):
            return None
        self._spark_drawn = drawn_spark(self._spark_drawn, series, cells, self.spark_top, full)
        return self._spark_drawn.drawn

    def _full(self, size: Size | None = None) -> bool:
        width, height = self.size if size is None else size
        return width >= FULL_PANEL_WIDTH - 2 and height >= FULL_PANEL_HEIGHT - 2

    def age_by(self, late_s: float) -> None:
        """The snapshot is ``late_s`` seconds old: repaint the values that aged past a bound.

        The lines are a function of the panel, its size, ``late_s`` and the graphs: the same
        age (0 while the next reading is not yet due: nearly every tick) changes nothing, so
        the lines are not built again.
        """
        if late_s == self.late_s:
            return
        self.late_s = late_s
        self._repaint_changes()

    def show(self, panel: GpuPanel) -> None:
        """A new reading of this panel: its values are as old as the reading (``late_s`` 0)."""
        if self.late_s and panel == self.panel:
            self.age_by(0.0)  # the same values, no longer late
            return
        self.late_s = 0.0
        self.panel = panel

    def watch_panel(self, panel: GpuPanel | None) -> None:
        """Retitle and restyle when they change; repaint the cells whose text changed."""
        name = "" if panel is None or panel.gpu is None else f" · {panel.gpu.name}"
        where = f"{panel.node} GPU {panel.local_index}" if panel is not None and panel.node else ""
        shared = panel.on_device if panel is not None else ""
        title = f"{'● ' if self.marked else ''}{where or f'GPU {self.gpu_index}'}{shared}{name}"
        if title != self._title:  # setting border_title repaints the whole panel
            self._title = title
            self.border_title = title
        server = panel.server if panel is not None else None
        profile = server.profile.label() if server is not None and server.profile else ""
        if profile != self._profile:
            self._profile = profile
            self.border_subtitle = profile
        failed = panel is not None and panel.server is not None and panel.server.state in ALARMING
        if failed != self.has_class("-failed"):  # set_class checks the name at every call
            self.set_class(failed, "-failed")
        self._repaint_changes()

    def watch_selected(self, selected: bool) -> None:
        """Mark the selection with the border."""
        self.set_class(selected, "-selected")

    def watch_marked(self, marked: bool) -> None:
        """Mark a marked GPU in its title (and border, when not the selected one)."""
        self.set_class(marked, "-marked")
        self.watch_panel(self.panel)

    def lines(self, size: Size | None = None) -> list[Content]:
        """The panel's lines for its current size (``size``: the caller's look-up of it): full
        layout when there is room, else compact."""
        panel = self.panel
        if panel is None:
            return [Content.styled("waiting for the first reading", "$text-muted")]
        size = self.size if size is None else size
        width, height = size
        full = self._full(size)
        drawn = self._drawn_spark(width, full)
        late = self.late_s
        lines = (
            full_lines(panel, width, late, drawn)
            if full
            else compact_lines(panel, width, height, late, drawn)
        )
        # Never a cut number (fit elides whole words); an error's prose is cut at the width on
        # purpose: its next lines continue it.
        shown = [
            line.truncate(width) if _is_error_prose(line) else self._fit(line, width)
            for line in lines[:height]
        ]
        self._fitted, self._fitting = self._fitting, {}
        if full and self.graphs is not None and height > len(lines):
            shown += self._graph_lines(self.graphs, width, height - len(lines))
        return shown

    def _fit(self, line: Content, width: int) -> Content:
        """``fit``, cut again only when the line is not the one cut at the last reading.

        Why: a line too long for the panel is nearly always the same one each second (the
        note of a GPU with no reading: six of seven panels with seven servers on one GPU), and
        cutting it at every reading was a fifth of building the panels' lines. The same cut
        object each time is also what ``changed_span`` passes over at once.
        """
        if cell_len(line.plain) <= width:
            return line
        key = (line.plain, tuple(line.spans), width)
        cut = self._fitted.get(key)
        if cut is None:
            cut = fit(line, width)
        self._fitting[key] = cut
        return cut

    def _graph_lines(self, series: PanelSeries, width: int, spare: int) -> list[Content]:
        """``graph_lines``, drawn again only when what they draw from changed (``drawn_key``).

        Why: the series change once per graph cell while the panel's lines are built at every
        reading; drawing the braille rows each time was half of building a full panel.
        """
        drawn = self._graphs_drawn
        if drawn is not None and drawn[0] is series and drawn[1:3] == (width, spare):
            return list(drawn[4])  # the same series in the same room
        key = drawn_key(series, width, spare)
        if drawn is not None and drawn[3] == key:
            lines = drawn[4]
        else:
            # fitted once here, not at every reading; the same objects each time, which
            # ``changed_span`` passes over at once
            lines = [fit(line, width) for line in graph_lines(series, width, spare)]
        self._graphs_drawn = (series, width, spare, key, lines)
        return list(lines)

    def _repaint_changes(self) -> None:
        shown = self._shown
        size = self.size  # one look-up: ``size`` finds the widget on the screen
        if shown is None or not size or self._shown_size != tuple(size):
            self._shown = None
            self.refresh()
            return
        lines = self.lines(size)
        blank = Content("")
        strips = self._strips + [None] * (len(lines) - len(self._strips))
        changed = []
        for y in range(max(len(shown), len(lines))):
            old = shown[y] if y < len(shown) else blank
            new = lines[y] if y < len(lines) else blank
            span = changed_span(old, new)
            if span is not None:
                if y < len(strips):
                    strips[y] = None
                changed.append(Region(span[0], y, span[1] - span[0], 1))
        self._shown, self._strips = lines, strips[: len(lines)]
        if changed and not self._line_diff:  # GPUFLEET_PLAIN=linediff: the whole panel anew
            self._strips = [None] * len(lines)
            self.refresh()
        elif changed:
            # One refresh for all of them: each call costs Textual its own bookkeeping (the
            # content offset, cleared caches, a wake-up of the screen: see ``refresh``).
            self.refresh(*changed)

    def render_lines(self, crop: Region) -> list[Strip]:
        """The content rows framed by ``FramedRows``, the border rows Textual's own, with the
        size looked up once for the rows it renders (``render_line``)."""
        self._render_size = self.size
        try:
            if self._rows is None:
                return super().render_lines(crop)
            return self._rows.render(self, crop, super().render_lines)
        finally:
            self._render_size = None

    def render_line(self, y: int) -> Strip:
        """One line of the panel; only lines whose text changed are rendered again.

        Why: Textual renders a whole widget again when any region of it is refreshed; a panel
        changes two or three of its lines a second, and rendering all of them was most of the
        console's drawing cost.
        """
        # ``size`` finds the widget on the screen: once per render, not once per row
        width, height = self._render_size or self.size
        size = (width, height)
        style = self.visual_style  # a new object after any CSS or theme change
        if self._shown is None or self._shown_size != size or style is not self._strip_style:
            if style is not self._strip_style and self._drawer is not None:
                self._drawer.forget()
            self._shown, self._shown_size = self.lines(), size
            self._strips, self._strip_style = [None] * len(self._shown), style
        if y >= len(self._shown):
            return Strip.blank(size[0], style.rich_style)
        strip = self._strips[y]
        if strip is None:
            line = self._shown[y]
            if self._drawer is None:
                strip = Visual.to_strips(self, line, size[0], 1, style)[0]
            else:
                strip = self._drawer.drawn(line, style)
            self._strips[y] = strip
        return strip

    def render(self) -> Content:
        """The lines, every one cropped to the width (what ``render_line`` shows, as one)."""
        return Content("\n").join(self.lines())

    def on_click(self, event: events.Click) -> None:
        """A click selects this panel; a double click opens its detail."""
        event.stop()
        self.post_message(PanelSelected(self.gpu_index))
        if event.chain == 2:
            self.post_message(PanelOpened(self.gpu_index))
