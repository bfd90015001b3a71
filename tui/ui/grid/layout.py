"""How many columns the grid uses for N panels in a given area (pure arithmetic, no Textual)."""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_PANEL_WIDTH = 18
"""Narrowest panel (border included) that still shows its essential numbers."""
MIN_PANEL_HEIGHT = 5
"""Lowest panel (border included): three lines of content."""
FULL_PANEL_WIDTH = 40
"""A panel at least this wide and ``FULL_PANEL_HEIGHT`` high shows everything."""
FULL_PANEL_HEIGHT = 11
"""Border plus the nine lines of the full layout."""
COMPACT_LINES = 5
"""Lines of content the compact layout wants at most."""


@dataclass(frozen=True, slots=True)
class GridShape:
    """The chosen arrangement."""

    columns: int
    """Panels per row."""
    rows: int
    """Rows of panels."""
    full: bool
    """True when every panel has room for the full layout."""
    fits: bool
    """False when even the smallest panels overflow the height (the grid then scrolls)."""


def choose_shape(count: int, width: int, height: int) -> GridShape:
    """Pick the column count that shows the most of every panel.

    A full layout wins if one fits (with the most columns, so rows stay short); otherwise the
    compact candidate with the most lines, then the widest panels.

    Args:
        count: Number of panels (at least 1 is assumed; 0 gives one column).
        width: Cells available across.
        height: Lines available down.

    Returns:
        The shape.
    """
    count = max(1, count)
    best: tuple[tuple[int, int, int], GridShape] | None = None
    for columns in range(1, count + 1):
        rows = math.ceil(count / columns)
        panel_w, panel_h = width // columns, height // rows
        if panel_w < MIN_PANEL_WIDTH or panel_h < MIN_PANEL_HEIGHT:
            continue
        full = panel_w >= FULL_PANEL_WIDTH and panel_h >= FULL_PANEL_HEIGHT
        if full:
            score = (1, columns, 0)
        else:
            score = (0, min(panel_h - 2, COMPACT_LINES), min(panel_w - 2, FULL_PANEL_WIDTH))
        shape = GridShape(columns=columns, rows=rows, full=full, fits=True)
        if best is None or score > best[0]:
            best = (score, shape)
    if best is not None:
        return best[1]
    columns = max(1, min(count, width // MIN_PANEL_WIDTH))
    return GridShape(columns=columns, rows=math.ceil(count / columns), full=False, fits=False)


def last_row_columns(count: int, columns: int) -> tuple[int, tuple[int, ...]]:
    """Grid columns and each panel's span so that a short last row fills the width.

    Args:
        count: Panels.
        columns: Panels per full row (``GridShape.columns``).

    Returns:
        (grid columns, column span of each panel in order): ``columns`` and all 1 when the last
        row is full; else the least common multiple of the two row lengths, a full row's panels
        spanning ``grid / columns`` and the last row's ``grid / len(last row)`` (7 panels in 5
        columns: 10 grid columns, spans 2 and 5).
    """
    columns = max(1, columns)
    last = count % columns
    if count <= columns or last == 0:
        return columns, (1,) * count
    grid = math.lcm(columns, last)
    full = count - last
    return grid, (grid // columns,) * full + (grid // last,) * last
