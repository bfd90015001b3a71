"""Read-only mode: which intents change the fleet or the job, which keys perform them, and the
backend wrapper that refuses every change whatever asked for it.

One declaration classifies the console: ``BINDING_INTENTS`` names, for the id of every key
binding of every screen, the intent it performs (None: it only looks, moves or closes). The
screens disable a binding in read-only mode when its intent ``changes_fleet``
(``tui.ui.gate.ReadOnlyGate``); ``ReadOnlyActions`` refuses at the core boundary, so even a key
that slipped past reaches nothing. Command modes reuse ``changes_fleet`` for their commands.
No Textual here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NoReturn

from tui.profiles import Profile
from tui.retune.preflight import Preflight
from tui.ui.sources import FleetActions, Intent, NoActions

READ_ONLY = "read-only"
"""What the Footer and the palette say about a key that read-only mode disables."""

VIEWING_INTENTS: frozenset[Intent] = frozenset({Intent.JOURNAL})
"""Intents that only show something. Every other intent changes the fleet or the job, so an
intent added later is refused in read-only mode until it is listed here."""


def changes_fleet(intent: Intent) -> bool:
    """Whether performing ``intent`` changes the fleet, the job or saved files.

    Args:
        intent: An operation family (a key's, a palette command's or a typed command's).

    Returns:
        False only for the viewing intents (``VIEWING_INTENTS``).
    """
    return intent not in VIEWING_INTENTS


BINDING_INTENTS: Mapping[str, Intent | None] = MappingProxyType(
    {
        # app
        "app.help": None,
        "app.quit": None,  # asks; stopping the fleet there is its own key (quit.stop)
        # grid
        "grid.left": None,
        "grid.right": None,
        "grid.up": None,
        "grid.down": None,
        **{f"grid.select_{digit}": None for digit in range(10)},
        "grid.detail": None,
        "grid.operation": None,  # opens the background operation's report
        "grid.command": None,  # opens the command bar; each command is checked by its intent
        "command.close": None,
        "command.run": None,  # each command is checked by its intent (command mode)
        "command.complete": None,
        "grid.mark": None,  # marks GPUs; k and r then ask as usual
        "grid.unmark": None,
        "grid.filter": None,
        "filter.clear": None,
        "filter.keep": None,
        "pipeline.pane": None,
        "pipeline.start_stop": Intent.PIPELINE,
        "pipeline.range_shorter": None,
        "pipeline.range_longer": None,
        "fleet.kill": Intent.KILL,
        "fleet.kill_all": Intent.KILL,
        "fleet.relaunch": Intent.RELAUNCH,
        "fleet.relaunch_all": Intent.RELAUNCH,
        "fleet.tune": Intent.TUNE,
        "fleet.tune_all": Intent.TUNE,
        "fleet.rollback": Intent.ROLLBACK,
        "fleet.journal": Intent.JOURNAL,
        "fleet.canary": Intent.CANARY,
        "fleet.rollout": Intent.ROLLOUT,
        "fleet.adopt": Intent.ADOPT,
        "grid.autotune": None,  # opens the screen; its own keys start, pause, stop the search
        "nodes.relaunch": Intent.RELAUNCH,
        "nodes.stop": Intent.KILL,
        "nodes.mark": None,  # marks a node's GPUs; b, o, k and r then ask as usual
        # detail
        "detail.back": None,
        "detail.kill": Intent.KILL,
        "detail.relaunch": Intent.RELAUNCH,
        # the log viewer (in the detail): reading only; the pager reads a copy of the log
        "log.close": None,
        "log.filter": None,
        "log.exclude": None,
        "log.search": None,
        "log.pause": None,
        "log.wrap": None,
        "log.next_error": None,
        "log.prev_error": None,
        "log.next_alloc": None,
        "log.prev_alloc": None,
        "log.pager": None,
        "log.up": None,
        "log.down": None,
        "log.left": None,
        "log.right": None,
        "log.page_up": None,
        "log.page_down": None,
        "log.top": None,
        "log.follow": None,
        # journal
        "journal.close": None,
        "journal.open": None,
        "journal.entry.close": None,
        # tuning form (saving writes a profile: part of tuning)
        "tune.cancel": None,
        "tune.save": Intent.TUNE,
        "tune.apply": Intent.TUNE,
        "tune.scope": None,
        "scope.one": None,  # answers whom a form's change is for; Save or Apply then ask as usual
        "scope.all": None,
        "scope.cancel": None,
        # profile picker, apply, rollout and canary screens
        "picker.cancel": None,
        "apply.close": None,
        "apply.rollback": Intent.ROLLBACK,
        "rollout.close": None,
        "canary.close": None,
        "canary.rollout": Intent.ROLLOUT,
        # autotune screen
        "autotune.close": None,
        "autotune.start": Intent.AUTOTUNE,
        "autotune.pause": Intent.AUTOTUNE,
        "autotune.resume": Intent.AUTOTUNE,
        "autotune.stop": Intent.AUTOTUNE,
        "autotune.form.cancel": None,
        "autotune.form.start": Intent.AUTOTUNE,
        # dialogs
        "confirm.yes": Intent.CONFIRM,
        "adopt.cancel": None,
        "confirm.no": None,
        "dialog.left": None,  # the arrows move among a dialog's buttons
        "form.next": None,  # Tab and shift+tab move among a form's fields
        "form.previous": None,
        "dialog.right": None,
        "rollback.all_at_once": Intent.ROLLBACK,
        "stop.drain": Intent.KILL,
        "stop.terminate": Intent.KILL,
        "stop.kill": Intent.KILL,
        "stop.cancel": None,
        "quit.stop": Intent.STOP_FLEET,
        "quit.keep": None,
        "quit.cancel": None,
        "quitfail.retry": Intent.STOP_FLEET,
        "quitfail.leave": None,  # quits, leaving running what could not be stopped
        "quitfail.stay": None,
        "help.close": None,
        # the alerts list (tui.ui.alerts): it only looks
        "app.alerts": None,
        "alerts.back": None,
    }
)
"""The intent of every key binding of the console, by binding id (None: changes nothing)."""


def binding_changes_fleet(binding_id: str | None) -> bool:
    """Whether the binding with this id changes the fleet or the job.

    An id missing from ``BINDING_INTENTS`` counts as changing: read-only mode fails closed.

    Args:
        binding_id: ``Binding.id``.

    Returns:
        True when the binding must be disabled in read-only mode.
    """
    if binding_id is None or binding_id not in BINDING_INTENTS:
        return True
    intent = BINDING_INTENTS[binding_id]
    return intent is not None and changes_fleet(intent)


class ReadOnlyRefused(RuntimeError):
    """A changing operation reached the backend of a read-only console."""

    def __init__(self, operation: str) -> None:
        """Args:
        operation: The backend method that was refused.
        """
        super().__init__(f"read-only console: {operation} refused (it changes the fleet or job)")
        self.operation = operation
        """The refused method."""


class ReadOnlyActions(NoActions):
    """A ``FleetActions`` that reads through ``inner`` and refuses every change.

    ``supports`` says no to every changing intent, so the screens show those keys disabled; the
    changing methods raise ``ReadOnlyRefused`` without calling ``inner``.

    Args:
        inner: The real backend (``ConsoleBackend``) or a test's fake.
    """

    READING = frozenset(
        {"supports", "profile_names", "current_profile", "load_profile", "preflight"}
    )
    """The methods that only read; every other method of ``FleetActions`` refuses."""

    def __init__(self, inner: FleetActions) -> None:
        self.inner = inner
        """The backend reads go to."""

    def supports(self, intent: Intent) -> bool:
        """Only viewing intents the inner backend supports."""
        return not changes_fleet(intent) and self.inner.supports(intent)

    # --- reading ---------------------------------------------------------------------------

    def profile_names(self) -> list[str]:
        """The inner backend's profile names. Blocking."""
        return self.inner.profile_names()

    def current_profile(self) -> str | None:
        """The inner backend's running profile. Blocking."""
        return self.inner.current_profile()

    def load_profile(self, name: str) -> Profile:
        """The inner backend's profile ``name``. Blocking."""
        return self.inner.load_profile(name)

    async def preflight(self, profile: Profile, gpus: tuple[int, ...]) -> list[Preflight]:
        """A prediction only: nothing is stopped or written."""
        return await self.inner.preflight(profile, gpus)

    # --- refused ---------------------------------------------------------------------------

    def refuse(self, operation: str) -> NoReturn:
        """Every changing method lands here, without calling ``inner``."""
        raise ReadOnlyRefused(operation)
