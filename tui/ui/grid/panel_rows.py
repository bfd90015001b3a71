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

from collections.abc import Callable

from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.terminal_theme import TerminalTheme
from textual._styles_cache import StylesCache
from textual.color import Color
from textual.content import Content
from textual.css.styles import StylesBase
from textual.geometry import Size, Spacing
from textual.strip import Strip
from textual.style import Style

_Label = tuple[Content, Color, Color, Style] | None


class PanelStylesCache(StylesCache):
    """A ``StylesCache`` that frames plain content rows with border cells it keeps."""

    def __init__(self) -> None:
        super().__init__()
        self._frame: tuple[tuple[object, ...], int, Segment, Segment, RichStyle] | None = None
        """The inputs it was taken for, the first content row, the left and right border
        cells and the content's background style (None: take it at the next content row)."""

    def clear(self) -> None:
        """Textual's clear (any change of style or size), and the frame with it."""
        super().clear()
        self._frame = None

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
            _, top, left, right, inner = frame
            if top <= y < top + content_size.height:
                line = render_content_line(y - top).adjust_cell_length(content_size.width, inner)
                return Strip([left, *line, right], size.width)
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
