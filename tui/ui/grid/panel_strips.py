"""A panel's lines as cells (Textual Strips), drawn the cheap way and kept for when they show
again (the drawing half of ``gpu_panel``: which lines change is the panel's, how a line becomes
cells is this module's)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.content import Content
from textual.strip import Strip
from textual.style import NULL_STYLE
from textual.style import Style as VisualStyle

CELL_STYLES_KEPT = 4096
"""Cell styles a panel keeps (``StripDrawer.line_strip``); more are dropped all at once (a theme
change or many distinct values at many columns), and made again as lines are drawn."""

DRAWN_STRIPS = 64
"""How many drawn lines a panel keeps for when they show again (``StripDrawer.drawn``)."""


def parse_style(style: str | VisualStyle) -> VisualStyle:
    """A piece's style as a widget's own parser reads it for ``Content.render``: a style as it
    is, a string through the app's stylesheet (its CSS variables: ``$error``), an unreadable one
    as no style. A panel's lines name no component class (``.name``), the one thing a widget's
    parser adds."""
    if isinstance(style, VisualStyle):
        return style
    try:
        return VisualStyle.parse(style)
    except Exception:  # as Textual's: a style it cannot read draws unstyled, not a traceback
        return NULL_STYLE


class StripDrawer:
    """One panel's drawn lines and cell styles."""

    def __init__(self) -> None:
        self._drawn: dict[tuple[object, ...], Strip] = {}
        """Strips drawn in the current style, by text and spans, oldest first."""
        self._cell_styles: dict[tuple[VisualStyle, VisualStyle, int], RichStyle] = {}
        """Each piece's cell style by (panel style, piece style, column): see ``line_strip``."""

    def forget(self) -> None:
        """The panel's style changed: the strips drawn in the old one are not shown again."""
        self._drawn.clear()

    def drawn(self, line: Content, style: VisualStyle) -> Strip:
        """``line_strip``, or the strip of the same text and spans drawn before in this style.

        Why: a changed line is most often one shown a few seconds ago ("running 5  queued 0"
        back to "running 4  queued 0"): the counts under load move within a small range.
        """
        key = (line.plain, tuple(line.spans))
        strip = self._drawn.get(key)
        if strip is None:
            strip = self._drawn[key] = self.line_strip(line, style)
            if len(self._drawn) > DRAWN_STRIPS:
                del self._drawn[next(iter(self._drawn))]  # the oldest
        return strip

    def line_strip(self, line: Content, style: VisualStyle) -> Strip:
        """One panel line as cells, the way ``Visual.to_strips`` renders one line of Content.

        Why: ``to_strips`` wraps, aligns, looks up the selection and link styles and builds the
        line through several intermediate objects: half of the console's drawing CPU under
        load went there, for lines that are one left-aligned row already cut to the width
        (``GpuPanelView.lines``), with no links and no selection. The cells are the same: each
        piece's style over the panel's, with its offset (what a click or a selection reads).

        Each cell style is made once per (panel style, piece style, column) and kept: made anew
        (``rich_style_with_offset``: a Rich style whose meta is marshalled) for every piece of
        every changed line, it was most of this method on the H200 (py-spy), and a new object
        missed the caches after it (the ANSI codes, the colour filter) each time.
        """
        segments: list[Segment] = []
        x = 0
        cells = self._cell_styles
        if len(cells) > CELL_STYLES_KEPT:
            cells.clear()
        for text, text_style in line.render(style, end="", parse_style=parse_style):
            key = (style, text_style, x)
            cell = cells.get(key)
            if cell is None:
                cell = cells[key] = (style + text_style).rich_style_with_offset(x, 0)
            segments.append(Segment(text, cell))
            x += len(text)
        return Strip(segments, line.cell_length)
