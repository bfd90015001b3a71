"""``DirtyRowsCompositor``: a partial screen update renders only the widgets, and the rows of
them, that the changed regions touch.

Textual's partial update (``Compositor.render_partial_update``, textual 8.2) takes the bounding
box of every changed region and renders *every line* of *every widget* that box overlaps; only
the changed lines are then sent. Under load two or three lines change in a few of the seven
panels each second, one in the top row and one in the bottom row make the box the whole grid,
and every panel's 20-odd lines went through the styles cache again: the compositor was a fifth
of the console's CPU with 7 servers (py-spy). Here a widget is rendered only where a changed
region overlaps it and no widget in front of it covers that region whole (the grid and the
screen behind a panel's changed line are not), and only over the rows those regions span
(whole rows: a line's cuts start at widget edges, so widths are never cropped). The lines sent
are the same: they are still chosen by the changed regions (``ChopsUpdate``'s spans), and each
cell of a changed region is taken from the frontmost widget there, which is rendered (a test
compares both compositors' updates byte for byte). Full renders (a resize, a screenshot) are
Textual's own.

Private Textual (``textual._compositor``, its ``_get_renders`` and ``_dirty_regions``): imported
only where ``hooks.hook_on("compositor")`` holds (``hooks.install_compositor``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from textual._compositor import Compositor
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

if TYPE_CHECKING:
    from textual._compositor import ChopsUpdate


class DirtyRowsCompositor(Compositor):
    """A ``Compositor`` whose partial updates render the changed rows of the changed widgets."""

    _changed: tuple[Region, ...] | None = None
    """The changed regions while a partial update renders (None otherwise)."""

    def render_partial_update(self) -> ChopsUpdate | None:
        """Textual's partial update, rendering only what the changed regions touch."""
        self._changed = tuple(self._dirty_regions)
        try:
            return super().render_partial_update()
        finally:
            self._changed = None

    def _get_renders(
        self, crop: Region | None = None
    ) -> Iterable[tuple[Region, Region, list[Strip]]]:
        changed = self._changed
        if changed is None or crop is None:
            yield from super()._get_renders(crop)
            return
        # Only the widgets under the changed regions' bounding box (a few of the screen's
        # thirty-odd: the header, the footer's keys are not), each region tested against them.
        box = Region.from_union(changed) if changed else Region()
        widgets = [
            (w, region, shown)
            for w, (region, clip) in self.visible_widgets.items()
            if (shown := region.intersection(clip)).overlaps(box)
        ]
        rows: dict[Widget, tuple[int, int]] = {}
        for area in changed:
            for widget, _, shown in widgets:  # front to back
                if not area.overlaps(shown):
                    continue
                top, bottom = rows.get(widget, (area.y, area.bottom))
                rows[widget] = (min(top, area.y), max(bottom, area.bottom))
                if shown.contains_region(area):
                    break  # it covers the area: nothing behind it shows there
        for widget, region, shown in widgets:
            span = rows.get(widget)
            if span is None:
                continue
            top, bottom = span
            x, y, width, height = shown.intersection(
                Region(shown.x, top, shown.width, bottom - top)
            )
            if width and height:
                lines = widget.render_lines(Region(x - region.x, y - region.y, width, height))
                yield region, Region(x, y, width, height), lines
