"""A series as columns of block characters filled from 0 (pure: no Textual, no clock).

Why blocks, not braille: braille draws a line of single dots, which a browser's terminal
(xterm.js in ``gpufleet serve``) renders as faint specks; a filled column of ``▁▂▃▄▅▆▇█`` reads
the same in a terminal and in a browser, and eighths give each row eight levels. A column with a
recorded value is never empty, even at 0 (the ``▁`` on the floor: the job made nothing), so it
differs from a column with no data at all (blank: nothing was recorded then).
"""

from __future__ import annotations

from collections.abc import Sequence

EIGHTHS = " ▁▂▃▄▅▆▇█"
"""A cell filled from the bottom by 0..8 eighths."""


def block_rows(values: Sequence[float | None], high: float, rows: int) -> list[str]:
    """``values`` (one per column) as ``rows`` strings, top first, filled from 0 up to each
    value on a scale where ``high`` fills every row.

    Args:
        values: One value per column; None where nothing was recorded (left blank).
        high: The value at the top of the plot (> 0).
        rows: Character rows.

    Returns:
        The rows, top first, each ``len(values)`` characters.
    """
    rows = max(1, rows)
    levels = rows * 8
    grid = [[" "] * len(values) for _ in range(rows)]
    for x, value in enumerate(values):
        if value is None:
            continue
        filled = round(min(max(value, 0.0), high) / high * levels) if high > 0 else 0
        filled = max(1, filled)  # recorded, even at 0: the floor shows
        for row in range(rows):
            eighths = min(8, filled - 8 * (rows - 1 - row))
            if eighths > 0:
                grid[row][x] = EIGHTHS[eighths]
    return ["".join(row) for row in grid]
