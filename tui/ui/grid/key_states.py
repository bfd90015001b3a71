"""Which of the grid's keys apply now, and why one does not: one table for both (a mixin of
``MainScreen``). ``check_operation`` answers Textual (True; None: shown disabled; False: hidden)
and ``disabled_reason`` the operator, who is told why when a key that is off is pressed
(``tui.ui.gate.why_key_is_off``): a disabled key did nothing, silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui.fleet.snapshot import FleetSnapshot
from tui.ops.commands import Kind
from tui.ops.port import Fleet
from tui.ui.describe import adoptable
from tui.ui.readonly import Intent

if TYPE_CHECKING:
    from tui.ui.operation_host import OperationHost


class KeyStates:
    """The table of the grid's keys (mixed into ``MainScreen``)."""

    port: Fleet
    fleet: FleetSnapshot
    selected: int
    node_groups: bool

    if TYPE_CHECKING:  # provided by the screen
        app: OperationHost

        @property
        def _indices(self) -> list[int]: ...

        def _node_gpus(self) -> tuple[str, tuple[int, ...]]: ...

        def intent_of(self, action: str, parameters: tuple[object, ...]) -> Intent | None: ...

    def check_operation(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Operation keys show disabled (None) when the port cannot run them or without GPUs
        (the intent of each key is declared once, in ``tui.ui.readonly.BINDING_INTENTS``)."""
        return self._operation_state(action, parameters)[0]

    def disabled_reason(self, action: str, parameters: tuple[object, ...]) -> str:
        """Why ``check_operation`` says no now (the same table)."""
        return self._operation_state(action, parameters)[1]

    def _operation_state(
        self, action: str, parameters: tuple[object, ...]
    ) -> tuple[bool | None, str]:
        """(whether the key applies now: True, None shown disabled or False hidden; why not)."""
        if action == "operation_report":  # shown while an operation has a report to open
            running = self.app.operation is not None
            return running, "" if running else "no operation runs in the background"
        if action in ("relaunch_node", "stop_node", "mark_node") and not self.node_groups:
            return False, ""  # hidden: one node, the fleet keys are the node keys
        no_node = "the selected panel's node has no GPUs"
        if action == "mark_node":
            return (True, "") if self._node_gpus()[1] else (None, no_node)
        capabilities = self.port.capabilities()
        if action == "adopt":  # shown only where there is something to adopt
            if Kind.ADOPT not in capabilities:
                return False, capabilities.reason(Kind.ADOPT)
            if not adoptable(self.fleet):
                return False, "nothing to adopt: no server shown runs outside the fleet's records"
        intent = self.intent_of(action, parameters)
        if not isinstance(intent, Kind):  # a view, or a dialog's yes: never a command here
            return True, ""
        if intent not in capabilities:
            return None, capabilities.reason(intent)
        if action in ("relaunch_node", "stop_node"):
            return (True, "") if self._node_gpus()[1] else (None, no_node)
        if action in ("kill_selected", "relaunch_selected", "kill_all", "relaunch_all", "rollout"):
            return (True, "") if self.fleet.panels else (None, "the fleet has no GPU yet")
        if action == "canary" and not (self.selected in self._indices and len(self._indices) > 1):
            return None, "a canary needs the selected GPU and another GPU as its control"
        return True, ""
