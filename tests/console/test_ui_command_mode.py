"""`:` command mode: the parser's commands and one-line errors, and Pilot tests of what each
typed command reaches (the same dialogs and backend calls as its key; read-only refuses it)."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot
from ui_helpers import RecordingFleet, finish_actions, make_app, settle, wait_for

from tui.ops.commands import Apply, Kill, Rollout
from tui.ui.app import FleetApp
from tui.ui.command_bar import CommandBar
from tui.ui.command_line import CommandError, CommandLine, parse_command
from tui.ui.confirm import ConfirmScreen
from tui.ui.detail.detail_screen import DetailScreen
from tui.ui.journal.journal_screen import JournalScreen
from tui.ui.main_screen import MainScreen
from tui.ui.stop_screen import StopScreen

FLEET = (0, 1, 2, 3, 4, 5, 6)
PROFILES = ("sim-baseline", "sim-aggressive")


@pytest.mark.parametrize(
    ("line", "command"),
    [
        ("apply sim-aggressive 3,5", CommandLine("apply", "sim-aggressive", (3, 5))),
        ("apply sim-aggressive", CommandLine("apply", "sim-aggressive", FLEET)),
        ("APPLY sim-aggressive 0-2,6", CommandLine("apply", "sim-aggressive", (0, 1, 2, 6))),
        ("canary sim-aggressive 2", CommandLine("canary", "sim-aggressive", (2,))),
        ("rollout sim-aggressive", CommandLine("rollout", "sim-aggressive")),
        ("rollout sim-aggressive 2", CommandLine("rollout", "sim-aggressive", batch=2)),
        ("kill 3", CommandLine("kill", gpus=(3,))),
        ("kill all", CommandLine("kill", gpus=FLEET)),
        ("relaunch 1,2", CommandLine("relaunch", gpus=(1, 2))),
        ("logs 4", CommandLine("logs", gpus=(4,))),
        ("tune", CommandLine("tune")),
        ("tune 2", CommandLine("tune", gpus=(2,))),
        ("journal", CommandLine("journal")),
        ("rollback", CommandLine("rollback")),
    ],
)
def test_commands_parse(line: str, command: CommandLine) -> None:
    assert parse_command(line, FLEET, PROFILES) == command


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("", "type a command"),
        ("frob 3", "unknown command 'frob'; commands: apply, canary"),
        ("apply", "usage: apply NAME [GPUS]"),
        ("apply nope 3", "no profile 'nope'; profiles: sim-baseline, sim-aggressive"),
        ("apply sim-aggressive 9", "GPU 9 is not in the fleet; GPUs of the fleet: 0, 1"),
        ("apply sim-aggressive x", "'x' is not a GPU list like 3,5 or 0-2 or all"),
        ("canary sim-aggressive 2,3", "'2,3': one GPU"),
        ("rollout sim-aggressive 0", "BATCH '0': allowed 1..7"),
        ("kill", "usage: kill GPUS"),
        ("journal now", "usage: journal"),
    ],
)
def test_bad_commands_are_one_line_naming_the_word(line: str, error: str) -> None:
    with pytest.raises(CommandError) as raised:
        parse_command(line, FLEET, PROFILES)
    assert error in str(raised.value) and "\n" not in str(raised.value)


def _app(actions: RecordingFleet, **kwargs: Any) -> FleetApp:
    return make_app(actions=actions, **kwargs)


async def _type(pilot: Pilot[None], app: FleetApp, line: str) -> None:
    await pilot.press("colon")
    bar = app.main_screen.query_one(CommandBar)
    await wait_for(pilot, lambda: bar.display and bar.has_focus, "the command bar")
    bar.value = line
    await pilot.press("enter")


def _shown(bar: CommandBar) -> str:
    """What the bar shows: the typed text and, after it, the completion on offer."""
    return bar.render_line(0).text


def _errors(app: FleetApp) -> list[str]:
    return [n.message for n in app._notifications if n.severity == "error"]


async def test_apply_command_confirms_then_reaches_the_backend() -> None:
    actions = RecordingFleet()
    app = _app(actions)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await _type(pilot, app, "apply sim-aggressive 3,5")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert confirm.title_text == "Relaunch GPUs 3,5 with sim-aggressive?"
        await pilot.press("y")
        await finish_actions(pilot, app)
        assert not app.main_screen.query_one(CommandBar).display
    assert Apply("sim-aggressive", (3, 5)) in actions.commands


async def test_a_typed_rollout_is_scoped_by_the_marks_as_o_is() -> None:
    actions = RecordingFleet()
    app = _app(actions)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("2", "space", "4", "space")  # mark GPUs 2 and 4
        await _type(pilot, app, "rollout sim-aggressive")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert confirm.affected.startswith("Scope: GPUs 2,4\n"), confirm.affected
        await pilot.press("y")
        await finish_actions(pilot, app)
    assert Rollout("sim-aggressive", 1, (2, 4)) in actions.commands


async def test_kill_logs_and_journal_commands_use_their_keys_flows() -> None:
    actions = RecordingFleet()
    app = _app(actions)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await _type(pilot, app, "kill 3")
        await wait_for(pilot, lambda: isinstance(app.screen, StopScreen), "how to stop")
        await pilot.press("d")
        await finish_actions(pilot, app)
        assert actions.commands == [Kill((3,))]
        await _type(pilot, app, "logs 4")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), "GPU 4's detail")
        detail = app.screen
        assert isinstance(detail, DetailScreen) and detail.gpu == 4
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), "the grid")
        await _type(pilot, app, "journal")
        await wait_for(pilot, lambda: isinstance(app.screen, JournalScreen), "the journal")


async def test_a_bad_command_is_one_error_line_and_the_bar_stays() -> None:
    actions = RecordingFleet()
    app = _app(actions)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await _type(pilot, app, "canary nope 2")
        await wait_for(pilot, lambda: bool(_errors(app)), "the error")
        assert _errors(app) == [
            ":canary nope 2: no profile 'nope'; profiles: " + ", ".join(actions.profile_names())
        ]
        bar = app.main_screen.query_one(CommandBar)
        assert bar.display and bar.value == "canary nope 2"  # kept for correction
        await pilot.press("escape")
        assert not bar.display and isinstance(app.screen, MainScreen)
    assert actions.commands == []


async def test_tab_completes_the_command_and_the_profile() -> None:
    app = _app(RecordingFleet())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("colon")
        bar = app.main_screen.query_one(CommandBar)
        await wait_for(pilot, lambda: bar.has_focus, "the bar")
        await pilot.press("c", "a")
        await wait_for(pilot, lambda: "canary" in _shown(bar), "a completion")
        await pilot.press("tab")
        assert bar.value == "canary "
        await pilot.press("s", "i", "m", "-", "a")
        await wait_for(pilot, lambda: "canary sim-aggressive " in _shown(bar), "the profile")
        await pilot.press("tab")
        assert bar.value == "canary sim-aggressive "


async def test_read_only_refuses_a_changing_command_and_allows_a_viewing_one() -> None:
    actions = RecordingFleet()
    app = _app(actions, readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await _type(pilot, app, "kill 3")
        await wait_for(pilot, lambda: bool(_errors(app)), "the refusal")
        assert _errors(app) == [":kill 3: kill changes the fleet; the console is read-only"]
        assert isinstance(app.screen, MainScreen)
        await pilot.press("escape")
        await _type(pilot, app, "journal")
        await wait_for(pilot, lambda: isinstance(app.screen, JournalScreen), "the journal")
    assert actions.commands == []
