"""Which cells of a panel line changed between two readings (the panel repaints only those).

A panel line is mostly labels; only a number or two in it change each second, and repainting
just those cells keeps what goes over an SSH link to a few bytes per value.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.content import Content


def changed_span(old: Content, new: Content) -> tuple[int, int] | None:
    """The cells of a line that differ between two renderings, as (start, end); None if none.

    Why: a panel line is mostly labels; only a number or two in it change each second, and
    repainting just those cells keeps what goes over an SSH link to a few bytes per value.
    A change of style (not of text) repaints the whole line.
    """
    if old is new:
        return None
    if old.plain == new.plain:
        return None if old.spans == new.spans else (0, max(cell_len(new.plain), 1))
    if old.spans != new.spans and not _same_style_layout(old, new):
        return (0, max(cell_len(old.plain), cell_len(new.plain), 1))
    a, b = old.plain, new.plain
    start = common_prefix(a, b)
    left = cell_len(b[:start])
    width_a, width_b = cell_len(a), cell_len(b)
    if width_a != width_b:
        # Everything after the first difference moved: "97/1000 W" -> "843/1000 W" must
        # repaint "/1000 W" too, or the screen keeps the old cells ("8431000 W").
        return (left, max(width_a, width_b, left + 1))
    same = common_suffix(a[start:], b[start:])
    end_a, end_b = len(a) - same, len(b) - same
    return (left, max(cell_len(a[:end_a]), cell_len(b[:end_b]), left + 1))


def common_prefix(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share.

    Why by halves: each step is one string comparison in C; the character loop it replaces
    was a tenth of a reading's panel update (seven panels, ~15 lines each, every second).
    """
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def common_suffix(a: str, b: str) -> int:
    """How many trailing characters ``a`` and ``b`` share (``common_prefix`` from the end)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle :] == b[len(b) - middle :]:
            low = middle
        else:
            high = middle - 1
    return low


def _same_style_layout(old: Content, new: Content) -> bool:
    """Same styles in the same order (spans may have moved with the text lengths)."""
    return [span.style for span in old.spans] == [span.style for span in new.spans]
