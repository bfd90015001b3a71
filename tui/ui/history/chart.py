"""``HistoryChart``: a time series with a value axis, a time axis and retune markers.

At 4 rows or more: the braille line with its axis labels at the left (top, middle, bottom), a
baseline with a ▲ under each retune, and the time labels ('-1h', '-30m', 'now'). Lower than
that (a panel's graph): the line and its top and bottom labels only. The data comes in as one
``ChartData`` (the owner reads the history in a thread and sets it); drawing reads no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from tui.ui.history.plot import (
    Point,
    axis_for,
    braille_rows,
    columns,
    mark_columns,
    row_of,
    time_labels,
)


@dataclass(frozen=True, slots=True)
class ChartRange:
    """A span a chart can show."""

    label: str
    """Its name on screen: '10m', '1h', '6h', 'job'."""
    seconds: float | None
    """How far back from now; None: since the history's first sample (the whole job)."""


RANGES: tuple[ChartRange, ...] = (
    ChartRange("10m", 600.0),
    ChartRange("1h", 3600.0),
    ChartRange("6h", 6 * 3600.0),
    ChartRange("job", None),
)
"""The ranges offered, shortest first."""


@dataclass(frozen=True, slots=True)
class ChartData:
    """Everything one chart shows."""

    points: tuple[Point, ...]
    """(time.time(), value), oldest first."""
    start: float
    """Time at the left edge."""
    end: float
    """Time at the right edge."""
    floor: float = 1.0
    """Smallest span of the value axis (``tui.history.Metric.floor``)."""
    marks: tuple[float, ...] = ()
    """Times of the retunes (▲ under the line)."""
    end_label: str = "now"
    """What the right edge is called."""
    gap_s: float = 30.0
    """Longest stretch without data still drawn as a line; longer ones are gaps."""


LINE_STYLE = "$accent"
AXIS_STYLE = "$text-muted"
MARK_STYLE = "bold $warning"


def chart_lines(data: ChartData, width: int, height: int) -> list[Content]:
    """The chart as ``height`` lines of ``width`` cells.

    Args:
        data: What to show.
        width: Cells across.
        height: Rows (4 or more for the time axis and the markers).

    Returns:
        The lines, top first.
    """
    full = height >= 4
    rows = height - 2 if full else height
    shown = [v for t, v in data.points if data.start <= t <= data.end]
    axis = axis_for(shown, data.floor)
    top, middle, bottom = axis.labels()
    label_w = max(len(top), len(middle), len(bottom)) + 1
    plot_w = max(1, width - label_w)
    values = columns(data.points, data.start, data.end, plot_w * 2, data.gap_s)
    plot = braille_rows(values, axis, max(1, rows))
    labels = {0: top, rows - 1: bottom}
    middle_row = row_of((axis.high + axis.low) / 2, axis, rows)
    if rows >= 3 and middle_row not in labels:
        labels[middle_row] = middle  # on the row its value's dots land on
    lines = [
        Content.assemble(
            (labels.get(r, "").rjust(label_w - 1) + " ", AXIS_STYLE), (plot[r], LINE_STYLE)
        )
        for r in range(rows)
    ]
    if full:
        marks = mark_columns(data.marks, data.start, data.end, plot_w)
        baseline = [("▲", MARK_STYLE) if x in marks else ("─", AXIS_STYLE) for x in range(plot_w)]
        lines.append(Content.assemble(" " * label_w, *baseline))
        times = time_labels(data.start, data.end, plot_w, data.end_label)
        lines.append(Content.styled(" " * label_w + times, AXIS_STYLE))
    return lines


class HistoryChart(Widget):
    """Draws ``data`` (None: ``empty`` instead). Its height decides the layout (see module)."""

    DEFAULT_CSS = """
    HistoryChart {
        height: 6;
    }
    """

    data: reactive[ChartData | None] = reactive(None)
    """What to show."""
    empty: reactive[str] = reactive("no history yet")
    """Shown instead of a chart when there is no data."""

    def render(self) -> Content:
        """The chart, or the empty line."""
        width, height = self.content_size
        data = self.data
        if data is None or not data.points or width < 8 or height < 1:
            return Content.styled(self.empty, AXIS_STYLE)
        return Content("\n").join(chart_lines(data, width, height))
