"""``FramedRows``: a panel's content rows framed by its border cells without Textual's per-row work.

Textual's styles cache builds every row of a widget from its CSS: it unpacks the border and
outline, works out the padding, the text opacity, the hatch, the tint and the opacity, builds both
border cells' styles again, and keeps each row unfiltered to make a filtered copy at every render
(``Strip.apply_filter``: three strips a row, each with its seven small caches). A GPU panel's
content rows are one thing: its left border cell, the line, its right border cell. Under load
(seven servers) about twenty panel rows change each second, and that per-row work was more than
half of the cost of a rendered row. Here the two border cells are taken from a content row
Textual rendered, and the next content rows are framed with them for as long as the panel's size,
border, backgrounds, opacity and line filters stay what they were; the border rows, and every row
of a panel that is not plain (padding, a tint, an outline, a hatch, a text opacity or an
opacity), are Textual's own. Public API only: the panel's ``render_lines`` hands its content rows
here and the rest to Textual's. A test renders every row both ways.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.geometry import Region, Spacing
from textual.strip import Strip
from textual.style import Style
from textual.widget import Widget

ROWS_KEPT = 64
"""Framed rows a panel keeps (``FramedRows._kept``), as many as the lines it keeps
(``panel_strips.DRAWN_STRIPS``): 256 made the next readings slower (more for the collector)."""

TextualRows = Callable[[Region], list[Strip]]
"""Textual's own rendering of a crop of the widget (``Widget.render_lines``)."""


@dataclass(frozen=True, slots=True)
class Frame:
    """The border cells of a panel's content rows, and what they were taken for."""

    key: tuple[object, ...]
    """The size, border, backgrounds, opacity and filters they hold for (``FramedRows._key``)."""
    top: int
    """The first content row."""
    height: int
    """Content rows."""
    width: int
    """The content's width in cells."""
    left: Segment
    """The left border cell, filtered."""
    right: Segment
    """The right border cell, filtered."""
    inner: RichStyle
    """The content's background (what a short line is padded with)."""


class FramedRows:
    """One panel's framed content rows (see the module)."""

    def __init__(self) -> None:
        self.frame: Frame | None = None
        """The border cells (None: taken from the next content row Textual renders)."""
        self._kept: dict[int, tuple[Strip, Strip]] = {}
        """Framed and filtered rows by their line strip's id (the line kept with its row, so
        the id stays its own), for the current frame."""

    def render(self, widget: Widget, crop: Region, textual_rows: TextualRows) -> list[Strip]:
        """The rows of ``crop``: its content rows framed here, the others Textual's own.

        Args:
            widget: The panel (its ``render_line`` draws a content line).
            crop: The rows and columns asked for, in the widget's own coordinates.
            textual_rows: Textual's rendering of a crop (the panel's ``super().render_lines``).
        """
        key = _key(widget)
        frame = self.frame
        if frame is None or frame.key != key:
            self.frame = None
            self._kept.clear()
            strips = textual_rows(crop)
            self._take(widget, key, crop, strips)
            return strips
        first = max(crop.y, frame.top)
        last = min(crop.bottom, frame.top + frame.height)
        if first >= last:
            return textual_rows(crop)
        strips = []
        if crop.y < first:  # the top border
            strips += textual_rows(Region(crop.x, crop.y, crop.width, first - crop.y))
        strips += self._framed(widget, frame, first, last, crop)
        if last < crop.bottom:  # the bottom border
            strips += textual_rows(Region(crop.x, last, crop.width, crop.bottom - last))
        return strips

    def _framed(
        self, widget: Widget, frame: Frame, first: int, last: int, crop: Region
    ) -> list[Strip]:
        """Content rows ``first`` to ``last`` (excluded), framed, filtered, cut to ``crop``.

        Why the kept rows: the panel hands back the same line strip for a line it drew recently
        (about half of the changed lines under load: "running 5  queued 0" again), and framing,
        filtering and a new Strip (seven small caches of its own) for it again was a tenth of
        the console's CPU on the H200 (py-spy, ``Strip.__init__``).
        """
        kept = self._kept
        if len(kept) > ROWS_KEPT:
            kept.clear()
        filters = widget.get_line_filters()
        background = widget.background_colors[1]
        width = frame.width + 2
        strips = []
        for y in range(first, last):
            line = widget.render_line(y - frame.top)
            row = kept.get(id(line))
            if row is not None and row[0] is line:
                strips.append(row[1])
                continue
            segments = _padded(line, frame.width, frame.inner)
            for line_filter in filters:  # per cell, as on Textual's whole row
                segments = line_filter.apply(segments, background)
            framed = Strip([frame.left, *segments, frame.right], width)
            kept[id(line)] = (line, framed)
            strips.append(framed)
        if crop.column_span != (0, width):
            x1, x2 = crop.column_span
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips

    def _take(
        self, widget: Widget, key: tuple[object, ...], crop: Region, strips: list[Strip]
    ) -> None:
        """Keep the border cells of the first whole content row among Textual's ``strips``
        (none for a panel whose rows are not plain: ``_key``'s flag)."""
        width, height = widget.outer_size
        gutter = widget.styles.gutter
        top, content = gutter.top, height - gutter.height
        if crop.column_span != (0, width) or not key[-1]:
            return
        y = max(crop.y, top)
        if y >= min(crop.bottom, top + content):
            return
        segments = list(strips[y - crop.y])
        if len(segments) < 2 or segments[0].cell_length != 1 or segments[-1].cell_length != 1:
            return
        base, background = widget.background_colors
        inner = Style(background=base + background).rich_style
        self.frame = Frame(key, top, content, width - 2, segments[0], segments[-1], inner)


def _key(widget: Widget) -> tuple[object, ...]:
    """What the border cells of a content row depend on, and last whether the rows are plain
    (``_plain_rows``)."""
    styles = widget.styles
    opacity = widget.opacity
    return (
        widget.outer_size,
        styles.border,
        widget.background_colors,
        opacity,
        tuple(widget.get_line_filters()),
        _plain_rows(widget, opacity),
    )


def _padded(line: Strip, width: int, inner: RichStyle) -> list[Segment]:
    """``line`` at ``width`` cells, padded in the content's background as Textual pads it
    (``Strip.adjust_cell_length``)."""
    pad = width - line.cell_length
    if pad > 0:
        return [*line, Segment(" " * pad, inner)]
    if pad == 0:
        return list(line)
    return list(line.adjust_cell_length(width, inner))


def _plain_rows(widget: Widget, opacity: float) -> bool:
    """Whether Textual draws a content row as left border cell, line, right border cell
    (nothing applied over them, no padding, no outline, no scrollbar)."""
    styles = widget.styles
    (_, (right, _), _, (left, _)) = styles.border
    return (
        bool(left and right)
        and widget.scrollbar_gutter == Spacing(0, 0, 0, 0)
        and not any(edge for edge, _ in styles.outline)
        and styles.padding == Spacing(0, 0, 0, 0)
        and opacity == 1.0
        and styles.text_opacity == 1.0
        and not styles.tint.a
        and not (styles.has_rule("hatch") and styles.hatch != "none")
    )
