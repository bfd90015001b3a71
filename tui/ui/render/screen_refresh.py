"""``ScreenRefresh``: a widget whose repaints of regions are marked on its screen at once.

The grid's panels and the fleet's row change a few cells at each reading; this skips the two
messages Textual's ``refresh`` costs for each (see ``ScreenRefresh.refresh``). Private Textual
(the widget's caches, ``_set_dirty``, the screen's ``_dirty_widgets``): used only where
``hooks.hook_on("refresh")`` holds; elsewhere ``refresh`` is Textual's own.
"""

from __future__ import annotations

from typing import Self

from textual.dom import NoScreen
from textual.geometry import Region
from textual.widget import Widget

from tui.ui.render.hooks import hook_on


class ScreenRefresh(Widget):
    """A widget whose ``refresh`` of regions is marked on its screen directly."""

    def refresh(
        self,
        *regions: Region,
        repaint: bool = True,
        layout: bool = False,
        recompose: bool = False,
    ) -> Self:
        """Textual's, but a repaint of regions of a shown widget is marked on its screen at once.

        Why: Textual's ``refresh`` wakes this widget's own message pump (a ``Prompt``), whose idle
        handler then posts an ``Update`` to the screen's pump: two messages and a task step for
        each changed panel at each reading (with seven busy servers on the H200, ~0.6 ms a
        second, 6% of the console). What the screen does with that ``Update`` is done here
        directly, once per panel, and the screen's pump is woken once for all of them
        (``Screen._on_update`` and ``Widget._check_refresh``, textual 8.2; the
        ``DirtyRowsCompositor`` relies on the same release). Anything else is Textual's own.
        """
        if not regions or not repaint or layout or recompose or not hook_on("refresh"):
            return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
        if not self._is_mounted:
            return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
        try:
            screen = self.screen
        except NoScreen:
            return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
        self._layout_cache.clear()
        self._set_dirty(*regions)
        self.clear_cached_dimensions()
        self._rich_style_cache.clear()
        if self.display and screen in screen._compositor:
            screen._dirty_widgets.add(self)
            screen.check_idle()
        return self
