"""Aligned columns as Textual ``Content``, so cells can carry theme styles ($error, $warning)."""

from __future__ import annotations

from collections.abc import Sequence

from textual.content import Content

Cell = str | tuple[str, str]
"""A cell: its text, or (text, style) where style may use theme variables."""


def _text(cell: Cell) -> str:
    return cell if isinstance(cell, str) else cell[0]


def text_table(
    header: Sequence[str], rows: Sequence[Sequence[Cell]], *, left: int = 1, gap: int = 2
) -> Content:
    """Columns padded to their widest cell; the first ``left`` columns left-aligned, others right.

    Args:
        header: Column titles (shown bold).
        rows: Cells, one sequence per row, as many as the header.
        left: How many leading columns are left-aligned.
        gap: Spaces between columns.

    Returns:
        One line per row, the header first.
    """
    widths = [len(h) for h in header]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(_text(cell)))
    lines: list[Content] = []
    styled_rows: list[tuple[Sequence[Cell], str]] = [(header, "bold")]
    styled_rows += [(row, "") for row in rows]
    for row, style in styled_rows:
        parts: list[str | tuple[str, str]] = []
        for i, cell in enumerate(row):
            text = _text(cell)
            padded = text.ljust(widths[i]) if i < left else text.rjust(widths[i])
            cell_style = cell[1] if isinstance(cell, tuple) else style
            parts.append((padded, cell_style) if cell_style else padded)
            if i < len(row) - 1:
                parts.append(" " * gap)
        lines.append(Content.assemble(*parts))
    return Content("\n").join(lines)
