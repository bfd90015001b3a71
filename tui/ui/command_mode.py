"""``:`` command mode on the main screen: the bar, and each command performed by its key's flow.

A command goes through the same doors as its key: the same confirmation (or stop, relaunch,
tuning) dialog, the same command up to the app, the same kind. Before anything is asked,
read-only mode refuses a command whose intent changes the fleet (``tui.ui.readonly``), a
port without its kind refuses it, and a running background operation refuses a new one:
each in one line in the bar's place, the line kept for correction.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from textual import work
from textual.binding import Binding
from textual.message import Message

from tui.fleet.snapshot import FleetSnapshot
from tui.ops.commands import Apply, Canary, Kind, Rollout
from tui.ops.port import Fleet
from tui.ui.command_bar import CommandBar, CommandEntered
from tui.ui.command_line import CommandError, CommandLine, parse_command
from tui.ui.describe import describe_servers
from tui.ui.gate import app_is_read_only
from tui.ui.grid.scope import scope_words
from tui.ui.messages import OperationRequested, PanelOpened
from tui.ui.readonly import READ_ONLY, changes_fleet
from tui.ui.rollout.describe import compact_range, rollout_question

if TYPE_CHECKING:
    from textual.app import App
    from textual.worker import Worker

COMMAND_BINDING = Binding(":", "command", "Command", id="grid.command")
"""``:`` opens the command bar (the commands are checked one by one, not the key)."""


class CommandMode:
    """The main screen's command mode (mixed into ``MainScreen``, which provides the flows)."""

    port: Fleet
    fleet: FleetSnapshot
    selected: int
    app: App[None]

    # --- provided by the screen ------------------------------------------------------------

    def _bar(self) -> CommandBar:  # pragma: no cover
        raise NotImplementedError

    def action_journal(self) -> None:  # pragma: no cover
        raise NotImplementedError

    if TYPE_CHECKING:  # GridHabits' and OperationKeys', after this mixin in the screen's MRO:
        # no stub here (a stub would stand in front of them)

        def scope(self) -> tuple[int, ...] | None: ...

        def _busy(self) -> bool: ...

        def _confirm_then_post(
            self, title: str, affected: str, message: Message, *, confirm: str = "Yes"
        ) -> None: ...

        def _ask_how_to_stop(self, title: str, gpus: tuple[int, ...]) -> None: ...

        def _relaunch_flow(self, gpus: tuple[int, ...]) -> Worker[None]: ...

        def _tune_flow(self, gpu: int | None) -> None: ...

        def action_rollback(self) -> None: ...

    # --- the bar ---------------------------------------------------------------------------

    def action_command(self) -> None:
        """Open the command bar now, so the keys typed after ``:`` reach it; the profile names
        for its completion are read in a thread meanwhile."""
        self._bar().open()
        self._complete_bar()

    @work(group="command", exclusive=True, exit_on_error=False)
    async def _complete_bar(self) -> None:
        profiles = await asyncio.to_thread(self.port.reads.profile_names)
        self._bar().complete_with(profiles)

    def on_command_entered(self, message: CommandEntered) -> None:
        """Parse the line and perform it; a bad line is one error line, the bar kept open."""
        message.stop()
        self._take_command(message.line)

    @work(group="command", exclusive=True, exit_on_error=False)
    async def _take_command(self, line: str) -> None:
        profiles = await asyncio.to_thread(self.port.reads.profile_names)
        fleet = [panel.gpu_index for panel in self.fleet.panels]
        try:
            command = parse_command(line, fleet, profiles)
            self._refuse(command)
        except CommandError as error:
            self._bar().notify(f":{line.strip()}: {error}", title="Command", severity="error")
            return
        self._bar().action_close()
        self.perform(command)

    def _refuse(self, command: CommandLine) -> None:
        """Raise CommandError when read-only mode, the port or a running operation refuses."""
        kind = command.intent
        if kind is None:
            return
        if changes_fleet(kind) and app_is_read_only(self.app):
            raise CommandError(f"{command.verb} changes the fleet; the console is {READ_ONLY}")
        capabilities = self.port.capabilities()
        if kind not in capabilities:
            raise CommandError(f"{command.verb}: {capabilities.reason(kind)}")
        if kind is not Kind.JOURNAL and self._busy():
            raise CommandError("an operation is running (w opens its report)")

    def perform(self, command: CommandLine) -> None:
        """Perform a checked command through its key's flow.

        Args:
            command: A parsed command that passed ``_refuse``.
        """
        verb, gpus, profile = command.verb, command.gpus, command.profile or ""
        if verb == "apply":
            title = f"Relaunch GPUs {compact_range(gpus)} with {profile}?"
            affected = describe_servers(self.fleet, gpus)
            apply = OperationRequested(Apply(profile, gpus))
            self._confirm_then_post(title, affected, apply, confirm="Restart")
        elif verb == "canary":
            title = f"Canary {profile} on GPU {gpus[0]}, the other GPUs as control?"
            affected = describe_servers(self.fleet, gpus)
            canary = OperationRequested(Canary(profile, gpus[0]))
            self._confirm_then_post(title, affected, canary, confirm="Start canary")
        elif verb == "rollout":
            # The marks scope a typed rollout as they scope ``o`` (else the whole fleet).
            scope = self.scope()
            fleet = tuple(panel.gpu_index for panel in self.fleet.panels)
            title, detail = rollout_question(profile, scope or fleet, command.batch)
            detail = f"Scope: {scope_words(self.fleet, scope)}\n{detail}"
            request = OperationRequested(Rollout(profile, command.batch, scope))
            self._confirm_then_post(title, detail, request, confirm="Roll out")
        elif verb == "rollback":
            self.action_rollback()
        elif verb == "kill":
            self._ask_how_to_stop(f"Stop the servers on GPUs {compact_range(gpus)}?", gpus)
        elif verb == "relaunch":
            self._relaunch_flow(gpus)
        elif verb == "tune":
            self._tune_flow(gpus[0] if gpus else None)
        elif verb == "logs":
            gpu = gpus[0] if gpus else self.selected
            self.selected = gpu
            self._bar().post_message(PanelOpened(gpu))
        elif verb == "journal":
            self.action_journal()
