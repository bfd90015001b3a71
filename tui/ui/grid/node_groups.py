"""Node groups of GPU panels for a console over many nodes' agents: a heading per node, then that
node's grid. A node whose agent stopped answering keeps its last panels, dimmed, and its heading
says so with the time since its last answer."""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from tui.fleet.snapshot import FleetSnapshot, NodeStatus
from tui.ui.grid.gpu_grid import GpuGrid


def heading(status: NodeStatus, gpus: int, now: float) -> str:
    """The words above a node's panels.

    Args:
        status: The node and whether its agent answers.
        gpus: How many GPU panels it has.
        now: time.time(), for the age of its last answer.

    Returns:
        e.g. ``n2 · 127.0.0.1:9402 · 8 GPUs · unreachable, last answer 12 s ago``.
    """
    parts = [status.name]
    if status.address != status.name:
        parts.append(status.address)
    parts.append(f"{gpus} GPU{'s' if gpus != 1 else ''}")
    if status.reachable:
        parts.append("live" + (" (read-only)" if status.readonly else ""))
    elif status.last_answer_at is None:
        parts.append("unreachable, never answered")
    else:
        parts.append(f"unreachable, last answer {max(0.0, now - status.last_answer_at):.0f} s ago")
    return " · ".join(parts)


class NodeGroup(Vertical):
    """One node: its heading and its grid."""

    DEFAULT_CSS = """
    NodeGroup {
        height: 1fr;
    }
    NodeGroup > .node-heading {
        height: 1;
        color: $text;
        text-style: bold;
        background: $panel;
        padding: 0 1;
    }
    NodeGroup.-unreachable > .node-heading {
        color: $warning;
        background: $panel-darken-1;
    }
    NodeGroup.-unreachable > GpuGrid {
        opacity: 55%;
    }
    """

    def compose(self) -> ComposeResult:
        """Heading, grid."""
        yield Static("", classes="node-heading")
        yield GpuGrid()


class NodeGroups(VerticalScroll, can_focus=False):
    """Every node's group, in the console's node order. The screen binds ``fleet`` and
    ``selected`` as it does for ``GpuGrid``."""

    DEFAULT_CSS = """
    NodeGroups {
        height: 1fr;
    }
    """

    fleet: reactive[FleetSnapshot] = reactive(FleetSnapshot, always_update=True, repaint=False)
    """The merged fleet of every node (panels carry their node)."""
    selected: reactive[int] = reactive(0, repaint=False)
    """The selected panel's GPU number."""
    marked: reactive[frozenset[int]] = reactive(frozenset, repaint=False)
    """GPUs marked (space, ``m``) for the next operation; each grid marks its own."""

    async def watch_fleet(self, fleet: FleetSnapshot) -> None:
        """Build a group per node when the nodes change; hand each grid its node's panels."""
        names = tuple(status.name for status in fleet.nodes)
        groups = list(self.query_children(NodeGroup))
        if tuple(g.name for g in groups) != names:
            await self.remove_children()
            groups = [NodeGroup(name=name) for name in names]
            await self.mount_all(groups)
        now = time.time()
        for group, status in zip(groups, fleet.nodes, strict=True):
            panels = tuple(p for p in fleet.panels if p.node == status.name)
            group.set_class(not status.reachable, "-unreachable")
            group.query_one(".node-heading", Static).update(heading(status, len(panels), now))
            grid = group.query_one(GpuGrid)
            grid.fleet = FleetSnapshot(panels=panels, taken_at=fleet.taken_at)
            grid.selected = self.selected
            grid.marked = self.marked

    def watch_marked(self, marked: frozenset[int]) -> None:
        """Hand the marks to every grid (each shows those of its panels)."""
        for grid in self.query(GpuGrid):
            grid.marked = marked

    def watch_selected(self, selected: int) -> None:
        """Move the selection in every grid (only one has the GPU)."""
        for grid in self.query(GpuGrid):
            grid.selected = selected
