"""Axis ticks a reader can use: round values (1-2-5 steps) and round times (pure: no Textual).

A value axis from 0 to a round top, with a label on every second row at most; a time axis with a
tick every round step back from the right edge (``now``: ``-10m``, ``-20m``), as many as fit
with room between their labels. Labels are placed on the rows and columns their values fall on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tui.ui.format import short_num

STEPS = (1.0, 2.0, 5.0)
"""Mantissas of a round step: 1, 2 and 5 times a power of ten."""

TIME_STEPS = (
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    2 * 3600,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86400,
    2 * 86400,
    7 * 86400,
)
"""Round time steps, seconds: 10 s .. 1 week."""

LABEL_GAP = 2
"""Blank cells kept between two time labels."""
TICK_ROOM = 6
"""Cells between two time ticks beyond the widest label: labels that do not crowd."""


def round_steps(smallest: float) -> list[float]:
    """Round steps (1-2-5) from the one at or below ``smallest`` upwards, a few decades of them."""
    power = 10.0 ** math.floor(math.log10(max(smallest, 1e-12)))
    return [m * power * 10.0**k for k in range(4) for m in STEPS]


@dataclass(frozen=True, slots=True)
class ValueTicks:
    """A value axis from 0: its top and its ticks."""

    high: float
    """The value at the top of the plot."""
    ticks: tuple[float, ...]
    """Tick values from 0 up to ``high``, a round step apart."""

    def row_of(self, value: float, rows: int) -> int:
        """The row whose top edge is ``value``: 0 for ``high``, ``rows`` (the axis line under
        the plot) for 0."""
        return round(rows - min(max(value, 0.0), self.high) / self.high * rows)

    def labels(self, rows: int) -> dict[int, str]:
        """Each tick's label on its row (0 on the axis line, row ``rows``), ticks that would
        share a row with a higher one left out."""
        out: dict[int, str] = {}
        for value in reversed(self.ticks):  # the top first: it keeps its row
            out.setdefault(self.row_of(value, rows), short_num(value))
        return out


def value_ticks(top: float, floor: float, rows: int) -> ValueTicks:
    """The axis from 0 for data up to ``top`` on ``rows`` rows: a round step, a label every
    second row at most, the top a whole number of steps at or above the data.

    Args:
        top: The largest value shown (0 or less: an idle series).
        floor: The least top the axis has (``tui.history.Metric.floor``), so an idle series is a
            line on 0 under a sensible scale, not a scale of 0 to 1.
        rows: Rows of the plot.

    Returns:
        The axis.
    """
    most = max(1, rows // 2)
    target = max(top, floor)
    for step in round_steps(target / most):
        count = math.ceil(target / step - 1e-9)
        if count <= most:
            high = count * step
            return ValueTicks(high, tuple(step * k for k in range(count + 1)))
    return ValueTicks(target, (0.0, target))  # never: the steps grow past the target


def ago(seconds: float) -> str:
    """A time before now as a tick label: ``-30s``, ``-10m``, ``-1h30``, ``-6h``, ``-2d``."""
    seconds = round(seconds)
    if seconds < 60:
        return f"-{seconds}s"
    if seconds < 3600:
        return f"-{seconds // 60}m" + (f"{seconds % 60:02d}" if seconds % 60 else "")
    if seconds < 2 * 86400:
        hours, rest = divmod(seconds, 3600)
        return f"-{hours}h" + (f"{rest // 60:02d}" if rest else "")
    return f"-{seconds // 86400}d" + (f"{(seconds % 86400) // 3600}h" if seconds % 86400 else "")


def time_ticks(start: float, end: float, width: int, end_label: str = "now") -> dict[int, str]:
    """Ticks every round step back from ``end``, labelled with their time before it.

    Args:
        start: Time at the left edge (column 0).
        end: Time at the right edge (column ``width - 1``).
        width: Columns of the plot.
        end_label: The right edge's label.

    Returns:
        Column -> label (the right edge's included), the ticks at least ``TICK_ROOM`` cells
        more than the widest label apart.
    """
    span = end - start
    if width < 2 or span <= 0:
        return {max(0, width - 1): end_label}
    per_col = span / width
    for step in TIME_STEPS:
        widest = max(len(ago(step)), len(ago(step * math.floor(span / step))), len(end_label))
        if step / per_col >= widest + TICK_ROOM:
            break
    else:
        return {width - 1: end_label}
    ticks = {width - 1: end_label}
    k = 1
    while (t := end - k * step) >= start:
        ticks[min(width - 1, int((t - start) / per_col))] = ago(k * step)
        k += 1
    return ticks


def place_labels(ticks: dict[int, str], width: int) -> str:
    """A line of ``width`` characters with each label centred on its column (kept inside the
    line); a label that would touch the one placed before it (right to left) is left out."""
    line = [" "] * width
    free_until = width  # labels are placed from the right: nothing may reach past this
    for column in sorted(ticks, reverse=True):
        text = ticks[column]
        left = min(max(0, column - len(text) // 2), width - len(text))
        if left < 0 or left + len(text) > free_until:
            continue
        line[left : left + len(text)] = text
        free_until = left - LABEL_GAP
    return "".join(line)
