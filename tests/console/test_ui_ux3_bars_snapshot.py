"""SVG snapshots of the ``:`` command line and the ``/`` filter with text typed in them, at 80x24
and 200x50 (issue 30, point 1: their input row sat under the footer, only its top border showed,
and the operator typed blind). Each snapshot holds the typed text in the bar's row above the
footer; ``test_ui_ux3_bars.py`` checks the same with the bar's own region."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input
from ui_helpers import make_app, pipeline_status, settle

from tui.ui.app import FleetApp


def still_app() -> FleetApp:
    app = make_app(status=pipeline_status())
    app.animation_level = "none"
    return app


def typing(*keys: str) -> Any:
    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, FleetApp)
        await settle(pilot, app)
        while app.main_screen.pipeline_status is None:
            await pilot.pause(0.01)
        await pilot.press(*keys)
        for field in app.screen.query(Input):
            field.cursor_blink = False
        await pilot.pause()

    return run_before


COMMAND = ("colon", *"kill 3,5")
FILTER = ("slash", *"ready")


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_ux3_command_line_typed(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(still_app(), terminal_size=size, run_before=typing(*COMMAND))


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_ux3_filter_typed(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(still_app(), terminal_size=size, run_before=typing(*FILTER))
