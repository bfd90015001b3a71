"""A time series drawn in text: a braille line with a scaled axis (pure: no Textual, no clock).

Braille cells hold 2 x 4 dots, so a chart of W x H cells has 2W columns and 4H rows of
resolution: a line, not a block. The axis is scaled to the data: from 0 when the data spans
much of its range, else from just below its lowest value, and never over less than the metric's
floor, so a constant rate is a flat line across the middle and an idle series a line on the
floor (the old sparkline drew a constant as a solid block).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tui.ui.format import short_num

Point = tuple[float, float]
"""(time.time(), value)."""

_DOTS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
"""Braille dot bits by (row in the cell from the top, column in the cell)."""

ZERO_WHEN_BELOW = 0.6
"""The axis starts at 0 when the data's lowest value is below this share of its highest."""


@dataclass(frozen=True, slots=True)
class Axis:
    """The value range a chart shows."""

    low: float
    """Value at the bottom row."""
    high: float
    """Value at the top row."""

    def labels(self) -> tuple[str, str, str]:
        """Top, middle and bottom labels."""
        return short_num(self.high), short_num((self.high + self.low) / 2), short_num(self.low)


def nice_step(span: float) -> float:
    """A round step (1, 2, 2.5 or 5 times a power of ten) about a quarter of ``span``."""
    raw = max(span, 1e-9) / 4
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def round_up(value: float) -> float:
    """``value`` rounded up to a half step of its leading digit: 4180 -> 4500, 62 -> 65."""
    power = 10 ** math.floor(math.log10(value))
    step = power / 2
    return math.ceil(value / step - 1e-9) * step


def axis_for(values: Sequence[float], floor: float, ceiling: float | None = None) -> Axis:
    """The axis for ``values``: scaled to them, at least ``floor`` wide, on round numbers.

    Args:
        values: The values shown (any order; may be empty).
        floor: The smallest span of the axis (> 0), in the values' unit.
        ceiling: The highest value the metric can take (100 for a percentage): the axis stops
            there, where rounding up would print "max 150%" over a GPU at 99% (unless a value
            is above it).

    Returns:
        The axis.
    """
    axis = _axis(values, floor)
    if ceiling is None or axis.high <= ceiling or (values and max(values) > ceiling):
        return axis  # a value past the ceiling (a faulty reading) is still drawn, not clipped
    low = axis.low if axis.low < ceiling else max(0.0, ceiling - nice_step(floor) * 4)
    return Axis(low, ceiling)


def _axis(values: Sequence[float], floor: float) -> Axis:
    if not values:
        return Axis(0.0, nice_step(floor) * 4)
    top, bottom = max(values), min(values)
    if top <= 0 or bottom <= ZERO_WHEN_BELOW * top:
        return Axis(0.0, round_up(max(top * 1.1, floor)))
    span = max(top - bottom, floor)
    pad = span * 0.15
    step = nice_step(span + 2 * pad)
    low = max(0.0, math.floor((bottom - pad) / step) * step)
    high = math.ceil((top + pad) / step) * step
    return Axis(low, high if high > low else low + step)


def columns(
    points: Sequence[Point], start: float, end: float, count: int, gap_s: float
) -> list[float | None]:
    """One value per dot column: the mean of the points in its time slot, the last value carried
    over a slot with none (a line goes on), or None past ``gap_s`` without data (a gap).

    Args:
        points: (t, value), oldest first.
        start: Time of the left edge.
        end: Time of the right edge.
        count: Dot columns.
        gap_s: Longest stretch without data still drawn as a line.

    Returns:
        ``count`` values (None where nothing is drawn).
    """
    if count <= 0 or end <= start:
        return []
    width = (end - start) / count
    sums = [0.0] * count
    counts = [0] * count
    for t, value in points:
        if start <= t <= end:
            index = min(count - 1, int((t - start) / width))
            sums[index] += value
            counts[index] += 1
    out: list[float | None] = []
    last: float | None = None
    last_t = -math.inf
    earlier = [p for p in points if p[0] < start]
    if earlier:
        last, last_t = earlier[-1][1], earlier[-1][0]
    for index in range(count):
        slot = start + index * width
        if counts[index]:
            last, last_t = sums[index] / counts[index], slot
            out.append(last)
        elif last is not None and slot - last_t <= gap_s:
            out.append(last)
        else:
            out.append(None)
    return out


def row_of(value: float, axis: Axis, rows: int) -> int:
    """The character row (from the top) where ``value``'s dot lands."""
    dots = rows * 4
    span = axis.high - axis.low or 1.0
    level = round((min(max(value, axis.low), axis.high) - axis.low) / span * (dots - 1))
    return (dots - 1 - level) // 4


def braille_rows(values: Sequence[float | None], axis: Axis, rows: int) -> list[str]:
    """The line through ``values`` (two per cell) as ``rows`` strings of braille characters.

    Args:
        values: One value per dot column (None: nothing drawn there).
        axis: The value range of the rows.
        rows: Character rows (4 dots each).

    Returns:
        The rows, top first, each ``ceil(len(values) / 2)`` characters.
    """
    cells_w = (len(values) + 1) // 2
    grid = [[0] * cells_w for _ in range(rows)]
    dots = rows * 4
    span = axis.high - axis.low or 1.0
    previous: int | None = None
    for x, value in enumerate(values):
        if value is None:
            previous = None
            continue
        level = round((min(max(value, axis.low), axis.high) - axis.low) / span * (dots - 1))
        y = dots - 1 - level  # from the top
        ys = range(min(y, previous), max(y, previous) + 1) if previous is not None else (y,)
        for dot_y in ys:  # a steep change is a vertical run, so the line stays connected
            grid[dot_y // 4][x // 2] |= _DOTS[dot_y % 4][x % 2]
        previous = y
    return ["".join(chr(0x2800 + bits) if bits else " " for bits in row) for row in grid]


def ago(seconds: float) -> str:
    """A short relative time for an axis: '-45s', '-10m', '-6h', '-3d'."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"-{seconds:.0f}s"
    if seconds < 2 * 3600:
        return f"-{seconds / 60:.0f}m"
    if seconds < 2 * 86400:
        return f"-{seconds / 3600:.0f}h"
    return f"-{seconds / 86400:.0f}d"


def time_labels(start: float, end: float, width: int, end_label: str) -> str:
    """The time axis' labels across ``width``: the left edge, the middle and the right edge.

    Args:
        start: Time of the left edge.
        end: Time of the right edge.
        width: Characters.
        end_label: What the right edge is called ('now').

    Returns:
        A line of ``width`` characters.
    """
    left, middle = ago(end - start), ago((end - start) / 2)
    line = [" "] * width
    for position, text in (
        (0, left),
        (width // 2 - len(middle) // 2, middle),
        (width - len(end_label), end_label),
    ):
        fits = position >= 0 and position + len(text) <= width
        if fits and all(c == " " for c in line[max(0, position - 1) : position + len(text) + 1]):
            line[position : position + len(text)] = text
    return "".join(line)


def mark_columns(marks: Sequence[float], start: float, end: float, width: int) -> set[int]:
    """Character columns of the marks within [start, end]."""
    if end <= start or width <= 0:
        return set()
    return {
        min(width - 1, int((t - start) / (end - start) * width)) for t in marks if start <= t <= end
    }
