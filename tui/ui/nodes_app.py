"""The console over many nodes' agents: the usual console with its panels in node groups and two
keys for a whole node (``N`` relaunch the node, ``X`` stop the node); the GPU keys (``k``, ``r``,
``c``) act on the selected GPU and the fleet keys (``K``, ``R``, ``b``, ``o``) on every node."""

from __future__ import annotations

from textual.binding import Binding

from tui.control.stop import StopMode
from tui.fleet.snapshot import NODE_STRIDE
from tui.ui.app import FleetApp
from tui.ui.confirm import ConfirmScreen
from tui.ui.describe import describe_servers
from tui.ui.messages import KillRequested, RelaunchRequested
from tui.ui.sources import Intent
from tui.ui.stop_screen import StopScreen


class NodesApp(FleetApp):
    """``FleetApp`` in node groups, with the per-node operations."""

    BINDINGS = [
        *FleetApp.BINDINGS,
        Binding("N", "relaunch_node", "Relaunch node", id="nodes.relaunch"),
        Binding("X", "stop_node", "Stop node", id="nodes.stop"),
    ]

    def _node_gpus(self) -> tuple[str, tuple[int, ...]]:
        """The selected panel's node and every GPU of it."""
        selected = self.main_screen.selected
        position = selected // NODE_STRIDE
        panels = [p for p in self.fleet.panels if p.gpu_index // NODE_STRIDE == position]
        node = panels[0].node if panels else f"node {position}"
        return node, tuple(p.gpu_index for p in panels)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The node keys need a backend that relaunches/stops and a node with GPUs."""
        intents = {"relaunch_node": Intent.RELAUNCH, "stop_node": Intent.KILL}
        if action in intents:
            return (self.actions.supports(intents[action]) and bool(self._node_gpus()[1])) or None
        return True

    def action_relaunch_node(self) -> None:
        """Relaunch every server of the selected panel's node, after a confirmation."""
        node, gpus = self._node_gpus()

        def done(confirmed: bool | None) -> None:
            if confirmed:
                self.main_screen.post_message(RelaunchRequested(gpus))

        self.push_screen(
            ConfirmScreen(
                f"Relaunch all {len(gpus)} servers of node {node}?",
                describe_servers(self.fleet, gpus),
            ),
            done,
        )

    def action_stop_node(self) -> None:
        """Stop every server of the selected panel's node, the way the operator chooses."""
        node, gpus = self._node_gpus()

        def done(mode: StopMode | None) -> None:
            if mode is not None:
                self.main_screen.post_message(KillRequested(gpus, mode))

        self.push_screen(
            StopScreen(
                f"Stop all {len(gpus)} servers of node {node}?", describe_servers(self.fleet, gpus)
            ),
            done,
        )
