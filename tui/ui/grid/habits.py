"""The grid's k9s habits on the main screen: ``/`` filters the panels, space marks GPUs.

Marked GPUs (space toggles the selected one, Escape clears every mark; ``●`` in their panels'
titles; on a console over many nodes' agents ``m`` marks the selected panel's whole node) are
what ``k`` (stop) and ``r`` (relaunch) act on; with none marked those keys act on the selected
GPU. ``b`` (rollback) and ``o`` (rollout) act on the marked GPUs too, and with
none marked on the whole fleet. The filter (``tui.ui.grid.filter``) hides the panels it does not
match; the arrows and digits move among the panels shown; the keys that act on every GPU still
mean the whole fleet. The header names the filter and the marks.
"""

from __future__ import annotations

from textual.binding import Binding

from tui.fleet.snapshot import NODE_STRIDE, FleetSnapshot
from tui.ui.grid.filter import filtered
from tui.ui.grid.filter_bar import FilterBar, FilterChanged
from tui.ui.rollout.describe import compact_range

HABIT_BINDINGS = [
    Binding("slash", "filter", "Filter", id="grid.filter"),
    Binding("space", "mark", "Mark", id="grid.mark"),
    Binding("escape", "unmark", "Clear filter, then marks", id="grid.unmark", show=False),
]
"""The keys of the habits (none changes the fleet: ``tui.ui.readonly`` lists them as views);
``/`` and space show in the Footer (a new operator did not find them)."""

MARK_NODE_BINDING = Binding("m", "mark_node", "Mark node", id="nodes.mark", show=False)
"""``m`` on a console over many nodes (``MainScreen.check_operation`` hides it on one node);
shown in the help (?) only: the Footer of a many-node console is full already."""


class GridHabits:
    """Mixed into ``MainScreen``, which declares the ``marked`` and ``grid_filter`` reactives."""

    fleet: FleetSnapshot
    selected: int
    marked: frozenset[int]
    grid_filter: str
    sub_title: str | None

    def _filter_bar(self) -> FilterBar:  # pragma: no cover
        raise NotImplementedError

    @property
    def _shown(self) -> list[int]:
        """The GPUs whose panels the filter keeps, in order (navigation moves among them)."""
        return [panel.gpu_index for panel in filtered(self.fleet, self.grid_filter).panels]

    def targets(self) -> tuple[int, ...]:
        """What ``k`` and ``r`` act on: the marked GPUs still in the fleet, else the selected."""
        fleet = {panel.gpu_index for panel in self.fleet.panels}
        marked = tuple(sorted(self.marked & fleet))
        return marked or (self.selected,)

    def scope(self) -> tuple[int, ...] | None:
        """What ``b`` (rollback) and ``o`` (rollout) act on: the marked GPUs still in the fleet,
        else None, the whole fleet (``tui.ui.grid.scope``)."""
        fleet = {panel.gpu_index for panel in self.fleet.panels}
        return tuple(sorted(self.marked & fleet)) or None

    def action_mark(self) -> None:
        """Mark the selected GPU for the next stop or relaunch, or unmark it."""
        self.marked = self.marked ^ {self.selected}
        self._retitle()

    def _node_gpus(self) -> tuple[str, tuple[int, ...]]:
        """The selected panel's node and every GPU of it."""
        position = self.selected // NODE_STRIDE
        panels = [p for p in self.fleet.panels if p.gpu_index // NODE_STRIDE == position]
        node = panels[0].node if panels else f"node {position}"
        return node, tuple(p.gpu_index for p in panels)

    def action_mark_node(self) -> None:
        """Mark every GPU of the selected panel's node (the scope of the next ``b``, ``o``,
        ``k`` or ``r``); when all of them are marked already, unmark them."""
        gpus = frozenset(self._node_gpus()[1])
        self.marked = self.marked - gpus if gpus <= self.marked else self.marked | gpus
        self._retitle()

    def action_unmark(self) -> None:
        """Escape: clear the kept filter first (k9s' habit; it stayed, the header the only sign
        of it), then every mark."""
        if self.grid_filter:
            self._filter_bar().action_clear()
            return
        self.marked = frozenset()
        self._retitle()

    def action_filter(self) -> None:
        """Open the filter bar on the current filter."""
        self._filter_bar().open(self.grid_filter)

    def on_filter_changed(self, message: FilterChanged) -> None:
        """Show only the panels the filter matches; keep the selection on one of them."""
        message.stop()
        self.grid_filter = message.text.strip()
        shown = self._shown
        if shown and self.selected not in shown:
            self.selected = shown[0]
        self._retitle()

    def _retitle(self) -> None:
        """The header: the GPU source, then the filter and the marks when there are any."""
        parts = [self.fleet.gpu_source]
        if self.grid_filter:
            parts.append(f"filter /{self.grid_filter} ({len(self._shown)} shown)")
        if self.marked:
            parts.append(f"marked GPUs {compact_range(sorted(self.marked))}")
        self.sub_title = " · ".join(p for p in parts if p)
