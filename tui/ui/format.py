"""Small text formatters shared by the panels, the detail screen and the generation pane.

Pure functions of their arguments (no clock, no Textual), so snapshots stay deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.cells import cell_len
from textual.content import Content

GIB = 1024**3
SPARK_CHARS = "▁▂▃▄▅▆▇█"
NA = "–"


def gib(value: int | None) -> str:
    """Bytes as GiB with one decimal, or a dash."""
    return NA if value is None else f"{value / GIB:.1f}"


def pct(value: float | None, scale: float = 1.0) -> str:
    """A percentage with no decimals; ``scale=100`` for 0..1 fractions."""
    return NA if value is None else f"{value * scale:.0f}%"


def num(value: float | int | None, decimals: int = 0) -> str:
    """A number with thousands separators, or a dash."""
    if value is None:
        return NA
    return f"{value:,.{decimals}f}"


def short_num(value: float | int | None) -> str:
    """A number in at most 5 characters: 798080 -> '798k', 1234.5 -> '1235'."""
    if value is None:
        return NA
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if abs(value) >= 10_000:
        return f"{value / 1000:.0f}k"
    return f"{value:.0f}"


def bar(fraction: float, width: int) -> str:
    """A horizontal bar of ``width`` cells, filled to ``fraction`` (clamped to 0..1)."""
    width = max(0, width)
    filled = round(min(1.0, max(0.0, fraction)) * width)
    return "█" * filled + "░" * (width - filled)


def spark(values: Sequence[float], width: int) -> str:
    """The newest ``width`` values as block characters scaled from 0 to their maximum."""
    recent = list(values)[-width:] if width > 0 else []
    if not recent:
        return ""
    top = max(recent)
    if top <= 0:
        return SPARK_CHARS[0] * len(recent)
    last = len(SPARK_CHARS) - 1
    return "".join(SPARK_CHARS[round(v / top * last)] for v in recent)


def duration(seconds: float | None) -> str:
    """Seconds as '1d 02h', '3h 05m', '4m 09s' or '12s'; a dash when unknown."""
    if seconds is None or seconds < 0:
        return NA
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def sig3(value: float | None) -> float | None:
    """``value`` rounded to 3 significant digits (None stays None).

    Why: a rate read once a second jitters in its last digits; showing those repaints the
    panel every second without telling the operator anything.
    """
    if value is None or value == 0:
        return value
    digits = 2 - math.floor(math.log10(abs(value)))
    return round(value, digits)


def sig3_text(value: float | None) -> str:
    """``value`` to 3 significant digits with thousands separators: 1234.5 -> '1,230',
    45.67 -> '45.7'; a dash when unknown."""
    rounded = sig3(value)
    if rounded is None:
        return NA
    decimals = 0 if rounded == 0 else max(0, 2 - math.floor(math.log10(abs(rounded))))
    return f"{rounded:,.{decimals}f}"


ELLIPSIS = "…"


def fit(line: Content, width: int) -> Content:
    """``line`` within ``width`` cells, cut between words, never inside one.

    Why: a line cut at the width can cut a number and show another one ("pid 743" for pid
    7437). The words that do not fit are left out, and an ellipsis says so.

    Args:
        line: The text.
        width: Cells available.

    Returns:
        ``line`` when it fits; else its words that fit, then " …" (a single word longer than the
        width is cut, with the ellipsis, so it cannot pass for a whole one).
    """
    plain = line.plain
    if cell_len(plain) <= width:
        return line
    if width <= 1:
        return Content(ELLIPSIS[:width])
    room = width - 2  # for " …"
    cut = -1
    used = 0
    for index, char in enumerate(plain):
        if used > room:
            break
        if char == " ":
            cut = index
        used += cell_len(char)
    kept = line[:cut].rstrip() if cut > 0 else Content("")
    if not kept.plain:
        return Content.assemble(line.truncate(width - 1), ELLIPSIS)
    return Content.assemble(kept, " ", ELLIPSIS)
