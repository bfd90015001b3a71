"""Per-GPU history in the panels: graphs in a full panel's spare rows (as nvitop fills its
screen: utilisation, memory, tok/s and running requests) and the tok/s sparkline of every panel,
each with its scale and the time it covers, from the fleet's history store.

The span grows with the room (nvitop's way): a graph's cell is about ``GRAPH_CELL_S`` and a
sparkline's about ``SPARK_CELL_S``, rounded down to a round span (``SPANS``), so a wider panel
shows more history, not the same ten minutes stretched. The grid reads the history
(``tui.history``, in a thread worker, once per completed cell: ``cells_due``) and a panel draws
from what was read: a graph per metric that fits (a label line with the newest value, the
scale's top and the span, over rows of block characters filled from 0), and the sparkline's
blocks, on one scale for every panel (``spark_top``: the GPUs are compared at a glance).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from textual.content import Content

from tui.history import TIERS, HistoryStore, Point
from tui.ui.format import SPARK_CHARS, short_num
from tui.ui.history.blocks import block_rows
from tui.ui.history.plot import columns
from tui.ui.history.ticks import value_ticks

SPANS = (60.0, 120.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 3600.0, 7200.0)
"""The spans a panel's history can cover: round ones, at most the finest tier's two hours. This
also bounds what a panel holds: at most its span over the finest bucket (1,440 points a metric
at two hours), reached once the console has run that long; then its memory stays flat."""
GRAPH_CELL_S = 16.0
"""About what one cell of a graph covers (ten minutes over a 40-wide panel, as before)."""
SPARK_CELL_S = 15.0
"""About what one cell of a sparkline covers."""
LEAST_GRAPH_S = 300.0
"""The shortest span a graph covers."""
FINEST_BUCKET_S = float(TIERS[0].bucket_s)
"""The history's finest bucket (``tui.history``'s first tier)."""
SETTLE_S = 10.0
"""How far the graphs' right edge lags the clock: the history's finest bucket (5 s) plus its
writer's interval (``tui.history.recorder.FLUSH_S``, 5 s). Why: a bucket is written in parts as
its samples arrive; with the edge this far back every bucket up to it is complete when read, so
one read per cell draws what later reads would (reads every 5 s drew most cells two or three
times as their last bucket filled)."""
MIN_SPARE_ROWS = 3
"""A graph needs a label line and at least two rows of blocks."""
SPARK_METRIC = "tok_s"
"""What the sparkline draws."""
SPARK_FLOOR = 100.0
"""The least top of the sparklines' shared scale."""


@dataclass(frozen=True, slots=True)
class Graph:
    """One metric a panel graphs."""

    metric: str
    """Its name in the history (``tui.history.samples.METRICS``)."""
    label: str
    """Its label on the panel."""
    floor: float
    """The least top of its axis."""
    unit: str = ""
    """Appended to its values."""
    ceiling: float | None = None
    """The highest value it can take (its axis is 0 .. this)."""


GRAPHS = (
    Graph("tok_s", "tok/s", 100.0),
    Graph("util", "util", 10.0, "%", ceiling=100.0),
    Graph("running", "running", 4.0),
    Graph("mem", "mem", 10.0, "%", ceiling=100.0),
)
"""The graphs, in the order a panel shows them (as many as fit): what a retune changes first."""
GRAPH_ROWS = 3
"""A graph's label and two rows of blocks (16 levels: a 20% change shows) when several share
the spare rows. Why not more: a noisy series changes every row it spans when the graph moves a
cell, and each such row goes to the terminal again (three rows a graph sent half as much again
as two, at 200x50 under load)."""


def round_span(cells: int, cell_s: float, least: float) -> float:
    """The longest round span (``SPANS``) of about ``cell_s`` a cell over ``cells``, at least
    ``least``."""
    wanted = max(cells, 1) * cell_s
    return max([least, *(s for s in SPANS if s <= wanted)])


def graph_span(width: int) -> float:
    """What the graphs of a panel ``width`` cells wide cover."""
    return round_span(width, GRAPH_CELL_S, LEAST_GRAPH_S)


def spark_span(cells: int) -> float:
    """What a sparkline of ``cells`` cells covers."""
    return round_span(cells, SPARK_CELL_S, SPANS[0])


def scale_num(value: float) -> str:
    """A scale's round top in few characters: ``2k``, ``1.5k``, ``500``, ``20M``."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def span_words(seconds: float) -> str:
    """``5m``, ``1h``, ``2h``."""
    return f"{seconds / 3600:g}h" if seconds >= 3600 else f"{seconds / 60:g}m"


@dataclass(frozen=True, slots=True)
class PanelRead:
    """What the grid reads for one panel."""

    gpu: int
    """The panel's GPU."""
    span_s: float
    """How far back (the longest of its graphs' and its sparkline's spans)."""
    metrics: tuple[str, ...]
    """The metrics (all the graphs' with room for graphs, else the sparkline's)."""


@dataclass(frozen=True, slots=True)
class PanelSeries:
    """One GPU's series, as read from the history."""

    start: float
    """time.time() of the oldest point wanted."""
    end: float
    """time.time() of the right edge (when read)."""
    points: Mapping[str, tuple[Point, ...]]
    """Each metric's points, oldest first."""


def read_series(
    store: HistoryStore, reads: Sequence[PanelRead], now: float
) -> dict[int, PanelSeries]:
    """Read what each panel draws (blocking).

    Args:
        store: The history.
        reads: One per panel.
        now: time.time() of the right edge.

    Returns:
        GPU -> its series (a GPU with no point at all is left out).
    """
    out = {}
    for read in reads:
        start = now - read.span_s
        points = {m: tuple(store.series(read.gpu, m, since=start)) for m in read.metrics}
        if any(points.values()):
            out[read.gpu] = PanelSeries(start, now, points)
    return out


def read_every_s(width: int, spark_cells: int, graphs: bool) -> float:
    """Seconds between reads of a panel's history: a graph's cell where it has graphs (its
    sparkline takes what the read brings: a cell of it may wait a few seconds more), else a
    sparkline's; never less than a bucket.

    Why not the finest of the two: a read and its drawing cost ~4 ms a panel; a sparkline's
    shorter cells nearly doubled the reads at 200x50.
    """
    if graphs:
        return max(graph_span(width) / max(width, 1), FINEST_BUCKET_S)
    return max(spark_span(spark_cells) / max(spark_cells, 1), FINEST_BUCKET_S)


def cells_due(every_s: Sequence[float], now: float) -> tuple[int, ...]:
    """Which cell each panel's right edge is in at ``now`` (lagged by ``SETTLE_S``).

    Args:
        every_s: Each panel's cell (``read_every_s``).
        now: time.time().

    Returns:
        One cell number per panel; the grid reads the history again when it changes (a graph
        moves only when a cell completes).
    """
    # A cell narrower than the history's finest bucket has no new data of its own: reading at
    # each would redraw every row each 3 s (measured on the H200 with one server: 0.66 -> 0.81
    # CPU-s/min), so ``read_every_s`` waits a bucket.
    return tuple(math.floor((now - SETTLE_S) / every) for every in every_s)


def _edge(end: float, span_s: float, cells: int) -> float:
    """The right edge: the last whole cell's end, on a fixed grid of time."""
    step = span_s / max(cells, 1)
    return math.floor(end / step) * step


def _values(
    series: PanelSeries, metric: str, span_s: float, cells: int
) -> tuple[float, list[float | None]]:
    end = _edge(series.end, span_s, cells)
    points = series.points.get(metric, ())
    return end, columns(points, end - span_s, end, cells, gap_s=30.0)


def drawn_key(series: PanelSeries, width: int, spare: int) -> tuple[object, ...]:
    """All that ``graph_lines`` draws from: the room, the right edge and the points up to it.

    Why: a graph moves only when a cell completes; a read with the same key (the grid's first,
    or one after a resize) draws the same lines, so the panel need not build them again.
    """
    span = graph_span(width)
    end = _edge(series.end, span, width)
    points = tuple(
        (metric, values[: bisect_right(values, end, key=lambda point: point[0])])
        for metric, values in sorted(series.points.items())
    )
    return (width, spare, end, span, points)


def graph_lines(series: PanelSeries, width: int, spare: int) -> list[Content]:
    """The graphs that fit in ``spare`` rows of a panel ``width`` cells wide.

    Args:
        series: The GPU's series.
        width: Cells per line.
        spare: Rows left under the panel's numbers.

    Returns:
        Up to ``spare`` lines: per graph, a label line (``tok/s 1400   max 2k · 10m``: the
        newest value, the scale's top, the span) and its rows of blocks filled from 0.

    The right edge is the last whole cell (on a fixed grid of time): reads within one cell's
    time draw the same cells. Why: with the edge at the moment of the read every read moved
    every point's column, so all seven panels resent all their graph rows.
    """
    if spare < MIN_SPARE_ROWS or width < 10:
        return []
    count = min(len(GRAPHS), max(1, spare // GRAPH_ROWS))
    rows = max(MIN_SPARE_ROWS - 1, spare // count - 1)
    span = graph_span(width)
    lines: list[Content] = []
    for graph in GRAPHS[:count]:
        _, values = _values(series, graph.metric, span, width)
        shown = [v for v in values if v is not None]
        high = graph.ceiling or value_ticks(max(shown, default=0.0), graph.floor, 1).high
        high = max(high, math.ceil(max(shown, default=0.0)))  # past it (faulty): still drawn
        last = f"{short_num(shown[-1])}{graph.unit}" if shown else "-"
        head = f"{graph.label} {last}"
        scale = f"max {scale_num(high)}{graph.unit} · {span_words(span)}"
        gap = max(1, width - len(head) - len(scale))
        lines.append(Content.assemble((head, "bold"), " " * gap, (scale, "dim")))
        lines += [Content.styled(row, "$success") for row in block_rows(values, high, rows)]
    return lines[:spare]


def spark_top(series: Mapping[int, PanelSeries], cells: Mapping[int, int]) -> float:
    """The sparklines' shared scale: a round top over every panel's values (one scale, so a
    canary and its controls compare at a glance).

    Args:
        series: GPU -> its series.
        cells: GPU -> its sparkline's cells.
    """
    top = 0.0
    for gpu, one in series.items():
        count = cells.get(gpu, 0)
        if count > 0:
            _, values = _values(one, SPARK_METRIC, spark_span(count), count)
            top = max([top, *(v for v in values if v is not None)])
    return value_ticks(top, SPARK_FLOOR, 1).high


def spark_text(series: PanelSeries, cells: int, top: float) -> str:
    """The sparkline: one block a cell over ``spark_span(cells)``, on the scale 0 .. ``top``;
    a cell with nothing recorded is blank, a recorded 0 the lowest block."""
    if cells <= 0:
        return ""
    _, values = _values(series, SPARK_METRIC, spark_span(cells), cells)
    last = len(SPARK_CHARS) - 1
    return "".join(
        " " if v is None else SPARK_CHARS[round(min(max(v, 0.0), top) / top * last)] for v in values
    )


def spark_scale(top: float, cells: int, short: bool) -> str:
    """The sparkline's scale and span: ``max 2k · 5m`` (``2k·5m`` where room is short)."""
    span = span_words(spark_span(cells))
    return f"{scale_num(top)}·{span}" if short else f"max {scale_num(top)} · {span}"


@dataclass(frozen=True, slots=True)
class SparkDrawn:
    """A panel's sparkline as drawn, and what it was drawn from."""

    series: PanelSeries
    """The history read it shows."""
    cells: int
    """Its cells."""
    top: float
    """The shared scale's top."""
    full: bool
    """Drawn for the full layout (the scale's long words)."""
    drawn: tuple[str, str]
    """Its blocks and its scale."""

    def draws_same(self, series: PanelSeries, top: float) -> bool:
        """Whether ``series`` on the scale ``top`` draws these very blocks."""
        return top == self.top and spark_text(series, self.cells, top) == self.drawn[0]


def drawn_spark(
    held: SparkDrawn | None, series: PanelSeries, cells: int, top: float, full: bool
) -> SparkDrawn:
    """The sparkline of ``series``: ``held`` when it was drawn from the same read in the same
    room (a panel's lines are built at every reading; the sparkline changes once per read)."""
    if (
        held is not None
        and held.series is series
        and (held.cells, held.top, held.full)
        == (
            cells,
            top,
            full,
        )
    ):
        return held
    drawn = (spark_text(series, cells, top), spark_scale(top, cells, short=not full))
    return SparkDrawn(series, cells, top, full, drawn)
