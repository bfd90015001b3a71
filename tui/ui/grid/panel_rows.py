"""``PanelStylesCache``: a panel's content rows framed by its border without Textual's per-row work.

Textual's ``StylesCache.render_line`` builds every row of a widget from its CSS: it unpacks the
border and outline, works out the padding, the text opacity, the hatch, the tint and the opacity,
and builds both border cells' styles again, for each row it renders. A GPU panel's content rows
are one thing: its left border cell, the line, its right border cell. Under load (seven servers)
about twenty panel rows change each second, and this per-row work was more than half of the
cost of a rendered row. Here the two border cells are taken from the first content row Textual
renders after any change of style (which clears the cache), and the next content rows are
framed with them, for as long as the widget's size, backgrounds and opacity stay what they
were; rows that are not plain content rows (borders, padding, a tint, an outline, a hatch, a
text opacity or an opacity) are always Textual's own. A test renders every row both ways.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.terminal_theme import DEFAULT_TERMINAL_THEME, TerminalTheme
from textual._styles_cache import StylesCache
from textual.color import Color
from textual.content import Content
from textual.css.styles import StylesBase
from textual.filter import LineFilter
from textual.geometry import Region, Size, Spacing
from textual.strip import Strip
from textual.style import Style

ROWS_KEPT = 64
"""Framed rows a panel keeps (``_kept_rows``), as many as the lines it keeps
(``panel_strips.DRAWN_STRIPS``): 256 made the next readings slower (more for the collector)."""

_Label = tuple[Content, Color, Color, Style] | None
_Frame = tuple[tuple[object, ...], int, Segment, Segment, RichStyle]


class PanelStylesCache(StylesCache):
    """A ``StylesCache`` that frames plain content rows with border cells it keeps."""

    def __init__(self) -> None:
        super().__init__()
        self._frame: _Frame | None = None
        """The inputs it was taken for, the first content row, the left and right border
        cells and the content's background style (None: take it at the next content row)."""
        self._rows: dict[int, tuple[Strip, Strip]] = {}
        """Framed and filtered rows by their line strip's id (the line kept with its row, so
        the id stays its own), for ``_rows_for``."""
        self._rows_for: tuple[object, ...] = ()
        """The frame, filters and background the kept rows were made with."""

    def render(
        self,
        styles: StylesBase,
        size: Size,
        base_background: Color,
        background: Color,
        render_content_line: Callable[[int], Strip],
        filters: Sequence[LineFilter],
        border_title: _Label,
        border_subtitle: _Label,
        content_size: Size | None = None,
        padding: Spacing | None = None,
        crop: Region | None = None,
        opacity: float = 1.0,
        ansi_theme: TerminalTheme = DEFAULT_TERMINAL_THEME,
        native_ansi: bool = False,
    ) -> list[Strip]:
        """Content rows only (a partial update's changed lines), framed and filtered into one
        strip each; anything else as Textual renders it.

        Why: Textual keeps each row unfiltered and makes a filtered copy at every render
        (``Strip.apply_filter``): three strips a row, each with its seven small caches. The
        rows rendered here stay dirty in Textual's cache, so its own render draws them again.
        """
        frame = self._frame
        key = (size, content_size, padding, base_background, background, opacity)
        if frame is not None and crop is not None and frame[0] == key and size.width == self._width:
            top = frame[1]
            assert content_size is not None  # in the key
            if top <= crop.y and crop.bottom <= top + content_size.height:
                width = size.width
                strips = []
                rows = self._kept_rows(frame, filters, background)
                for y in crop.line_range:
                    line = render_content_line(y - top)
                    kept = rows.get(id(line))
                    if kept is not None and kept[0] is line:
                        strips.append(kept[1])
                        continue
                    segments = _framed(line, content_size.width, frame)
                    for line_filter in filters:
                        segments = line_filter.apply(segments, background)
                    row = Strip(segments, width)
                    rows[id(line)] = (line, row)
                    strips.append(row)
                if crop.column_span != (0, width):
                    x1, x2 = crop.column_span
                    strips = [strip.crop(x1, x2) for strip in strips]
                return strips
        return super().render(
            styles,
            size,
            base_background,
            background,
            render_content_line,
            filters,
            border_title,
            border_subtitle,
            content_size,
            padding,
            crop,
            opacity,
            ansi_theme,
            native_ansi,
        )

    def _kept_rows(
        self, frame: _Frame, filters: Sequence[LineFilter], background: Color
    ) -> dict[int, tuple[Strip, Strip]]:
        """The rows kept for these inputs (emptied when they changed, or when many).

        Why: the panel hands back the same line strip for a line it drew recently (about half
        of the changed lines under load: "running 5  queued 0" again), and framing, filtering
        and a new Strip (seven small caches of its own) for it again was a tenth of the
        console's CPU on the H200 (py-spy, ``Strip.__init__``).
        """
        inputs = (frame, *filters, background)
        if inputs != self._rows_for or len(self._rows) > ROWS_KEPT:
            self._rows.clear()
            self._rows_for = inputs
        return self._rows

    def clear(self) -> None:
        """Textual's clear (any change of style or size), and the frame with it."""
        super().clear()
        self._frame = None
        self._rows.clear()

    def render_line(
        self,
        styles: StylesBase,
        y: int,
        size: Size,
        content_size: Size,
        padding: Spacing,
        base_background: Color,
        background: Color,
        render_content_line: Callable[[int], Strip],
        border_title: _Label,
        border_subtitle: _Label,
        opacity: float,
        ansi_theme: TerminalTheme,
        native_ansi: bool,
    ) -> Strip:
        """A content row framed by the kept border cells; any other row as Textual renders it."""
        frame = self._frame
        key = (size, content_size, padding, base_background, background, opacity)
        if frame is not None and frame[0] == key:
            top = frame[1]
            if top <= y < top + content_size.height:
                line = render_content_line(y - top)
                return Strip(_framed(line, content_size.width, frame), size.width)
        strip = super().render_line(
            styles,
            y,
            size,
            content_size,
            padding,
            base_background,
            background,
            render_content_line,
            border_title,
            border_subtitle,
            opacity,
            ansi_theme,
            native_ansi,
        )
        top = styles.gutter.top
        if top <= y < top + content_size.height and _plain_rows(styles, padding, opacity):
            segments = list(strip)
            inner = self.get_inner_outer(base_background, background)[0].rich_style
            self._frame = (key, top, segments[0], segments[-1], inner)
        return strip


def _framed(line: Strip, width: int, frame: _Frame) -> list[Segment]:
    """The row's cells: left border cell, ``line`` at ``width`` cells (padded in the content's
    background, as ``Strip.adjust_cell_length`` pads), right border cell."""
    _, _, left, right, inner = frame
    pad = width - line.cell_length
    if pad > 0:
        return [left, *line, Segment(" " * pad, inner), right]
    if pad == 0:
        return [left, *line, right]
    return [left, *line.adjust_cell_length(width, inner), right]


def _plain_rows(styles: StylesBase, padding: Spacing, opacity: float) -> bool:
    """Whether Textual draws a content row as left border cell, line, right border cell
    (nothing applied over them, no padding, no outline)."""
    (_, (right, _), _, (left, _)) = styles.border
    return (
        bool(left and right)
        and not any(edge for edge, _ in styles.outline)
        and padding == Spacing(0, 0, 0, 0)
        and opacity == 1.0
        and styles.text_opacity == 1.0
        and not styles.tint.a
        and not (styles.has_rule("hatch") and styles.hatch != "none")
    )
