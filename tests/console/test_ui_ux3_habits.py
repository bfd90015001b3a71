"""Habits a new operator reached for (issue 30, point 8): ``a``, ``/``, ``:`` and space in the
grid's Footer; a key that is off says why; Escape on the grid clears a kept filter."""

from __future__ import annotations

import pytest
from textual.widgets._footer import FooterKey
from ui_helpers import RecordingFleet, make_app, settle, settled_app, wait_for

from tui.ui.app import FleetApp
from tui.ui.autotune.autotune_screen import AutotuneScreen
from tui.ui.grid.filter_bar import FilterBar


def footer_keys(app: FleetApp) -> dict[str, FooterKey]:
    return {k.key: k for k in app.screen.query(FooterKey)}


@pytest.mark.parametrize(
    ("size", "keys"),
    [((200, 50), ("a", "slash", "colon", "space")), ((80, 24), ("slash", "colon", "space"))],
)
async def test_the_grid_footer_shows_the_habit_keys(
    size: tuple[int, int], keys: tuple[str, ...]
) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        await pilot.pause()
        shown = footer_keys(app)
        for key in keys:
            assert key in shown, (key, sorted(shown))
            region = shown[key].region
            assert region.right <= size[0], (key, region)  # on screen, not scrolled away


async def test_a_hidden_key_with_a_reason_says_it() -> None:
    """`w` opens the background operation's report: with none running it did nothing."""
    async with settled_app() as (app, pilot):
        await pilot.press("w")
        await wait_for(pilot, lambda: bool(app._notifications), "the reason")
        said = [str(n.message) for n in app._notifications]
        assert said == ["w (Operation) is off: no operation runs in the background"]
        app.clear_notifications()
        await pilot.press("m")  # a node key on a one-node console: not a key here, no word
        await pilot.pause()
        assert not app._notifications


async def test_the_autotune_screen_says_why_pause_is_off() -> None:
    async with settled_app() as (app, pilot):
        await app.push_screen(AutotuneScreen(app.port, interval_s=3600))
        await pilot.pause()
        await pilot.press("p")
        await wait_for(pilot, lambda: bool(app._notifications), "the reason")
        said = [str(n.message) for n in app._notifications]
        assert said == ["p (Pause search) is off: no search is running"]


async def test_escape_clears_a_kept_filter_then_the_marks() -> None:
    actions = RecordingFleet()
    async with settled_app(actions=actions) as (app, pilot):
        screen = app.main_screen
        await pilot.press("1", "space")
        await pilot.press("slash", *"ready", "enter")  # Enter keeps the filter
        assert screen.grid_filter == "ready" and screen.marked == frozenset({1})
        assert not screen.query_one(FilterBar).display
        await pilot.press("escape")
        assert screen.grid_filter == "" and screen.marked == frozenset({1})
        assert "filter" not in (screen.sub_title or "")
        await pilot.press("escape")
        assert screen.marked == frozenset()
    assert actions.commands == []
