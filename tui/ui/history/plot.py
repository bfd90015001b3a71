"""A time series reduced to chart columns, and a value axis scaled to it (pure: no Textual, no
clock).

``columns`` turns (time, value) points into one value per column (the charts and the panels'
graphs draw them); ``axis_for`` scales an axis to the data: from 0 when the data spans much of its
range, else from just below its lowest value, and never over less than the metric's floor, so a
constant rate sits across the middle and an idle series on the floor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Point = tuple[float, float]
"""(time.time(), value)."""

ZERO_WHEN_BELOW = 0.6
"""The axis starts at 0 when the data's lowest value is below this share of its highest."""


@dataclass(frozen=True, slots=True)
class Axis:
    """The value range a chart shows."""

    low: float
    """Value at the bottom row."""
    high: float
    """Value at the top row."""


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
