"""The node keys of a console over many nodes' agents: ``N`` relaunches and ``X`` stops every
server of the selected panel's node, ``m`` marks (or unmarks) every GPU of it, so that ``b``
(rollback), ``o`` (rollout), ``k`` and ``r`` act on that node only (hidden on one node, where the
fleet keys are the node keys).
"""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message

from tui.fleet.snapshot import NODE_STRIDE, FleetSnapshot
from tui.ops.commands import Relaunch
from tui.ui.describe import describe_servers
from tui.ui.messages import OperationRequested

NODE_BINDINGS = [
    Binding("N", "relaunch_node", "Relaunch node", id="nodes.relaunch"),
    Binding("X", "stop_node", "Stop node", id="nodes.stop"),
    # Shown in the help (?) only: the Footer of a many-node console is full already.
    Binding("m", "mark_node", "Mark node", id="nodes.mark", show=False),
]
"""The node keys (``MainScreen.check_operation`` hides them on one node)."""


class NodeKeys:
    """Mixed into ``MainScreen``, which provides the fleet, the selection and the dialogs."""

    fleet: FleetSnapshot
    selected: int
    marked: frozenset[int]

    def _retitle(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def _confirm_then_post(self, title: str, affected: str, message: Message) -> None:
        raise NotImplementedError  # pragma: no cover

    def _ask_how_to_stop(self, title: str, gpus: tuple[int, ...]) -> None:  # pragma: no cover
        raise NotImplementedError

    def _node_gpus(self) -> tuple[str, tuple[int, ...]]:
        """The selected panel's node and every GPU of it."""
        position = self.selected // NODE_STRIDE
        panels = [p for p in self.fleet.panels if p.gpu_index // NODE_STRIDE == position]
        node = panels[0].node if panels else f"node {position}"
        return node, tuple(p.gpu_index for p in panels)

    def action_relaunch_node(self) -> None:
        """Relaunch every server of the selected panel's node, after a confirmation."""
        node, gpus = self._node_gpus()
        self._confirm_then_post(
            f"Relaunch all {len(gpus)} servers of node {node}?",
            describe_servers(self.fleet, gpus),
            OperationRequested(Relaunch(gpus)),
        )

    def action_stop_node(self) -> None:
        """Stop every server of the selected panel's node, the way the operator chooses."""
        node, gpus = self._node_gpus()
        self._ask_how_to_stop(f"Stop all {len(gpus)} servers of node {node}?", gpus)

    def action_mark_node(self) -> None:
        """Mark every GPU of the selected panel's node (the scope of the next ``b``, ``o``,
        ``k`` or ``r``); when all of them are marked already, unmark them."""
        gpus = frozenset(self._node_gpus()[1])
        self.marked = self.marked - gpus if gpus <= self.marked else self.marked | gpus
        self._retitle()
