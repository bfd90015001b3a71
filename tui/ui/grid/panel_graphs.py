"""Per-GPU graphs in a panel's spare rows (as nvitop fills its screen): utilisation, memory,
tok/s and running requests over the last ``WINDOW_S``, from the fleet's history store.

At 200x50 each of the seven panels shows its nine lines over 13 empty rows; the grid reads the
history (``tui.history``, in a thread worker, once per completed cell: ``cells_due``) for the
panels that have room, and a panel draws one graph per metric that fits: a label line (the
newest value and the axis' top) over braille rows (``tui.ui.history.plot``).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from textual.content import Content

from tui.history import TIERS, HistoryStore, Point
from tui.ui.format import short_num
from tui.ui.history.plot import axis_for, braille_rows, columns

WINDOW_S = 600.0
"""What the graphs show: the last ten minutes."""
FINEST_BUCKET_S = float(TIERS[0].bucket_s)
"""The history's finest bucket (``tui.history``'s first tier)."""
SETTLE_S = 10.0
"""How far the graphs' right edge lags the clock: the history's finest bucket (5 s) plus its
writer's interval (``tui.history.recorder.FLUSH_S``, 5 s). Why: a bucket is written in parts as
its samples arrive; with the edge this far back every bucket up to it is complete when read, so
one read per cell draws what later reads would (reads every 5 s drew most cells two or three
times as their last bucket filled)."""
MIN_SPARE_ROWS = 3
"""A graph needs a label line and at least two rows of dots."""


@dataclass(frozen=True, slots=True)
class Graph:
    """One metric a panel graphs."""

    metric: str
    """Its name in the history (``tui.history.samples.METRICS``)."""
    label: str
    """Its label on the panel."""
    floor: float
    """The smallest span of its axis."""
    unit: str = ""
    """Appended to its values."""
    ceiling: float | None = None
    """The highest value it can take (its axis stops there)."""


GRAPHS = (
    Graph("util", "util", 10.0, "%", ceiling=100.0),
    Graph("mem", "mem", 10.0, "%", ceiling=100.0),
    Graph("tok_s", "tok/s", 100.0),
    Graph("running", "running", 4.0),
)
"""The graphs, in the order a panel shows them (as many as fit)."""


@dataclass(frozen=True, slots=True)
class PanelSeries:
    """One GPU's graphed series, as read from the history."""

    start: float
    """time.time() of the graphs' left edge."""
    end: float
    """time.time() of their right edge (when read)."""
    points: Mapping[str, tuple[Point, ...]]
    """Each metric's points, oldest first."""


def read_series(store: HistoryStore, gpus: Sequence[int], now: float) -> dict[int, PanelSeries]:
    """Read every graphed metric of these GPUs over the last ``WINDOW_S`` (blocking).

    Args:
        store: The history.
        gpus: The GPUs whose panels have room for graphs.
        now: time.time() of the right edge.

    Returns:
        GPU -> its series (a GPU with no point at all is left out).
    """
    start = now - WINDOW_S
    out = {}
    for gpu in gpus:
        points = {g.metric: tuple(store.series(gpu, g.metric, since=start)) for g in GRAPHS}
        if any(points.values()):
            out[gpu] = PanelSeries(start, now, points)
    return out


def cell_s(width: int) -> float:
    """Seconds of one cell (two dot columns) of a graph ``width`` cells wide."""
    return WINDOW_S / max(width, 1)


def cells_due(widths: Sequence[int], now: float) -> tuple[int, ...]:
    """Which cell each graph width's right edge is in at ``now`` (lagged by ``SETTLE_S``).

    Args:
        widths: The panels' widths, in cells.
        now: time.time().

    Returns:
        One cell number per width; the grid reads the history again when it changes (a graph
        moves only when a cell completes: ``graph_lines``).
    """
    # A cell narrower than the history's finest bucket (one wide panel: 600 s over 200 cells
    # is 3 s) has no new data of its own: reading at each would redraw every graph row each
    # 3 s (measured on the H200 with one server: 0.66 -> 0.81 CPU-s/min), so reads wait a bucket.
    return tuple(
        math.floor((now - SETTLE_S) / max(cell_s(width), FINEST_BUCKET_S)) for width in widths
    )


def _edge(series: PanelSeries, width: int) -> float:
    """The graphs' right edge: the last whole cell's (two dot columns) end."""
    step = 2 * (series.end - series.start) / (width * 2) if width > 0 else 0.0
    return math.floor(series.end / step) * step if step > 0 else series.end


def drawn_key(series: PanelSeries, width: int, spare: int) -> tuple[object, ...]:
    """All that ``graph_lines`` draws from: the room, the right edge and the points up to it.

    Why: a graph moves only when a cell completes (about every 16 s at 200x50); a read with the
    same key (the grid's first, or one after a resize) draws the same lines, so the panel need
    not build its lines and diff them again.
    """
    end = _edge(series, width)
    points = tuple(
        (metric, values[: bisect_right(values, end, key=lambda point: point[0])])
        for metric, values in sorted(series.points.items())
    )
    return (width, spare, end, series.end - series.start, points)


def graph_lines(series: PanelSeries, width: int, spare: int) -> list[Content]:
    """The graphs that fit in ``spare`` rows of a panel ``width`` cells wide.

    Args:
        series: The GPU's series.
        width: Cells per line.
        spare: Rows left under the panel's numbers.

    Returns:
        Up to ``spare`` lines: per graph, a label line and its rows of dots.

    The right edge is the last whole cell (two dot columns of ``WINDOW_S / (2 * width)``
    each, on a fixed grid of time): reads within one cell's time draw the same dots. Why:
    with the edge at the moment of the read every 5 s read moved every point's column, so all
    seven panels resent all their graph rows (the most of the console's bytes at 200x50);
    now a graph moves a whole cell (about 16 s at 200x50) when one is complete.
    """
    count = min(len(GRAPHS), spare // MIN_SPARE_ROWS)
    if count == 0 or width < 10:
        return []
    rows = max(MIN_SPARE_ROWS - 1, spare // count - 1)
    dots = width * 2
    end = _edge(series, width)
    lines: list[Content] = []
    for graph in GRAPHS[:count]:
        points = series.points.get(graph.metric, ())
        values = columns(points, end - (series.end - series.start), end, dots, gap_s=30.0)
        shown = [v for v in values if v is not None]
        axis = axis_for(shown, graph.floor, graph.ceiling)
        last = f"{short_num(shown[-1])}{graph.unit}" if shown else "-"
        head = f"{graph.label} {last}"
        scale = f"max {short_num(axis.high)}{graph.unit} · 10m"
        gap = max(1, width - len(head) - len(scale))
        lines.append(Content.assemble((head, "bold"), " " * gap, (scale, "dim")))
        lines += [Content.styled(row, "$success") for row in braille_rows(values, axis, rows)]
    return lines[:spare]
