"""The ``:`` command line and the ``/`` filter as an operator types into them (issue 30, point 1):
the typed text shows in one row above the footer at 80x24 and 200x50, what is typed right after
``:`` lands in the bar, and Tab never moves the focus off it."""

from __future__ import annotations

import threading

import pytest
from textual import events
from textual.suggester import SuggestFromList
from textual.widgets import Footer
from ui_helpers import RecordingFleet, make_app, settle, settled_app, wait_for

from tui.ui.app import FleetApp
from tui.ui.bottom_bar import BottomBar
from tui.ui.command_bar import CommandBar
from tui.ui.grid.filter_bar import FilterBar
from tui.ui.stop_screen import StopScreen


def _row_text(app: FleetApp, y: int) -> str:
    """What the terminal shows on row ``y`` (the screen's composed strips, as drawn)."""
    return app.screen._compositor.render_strips()[y].text


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
@pytest.mark.parametrize(
    ("opener", "typed", "bar_type"),
    [("colon", "kill 3,5", CommandBar), ("slash", "ready", FilterBar)],
)
async def test_typed_text_shows_above_the_footer(
    size: tuple[int, int], opener: str, typed: str, bar_type: type[BottomBar]
) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        await pilot.press(opener, *typed)
        await pilot.pause()
        bar = app.screen.query_one(bar_type)
        footer = app.screen.query_one(Footer)
        assert bar.has_focus and bar.value == typed
        # One row, wholly above the footer, holding the text (not a border).
        assert bar.region.height == 1 and bar.content_region.height == 1
        assert bar.region.bottom <= footer.region.y
        assert typed in _row_text(app, bar.region.y)


class SlowNames(RecordingFleet):
    """Profile names that take until the test says (a backend reading its profiles directory)."""

    def __init__(self) -> None:
        super().__init__()
        self.read = threading.Event()

    def profile_names(self) -> list[str]:
        self.read.wait(10)
        return super().profile_names()


async def test_keys_typed_right_after_colon_land_in_the_bar() -> None:
    """The bar opens in the turn of ``:``: the keys typed while the profile names are still
    being read are text, not the grid's keys (``k`` asked how to stop a server)."""
    actions = SlowNames()
    async with settled_app(actions=actions) as (app, pilot):
        try:
            await pilot.press("colon", "k", "i")
            await pilot.pause()
            bar = app.screen.query_one(CommandBar)
            assert bar.display and bar.value == "ki"
            assert not isinstance(app.screen, StopScreen)
        finally:
            actions.read.set()
        names = "canary sim-baseline "
        suggester = bar.suggester
        assert isinstance(suggester, SuggestFromList)
        await wait_for(pilot, lambda: names in suggester._suggestions, "the names")
        assert actions.commands == []


async def test_tab_completes_and_never_leaves_the_bar() -> None:
    """Tab without a completion kept moving the focus to the next widget (the generation pane
    here), and the keys after it went to the grid."""
    async with settled_app() as (app, pilot):
        await pilot.press("g")  # the generation pane: a focusable widget beside the bar
        bar = app.screen.query_one(CommandBar)
        await pilot.press("colon", "tab")  # nothing to complete: stays, types nothing
        assert bar.has_focus and bar.value == ""
        await pilot.press(*"can")
        await wait_for(pilot, lambda: bar._suggestion == "canary ", "the completion")
        await pilot.press("tab")
        assert bar.value == "canary "
        await pilot.press("x", "tab")  # no completion of 'canary x': the focus stays
        assert bar.has_focus and bar.value == "canary x"
        await pilot.press("0")
        assert bar.value == "canary x0"


@pytest.mark.parametrize(("opener", "typed"), [("slash", "ready"), ("colon", "kill 3")])
async def test_a_burst_typed_with_the_opening_key_lands_in_the_bar(opener: str, typed: str) -> None:
    """A terminal delivers '/ready' in one read: the keys after '/' were routed to the grid
    before the bar took the focus (in tmux, 'a' of 'ready' opened the autotune screen)."""
    actions = RecordingFleet()
    async with settled_app(actions=actions) as (app, pilot):
        screen = app.screen
        for key in (opener, *typed):  # queued at once, as one read of the terminal
            character = {"slash": "/", "colon": ":", "space": " "}.get(key, key)
            app.post_message(events.Key(key if key != " " else "space", character))
        bar = screen.query_one(FilterBar if opener == "slash" else CommandBar)
        await wait_for(pilot, lambda: bar.value == typed, f"{typed!r} in the bar")
        assert app.screen is screen and bar.has_focus
        assert actions.commands == []
