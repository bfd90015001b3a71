"""``HistoryChart``: a rate over time, with its axes, the operations that changed servers, and
the last operation's before and after windows shaded.

From the top: the plot (columns of block characters filled from 0, ``tui.ui.history.blocks``)
with round value ticks at the left (``tui.ui.history.ticks``); the axis line, with a ``┬`` under
each time tick and a ``▲`` under each operation; the time labels (``-10m`` .. ``now``); and,
when there is room, the operations' names (``canary sim-m120 GPU 0``) placed at their markers,
the newest first. A column with a recorded value is never blank, even at 0; a blank column is a
time nothing was recorded (no console ran). The data comes in as one ``ChartData`` (the owner
reads the history in a thread and sets it); drawing reads no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from tui.ops.marks import OperationMark, Window
from tui.ui.history.blocks import block_rows
from tui.ui.history.plot import Point, columns
from tui.ui.history.ticks import place_labels, time_ticks, value_ticks


@dataclass(frozen=True, slots=True)
class ChartRange:
    """A span a chart can show."""

    label: str
    """Its name on screen: 'job', '5m', '1h', ..."""
    seconds: float | None
    """How far back from now; None: fitted to the job (since it started)."""


JOB = ChartRange("job", None)
"""The job's whole life so far: a five-minute job fills the width as a 41-hour one does."""

RANGES: tuple[ChartRange, ...] = (
    JOB,
    ChartRange("5m", 300.0),
    ChartRange("15m", 900.0),
    ChartRange("1h", 3600.0),
    ChartRange("6h", 6 * 3600.0),
    ChartRange("2d", 2 * 86400.0),
)
"""The ranges offered (the job's first: the default)."""

MIN_JOB_S = 60.0
"""The shortest span the job's range shows (a job a few seconds old is a minute)."""


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
    """The least top of the value axis (``tui.history.Metric.floor``)."""
    marks: tuple[OperationMark, ...] = ()
    """The operations that changed servers (▲ under the plot, named below it)."""
    end_label: str = "now"
    """What the right edge is called."""
    gap_s: float = 30.0
    """Longest stretch without data still drawn as data; longer ones are blank."""


LINE_STYLE = "$accent"
"""The top cell of each column: the value's edge, a line across the chart."""
FILL_STYLE = "$accent 45%"
"""The cells under it: the area, quieter than its edge."""
WINDOW_LINE_STYLE = "$primary"
WINDOW_FILL_STYLE = "$primary 50%"
"""The columns inside the last operation's windows, in another colour."""
AXIS_STYLE = "$text-muted"
MARK_STYLE = "bold $warning"
SHADE = "on $boost"
"""The background of the columns in the last operation's windows."""
SHADE_WORD_STYLE = "$text-muted"
LABEL_ROWS_FROM = 7
"""A chart this high or more names its operations (one row; two from ``TWO_LABEL_ROWS_FROM``)."""
TWO_LABEL_ROWS_FROM = 14


def _column(t: float, data: ChartData, width: int) -> int:
    return min(width - 1, max(0, int((t - data.start) / (data.end - data.start) * width)))


def shaded(data: ChartData, width: int) -> dict[int, Window]:
    """The columns of the newest operation's windows (within the range) -> the window."""
    inside = [m for m in data.marks if m.windows and data.start <= m.t <= data.end]
    if not inside or data.end <= data.start:
        return {}
    out: dict[int, Window] = {}
    for window in inside[-1].windows:
        if window.end < data.start or window.start > data.end:
            continue
        first = _column(max(window.start, data.start), data, width)
        last = _column(min(window.end, data.end), data, width)
        out.update(dict.fromkeys(range(first, last + 1), window))
    return out


def _cell_style(top: bool, windowed: bool) -> str:
    if windowed:
        return f"{WINDOW_LINE_STYLE if top else WINDOW_FILL_STYLE} {SHADE}"
    return LINE_STYLE if top else FILL_STYLE


def _plot_row(
    text: str, above: str | None, shade: dict[int, Window], words: dict[int, str]
) -> Content:
    """One plot row: the blocks (a column's top cell brighter than the fill under it; another
    colour and a shaded background inside a window), a window's word in its blank cells."""
    parts: list[tuple[str, str]] = []
    for x, char in enumerate(text):
        if x in words and char == " ":
            part = (words[x], f"{SHADE_WORD_STYLE} {SHADE}")
        elif char == " ":
            part = (char, SHADE if x in shade else "")
        else:
            top = above is None or above[x] == " "
            part = (char, _cell_style(top, x in shade))
        if parts and parts[-1][1] == part[1]:
            parts[-1] = (parts[-1][0] + part[0], part[1])
        else:
            parts.append(part)
    return Content.assemble(*parts)


def _shade_words(shade: dict[int, Window], top_row: str) -> dict[int, str]:
    """``before`` / ``after`` over the first columns of their windows, where the top row is
    blank and the window is wide enough."""
    words: dict[int, str] = {}
    for window in {id(w): w for w in shade.values()}.values():
        cols = sorted(x for x, w in shade.items() if w is window)
        text = window.name
        if len(cols) >= len(text) and all(top_row[x] == " " for x in cols[: len(text)]):
            words.update({cols[i]: char for i, char in enumerate(text)})
    return words


def _marker_labels(
    marks: list[tuple[int, OperationMark]], width: int, rows: int
) -> list[list[tuple[int, str]]]:
    """Each row's (column, text) of the operations' names, the newest placed first: at the
    marker's column (or ending there near the right edge), where they touch nothing placed."""
    placed: list[list[tuple[int, str]]] = [[] for _ in range(rows)]
    for column, mark in reversed(marks):
        text = mark.label[:width]
        left = column if column + len(text) <= width else max(0, column - len(text) + 1)
        for row in placed:
            clear = all(left + len(text) + 1 <= x or x + len(t) + 1 <= left for x, t in row)
            if clear:
                row.append((left, text))
                break
    return placed


def chart_lines(data: ChartData, width: int, height: int) -> list[Content]:
    """The chart as at most ``height`` lines of ``width`` cells.

    Args:
        data: What to show.
        width: Cells across.
        height: Rows (4 or more for the axis line and the time labels).

    Returns:
        The lines, top first.
    """
    full = height >= 4
    inside = [m for m in data.marks if data.start <= m.t <= data.end]
    label_rows = 0
    if inside and height >= LABEL_ROWS_FROM:
        label_rows = 2 if height >= TWO_LABEL_ROWS_FROM and len(inside) > 1 else 1
    rows = height - 2 - label_rows if full else height
    shown = [v for t, v in data.points if data.start <= t <= data.end]
    ticks = value_ticks(max(shown, default=0.0), data.floor, rows)
    labels = ticks.labels(rows)
    label_w = max(len(text) for text in labels.values()) + 1
    plot_w = max(1, width - label_w)
    values = columns(data.points, data.start, data.end, plot_w, data.gap_s)
    plot = block_rows(values, ticks.high, rows)
    shade = shaded(data, plot_w)
    words = _shade_words(shade, plot[0]) if shade else {}
    lines = [
        Content.assemble(
            (labels.get(r, "").rjust(label_w - 1) + " ", AXIS_STYLE),
            _plot_row(plot[r], plot[r - 1] if r else None, shade, words if r == 0 else {}),
        )
        for r in range(rows)
    ]
    if not full:
        return lines
    marked = [(_column(m.t, data, plot_w), m) for m in inside]
    columns_marked = {column for column, _ in marked}
    tick_labels = time_ticks(data.start, data.end, plot_w, data.end_label)
    axis: list[tuple[str, str]] = [(labels.get(rows, "0").rjust(label_w - 1) + " ", AXIS_STYLE)]
    for x in range(plot_w):
        if x in columns_marked:
            axis.append(("▲", MARK_STYLE))
        else:
            axis.append(("┬" if x in tick_labels and x < plot_w - 1 else "─", AXIS_STYLE))
    lines.append(Content.assemble(*axis))
    lines.append(Content.styled(" " * label_w + place_labels(tick_labels, plot_w), AXIS_STYLE))
    for row in _marker_labels(marked, plot_w, label_rows):
        text = [" "] * plot_w
        for left, words_ in row:
            text[left : left + len(words_)] = words_
        lines.append(Content.styled(" " * label_w + "".join(text), MARK_STYLE))
    return lines


class HistoryChart(Widget):
    """Draws ``data`` (None: ``empty`` instead) in the room it is given (see module)."""

    DEFAULT_CSS = """
    HistoryChart {
        height: 8;
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
