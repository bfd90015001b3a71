"""``CandidateChart``: each candidate's measured throughput beside its control's, with axes.

One group of two columns per measured candidate, the canary's (its candidate) and the
control's (the incumbent the other GPUs ran over the same seconds), filled from 0 with eighth
blocks (``tui.ui.history.blocks``: a braille line, or a column of one colour, read as faint
specks or a white square in a browser's terminal), in two colours; round value ticks at the
left (``tui.ui.history.ticks``); under the axis each group's candidate number (``#15``) and its
verdict (``+`` better, ``-`` worse, ``=`` no measurable difference, ``?`` not measured). The
candidate being measured is drawn from its latest look (``…``). The groups widen to fill the
room (at most ``MAX_BAR`` cells a column) and, when they do not all fit, the newest are kept.

The old plot gave each candidate six cells and no axis: one candidate drew a 6-column white
square in the browser (46x57 px), two charts stacked with no scale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from tui.ui.history.blocks import block_rows
from tui.ui.history.ticks import place_labels, value_ticks

MAX_BAR = 4
"""Most cells one column (a canary's or a control's) takes."""
CANARY_STYLE = "$accent"
CONTROL_STYLE = "$primary"
AXIS_STYLE = "$text-muted"
MARKS = {"better": "+", "worse": "-", "no measurable difference": "=", "not measured": "?"}
"""A verdict's mark under its group."""
MARK_STYLES = {"+": "$success", "-": "$error", "=": "$text-muted", "?": "$warning", "…": "$accent"}
MARKS_WORDS = "   + better - worse = same ? not measured"
"""The marks' legend, after the colours' where the width allows."""
EMPTY = "Throughput: no candidate measured yet."


@dataclass(frozen=True, slots=True)
class ChartPoint:
    """One candidate as the chart draws it."""

    index: int
    """Its number."""
    canary: float | None
    """Its canary's output tokens/s per GPU (None: not measured)."""
    control: float | None
    """The control GPUs' mean output tokens/s per GPU over the same window."""
    mark: str
    """+, -, =, ? or … (being measured)."""


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def points_of(doc: Mapping[str, Any] | None) -> list[ChartPoint]:
    """The chart's points from a status document: its history, then the candidate being
    measured (from its latest look), if any."""
    out: list[ChartPoint] = []
    for h in (doc or {}).get("history", []):
        if not isinstance(h, dict) or not isinstance(h.get("index"), int):
            continue
        mark = MARKS.get(str(h.get("verdict")), "?")
        out.append(
            ChartPoint(
                h["index"], _number(h.get("canary_tokens_per_s")),
                _number(h.get("control_tokens_per_s")), mark,
            )
        )  # fmt: skip
    current, look = (doc or {}).get("current"), (doc or {}).get("look")
    if (
        isinstance(current, dict)
        and isinstance(look, dict)
        and isinstance(current.get("index"), int)
    ):
        canary, control = (
            _number(look.get("canary_tokens_per_s")),
            _number(look.get("control_tokens_per_s")),
        )
        if canary is not None and all(p.index != current["index"] for p in out):
            out.append(ChartPoint(current["index"], canary, control, "…"))
    return out


def _styled(row: str, styles: Sequence[str]) -> list[tuple[str, str]]:
    """A plot row's cells with each column's style, runs of one style joined."""
    parts: list[tuple[str, str]] = []
    for char, style in zip(row, styles, strict=True):
        style = style if char != " " else ""
        if parts and parts[-1][1] == style:
            parts[-1] = (parts[-1][0] + char, style)
        else:
            parts.append((char, style))
    return parts


def _legend(width: int) -> Content:
    """``█ canary  █ control (incumbent), tok/s per GPU`` with each █ in its colour, and the
    marks' words where they fit."""
    head = Content.assemble(
        ("█", CANARY_STYLE),
        (" canary  ", AXIS_STYLE),
        ("█", CONTROL_STYLE),
        (" control (incumbent), tok/s per GPU", AXIS_STYLE),
    )
    if head.cell_length + len(MARKS_WORDS) <= width:
        head = Content.assemble(head, (MARKS_WORDS, AXIS_STYLE))
    return head.truncate(width)


def chart_lines(points: Sequence[ChartPoint], width: int, height: int) -> list[Content]:
    """The chart as at most ``height`` lines of ``width`` cells.

    Args:
        points: The candidates, oldest first.
        width: Cells across.
        height: Rows: the legend, the plot (2 or more), the axis, the numbers and the marks.

    Returns:
        The lines, top first (the empty line alone when nothing was measured).
    """
    measured = [p for p in points if p.canary is not None or p.control is not None]
    if not measured or height < 6 or width < 12:
        return [Content.styled(EMPTY, AXIS_STYLE)]
    rows = height - 4
    values = [v for p in measured for v in (p.canary, p.control) if v is not None]
    ticks = value_ticks(max(values), 1.0, rows)
    labels = ticks.labels(rows)
    label_w = max(len(text) for text in labels.values()) + 1
    plot_w = width - label_w
    bar = max(1, min(MAX_BAR, (plot_w // len(measured) - 1) // 2))
    group = 2 * bar + 1
    shown = measured[-max(1, plot_w // group) :]
    columns: list[float | None] = []
    styles: list[str] = []
    centres: dict[int, ChartPoint] = {}
    for p in shown:
        centres[len(columns) + bar] = p
        columns += [p.canary] * bar + [p.control] * bar + [None]
        styles += [CANARY_STYLE] * bar + [CONTROL_STYLE] * bar + [""]
    plot = block_rows(columns, ticks.high, rows)
    lines = [_legend(width)]
    for r in range(rows):
        lines.append(
            Content.assemble(
                (labels.get(r, "").rjust(label_w - 1) + " ", AXIS_STYLE), *_styled(plot[r], styles)
            )
        )
    axis = "".join("┬" if x in centres else "─" for x in range(len(columns)))
    lines.append(Content.styled(labels.get(rows, "0").rjust(label_w - 1) + " " + axis, AXIS_STYLE))
    numbers = place_labels({x: f"#{p.index}" for x, p in centres.items()}, len(columns))
    lines.append(Content.styled(" " * label_w + numbers, AXIS_STYLE))
    marks: list[tuple[str, str]] = [(" " * label_w, "")]
    for x in range(len(columns)):
        point = centres.get(x)
        marks.append((point.mark, MARK_STYLES.get(point.mark, "")) if point else (" ", ""))
    lines.append(Content.assemble(*marks))
    return lines


class CandidateChart(Widget):
    """Draws ``points`` (see module) in the room it is given."""

    DEFAULT_CSS = """
    CandidateChart {
        height: 1fr;
        min-height: 6;
        max-height: 16;
    }
    """

    points: reactive[tuple[ChartPoint, ...]] = reactive(())
    """The candidates to draw, oldest first."""

    def render(self) -> Content:
        """The chart, or the line that says nothing was measured yet."""
        width, height = self.content_size
        return Content("\n").join(chart_lines(self.points, width, height))
