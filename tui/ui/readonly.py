"""Read-only mode: which intents change the fleet or the job, and which keys perform them.

One declaration classifies the console: ``BINDING_INTENTS`` names, for the id of every key
binding of every screen, the intent it performs (None: it only looks, moves or closes). The
screens disable a binding in read-only mode when its intent ``changes_fleet``
(``tui.ui.gate.ReadOnlyGate``); the read-only port (``tui.ops.port.ReadOnlyFleet``) refuses
every command, so even a key that slipped past reaches nothing. Command modes reuse
``changes_fleet`` for their commands. No Textual here.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from tui.ops.commands import Kind
from tui.ops.port import READ_ONLY as READ_ONLY  # the words the screens show


class Says(StrEnum):
    """An intent of a dialog's key rather than of a command."""

    CONFIRM = "confirm"
    """Say yes in a dialog that asks before a change (every confirmation asks about one)."""


Intent = Kind | Says
"""What a key does: a kind of command, or a dialog's yes."""

VIEWING_INTENTS: frozenset[Intent] = frozenset({Kind.JOURNAL})
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
        "pipeline.start_stop": Kind.PIPELINE,
        "pipeline.range_shorter": None,
        "pipeline.range_longer": None,
        "fleet.kill": Kind.KILL,
        "fleet.kill_all": Kind.KILL,
        "fleet.relaunch": Kind.RELAUNCH,
        "fleet.relaunch_all": Kind.RELAUNCH,
        "fleet.tune": Kind.TUNE,
        "fleet.tune_all": Kind.TUNE,
        "fleet.rollback": Kind.ROLLBACK,
        "fleet.journal": Kind.JOURNAL,
        "fleet.canary": Kind.CANARY,
        "fleet.rollout": Kind.ROLLOUT,
        "fleet.adopt": Kind.ADOPT,
        "grid.autotune": None,  # opens the screen; its own keys start, pause, stop the search
        "nodes.relaunch": Kind.RELAUNCH,
        "nodes.stop": Kind.KILL,
        "nodes.mark": None,  # marks a node's GPUs; b, o, k and r then ask as usual
        # detail
        "detail.back": None,
        "detail.kill": Kind.KILL,
        "detail.relaunch": Kind.RELAUNCH,
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
        "tune.save": Kind.TUNE,
        "tune.apply": Kind.TUNE,
        "tune.scope": None,
        "scope.one": None,  # answers whom a form's change is for; Save or Apply then ask as usual
        "scope.all": None,
        "scope.cancel": None,
        # profile picker, apply, rollout and canary screens
        "picker.cancel": None,
        "apply.close": None,
        "apply.rollback": Kind.ROLLBACK,
        "rollout.close": None,
        "canary.close": None,
        "canary.rollout": Kind.ROLLOUT,
        # autotune screen
        "autotune.close": None,
        "autotune.start": Kind.AUTOTUNE,
        "autotune.pause": Kind.AUTOTUNE,
        "autotune.resume": Kind.AUTOTUNE,
        "autotune.stop": Kind.AUTOTUNE,
        "autotune.form.cancel": None,
        "autotune.form.start": Kind.AUTOTUNE,
        # dialogs
        "confirm.yes": Says.CONFIRM,
        "adopt.cancel": None,
        "confirm.no": None,
        "dialog.left": None,  # the arrows move among a dialog's buttons
        "form.next": None,  # Tab and shift+tab move among a form's fields
        "form.previous": None,
        "dialog.right": None,
        "rollback.all_at_once": Kind.ROLLBACK,
        "stop.drain": Kind.KILL,
        "stop.terminate": Kind.KILL,
        "stop.kill": Kind.KILL,
        "stop.cancel": None,
        "quit.stop": Kind.STOP_FLEET,
        "quit.keep": None,
        "quit.cancel": None,
        "quitfail.retry": Kind.STOP_FLEET,
        "quitfail.leave": None,  # quits, leaving running what could not be stopped
        "quitfail.stay": None,
        "help.close": None,
        # the replay's time cursor (gpufleet replay): it moves in the record, changes nothing
        "replay.back": None,
        "replay.forward": None,
        "replay.back_minute": None,
        "replay.forward_minute": None,
        "replay.start": None,
        "replay.end": None,
        "replay.now": None,
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
