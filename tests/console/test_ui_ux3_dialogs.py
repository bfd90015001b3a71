"""The dialogs' keys through Pilot (issue 30, point 2: Cancel was focused on every dialog, the
arrows did nothing and no key was named, so Enter silently cancelled two canaries).

A harmless start (a canary, a save) focuses its own button: Enter starts it. A destructive one
(stop, relaunch, roll back, stop the fleet) keeps Cancel focused and names the key that
confirms. Left and right move among the buttons; y and n answer."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Button, Label
from ui_helpers import (
    RecordingFleet,
    finish_actions,
    press_until,
    settled_app,
    wait_for,
)

from tui.ops.commands import Canary, Kill, Rollback
from tui.state.fleet_state import GpuState
from tui.ui.app import FleetApp
from tui.ui.confirm import ConfirmScreen
from tui.ui.quit_screen import QuitScreen
from tui.ui.retune.profile_picker import ProfilePickerScreen
from tui.ui.rollout.canary_screen import CanaryScreen
from tui.ui.stop_screen import StopScreen

BASE = {"name": "sim-baseline"}
RUNNING = {g: GpuState(g, current=BASE, previous={"name": "sim-aggressive"}) for g in range(7)}


async def closed(pilot: Pilot[None], app: FleetApp, dialog: type) -> None:
    """Wait until the ``dialog`` on top is gone."""
    await wait_for(pilot, lambda: not isinstance(app.screen, dialog), "closed")


def keys_line(screen: Screen[Any]) -> str:
    return str(screen.query_one(".dialog-keys", Label).render())


def focused_id(app: FleetApp) -> str | None:
    focused = app.screen.focused
    return focused.id if isinstance(focused, Button) else None


async def canary_confirm(pilot: Pilot[None], app: FleetApp) -> ConfirmScreen:
    await press_until(pilot, ("3", "c"), ProfilePickerScreen)
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
    confirm = app.screen
    assert isinstance(confirm, ConfirmScreen)
    return confirm


async def test_enter_on_a_canary_confirm_starts_the_canary() -> None:
    actions = RecordingFleet()
    async with settled_app(actions=actions) as (app, pilot):
        confirm = await canary_confirm(pilot, app)
        assert focused_id(app) == "confirm-yes"
        hint = keys_line(confirm)
        assert "Enter: Start canary" in hint and "n/Esc: Cancel" in hint and "←/→" in hint
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, CanaryScreen), "the canary")
        await finish_actions(pilot, app)
    assert isinstance(actions.commands[0], Canary)


async def test_arrows_move_between_the_buttons_and_n_cancels() -> None:
    actions = RecordingFleet()
    async with settled_app(actions=actions) as (app, pilot):
        await canary_confirm(pilot, app)
        await pilot.press("right")
        assert focused_id(app) == "confirm-no"
        await pilot.press("right")  # the last button: it stays
        assert focused_id(app) == "confirm-no"
        await pilot.press("left")
        assert focused_id(app) == "confirm-yes"
        await pilot.press("right", "enter")  # Cancel pressed with Enter: nothing starts
        await closed(pilot, app, ConfirmScreen)
        await canary_confirm(pilot, app)
        await pilot.press("n")
        await closed(pilot, app, ConfirmScreen)
        await finish_actions(pilot, app)
    assert actions.commands == []


async def test_a_rollback_keeps_cancel_focused_and_names_y() -> None:
    actions = RecordingFleet()
    async with settled_app(actions=actions, running=RUNNING) as (app, pilot):
        await press_until(pilot, ("b",), ConfirmScreen)
        confirm = app.screen
        assert focused_id(app) == "confirm-no"
        hint = keys_line(confirm)
        assert "Enter: Cancel" in hint and "y: One GPU at a time" in hint
        assert "a: All at once (every server down together)" in hint
        await pilot.press("enter")  # the safe default
        await closed(pilot, app, ConfirmScreen)
        await finish_actions(pilot, app)
        assert actions.commands == []
        await press_until(pilot, ("b",), ConfirmScreen)
        await pilot.press("left")  # the rollback's second way: all at once
        assert focused_id(app) == "rollback-all"
        await pilot.press("left")
        assert focused_id(app) == "confirm-yes"
        await pilot.press("y")
        await closed(pilot, app, ConfirmScreen)
        await finish_actions(pilot, app)
    assert [type(c) for c in actions.commands] == [Rollback]


async def test_a_relaunch_keeps_cancel_focused() -> None:
    actions = RecordingFleet()
    async with settled_app(actions=actions) as (app, pilot):
        await press_until(pilot, ("2", "r"), ProfilePickerScreen)
        await pilot.press("enter")  # the running profile, preselected
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
        assert focused_id(app) == "confirm-no"
        assert "y: Restart" in keys_line(app.screen)
        await pilot.press("enter")
        await closed(pilot, app, ConfirmScreen)
        await finish_actions(pilot, app)
    assert actions.commands == []


async def test_the_stop_dialog_keeps_cancel_focused_and_names_each_key() -> None:
    actions = RecordingFleet()
    async with settled_app(actions=actions) as (app, pilot):
        await press_until(pilot, ("1", "k"), StopScreen)
        stop = app.screen
        assert focused_id(app) == "stop-cancel"
        hint = keys_line(stop)
        for words in ("Enter: Cancel", "d/y: Drain", "t: Terminate", "9: Kill", "n/Esc: Cancel"):
            assert words in hint, (words, hint)
        await pilot.press("enter")  # nothing stops
        await closed(pilot, app, StopScreen)
        await press_until(pilot, ("k",), StopScreen)
        await pilot.press("left", "left", "left")  # Cancel -> Kill -> Terminate -> Drain
        assert focused_id(app) == "stop-drain"
        await pilot.press("enter")
        await closed(pilot, app, StopScreen)
        await finish_actions(pilot, app)
    assert actions.commands == [Kill((1,))]


async def test_the_quit_dialog_names_the_key_that_stops_the_fleet() -> None:
    actions = RecordingFleet()
    async with settled_app(actions=actions) as (app, pilot):
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), "the quit dialog")
        assert focused_id(app) == "quit-keep"
        hint = keys_line(app.screen)
        assert "Enter: Keep running" in hint and "s: Stop fleet, quit" in hint
        await pilot.press("left")
        assert focused_id(app) == "quit-stop"
        await pilot.press("right", "right")
        assert focused_id(app) == "quit-cancel"
        await pilot.press("enter")
        await closed(pilot, app, QuitScreen)
        assert app.is_running
    assert actions.commands == []


async def test_the_key_line_names_what_enter_presses_as_the_arrows_move() -> None:
    """Seen in the walk: the rollout confirm said 'Enter: Cancel' after left had focused Roll
    out, and Enter started the rollout. The line's Enter part follows the focus."""
    actions = RecordingFleet()
    async with settled_app(actions=actions, running=RUNNING) as (app, pilot):
        await press_until(pilot, ("b",), ConfirmScreen)
        confirm = app.screen
        assert "Enter: Cancel" in keys_line(confirm)
        await pilot.press("left")
        assert focused_id(app) == "rollback-all"
        await wait_for(pilot, lambda: "Enter: All at once ·" in keys_line(confirm), "All")
        await pilot.press("left")
        assert focused_id(app) == "confirm-yes"
        await wait_for(pilot, lambda: "Enter: One GPU at a time" in keys_line(confirm), "One")
        assert "Enter: Cancel" not in keys_line(confirm)
        await pilot.press("right", "right")
        await wait_for(pilot, lambda: "Enter: Cancel" in keys_line(confirm), "Cancel")
        await pilot.press("n")
        await closed(pilot, app, ConfirmScreen)
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), "the quit dialog")
        await pilot.press("left")
        await wait_for(pilot, lambda: "Enter: Stop fleet" in keys_line(app.screen), "Stop")
        await pilot.press("escape")
        await finish_actions(pilot, app)
    assert actions.commands == []


async def test_the_profile_picker_names_its_keys_and_what_enter_picks() -> None:
    """The picker (c, o, r) was the one dialog with no key line; its line names the list's keys
    (up/down, not left/right) and follows the highlight, so Enter's profile is said before it
    is picked."""
    actions = RecordingFleet()
    async with settled_app(actions=actions, running=RUNNING) as (app, pilot):
        await press_until(pilot, ("3", "c"), ProfilePickerScreen)
        picker = app.screen
        assert isinstance(picker, ProfilePickerScreen)
        assert keys_line(picker) == "Enter: Pick sim-aggressive · Esc: Cancel · ↑/↓: move"
        names = picker.names
        await pilot.press("down")
        after = names[(names.index("sim-aggressive") + 1) % len(names)]
        await wait_for(pilot, lambda: f"Enter: Pick {after} ·" in keys_line(picker), after)
        await pilot.press("up")
        await wait_for(pilot, lambda: "Enter: Pick sim-aggressive" in keys_line(picker), "back")
        await pilot.press("escape")
        await closed(pilot, app, ProfilePickerScreen)
    assert actions.commands == []
