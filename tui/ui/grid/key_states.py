"""Which of the grid's keys apply now, and why one does not: one table for both (a mixin of
``MainScreen``). ``check_operation`` answers Textual (True; None: shown disabled; False: hidden)
and ``disabled_reason`` the operator, who is told why when a key that is off is pressed
(``tui.ui.gate.why_key_is_off``): a disabled key did nothing, silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui.fleet.snapshot import FleetSnapshot
from tui.ui.describe import adoptable
from tui.ui.sources import Adopter, FleetActions, Intent

if TYPE_CHECKING:
    from textual.app import App

UNSUPPORTED: dict[Intent, str] = {
    Intent.PIPELINE: "this console knows no generation pipeline to start or stop",
    Intent.KILL: "this console's backend cannot stop servers (it only watches ports)",
    Intent.RELAUNCH: "this console's backend cannot relaunch servers (it only watches ports)",
    Intent.TUNE: "this console's backend cannot apply profiles (it only watches ports)",
}
"""Why a key is off when the backend lacks its intent, where 'cannot <intent>' reads badly."""


class KeyStates:
    """The table of the grid's keys (mixed into ``MainScreen``)."""

    actions: FleetActions
    fleet: FleetSnapshot
    selected: int
    node_groups: bool

    if TYPE_CHECKING:  # provided by the screen
        app: App[None]

        @property
        def _indices(self) -> list[int]: ...

        def _node_gpus(self) -> tuple[str, tuple[int, ...]]: ...

        def intent_of(self, action: str, parameters: tuple[object, ...]) -> Intent | None: ...

    def check_operation(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Operation keys show disabled (None) without backend support or without GPUs (the
        intent of each key is declared once, in ``tui.ui.readonly.BINDING_INTENTS``)."""
        return self._operation_state(action, parameters)[0]

    def disabled_reason(self, action: str, parameters: tuple[object, ...]) -> str:
        """Why ``check_operation`` says no now (the same table)."""
        return self._operation_state(action, parameters)[1]

    def _operation_state(
        self, action: str, parameters: tuple[object, ...]
    ) -> tuple[bool | None, str]:
        """(whether the key applies now: True, None shown disabled or False hidden; why not)."""
        if action == "operation_report":  # shown while an operation has a report to open
            running = getattr(self.app, "operation", None) is not None
            return running, "" if running else "no operation runs in the background"
        if action in ("relaunch_node", "stop_node", "mark_node") and not self.node_groups:
            return False, ""  # hidden: one node, the fleet keys are the node keys
        no_node = "the selected panel's node has no GPUs"
        if action == "mark_node":
            return (True, "") if self._node_gpus()[1] else (None, no_node)
        if action == "adopt":  # shown only where there is something to adopt
            if not isinstance(self.actions, Adopter):
                return False, "this console's backend cannot adopt servers (gpufleet adopt can)"
            if not adoptable(self.fleet):
                return False, "nothing to adopt: no server shown runs outside the fleet's records"
        intent = self.intent_of(action, parameters)
        if intent is None:
            return True, ""
        if not self.actions.supports(intent):
            return None, UNSUPPORTED.get(intent, f"this console's backend cannot {intent.value}")
        if action in ("relaunch_node", "stop_node"):
            return (True, "") if self._node_gpus()[1] else (None, no_node)
        if action in ("kill_selected", "relaunch_selected", "kill_all", "relaunch_all", "rollout"):
            return (True, "") if self.fleet.panels else (None, "the fleet has no GPU yet")
        if action == "canary" and not (self.selected in self._indices and len(self._indices) > 1):
            return None, "a canary needs the selected GPU and another GPU as its control"
        return True, ""
