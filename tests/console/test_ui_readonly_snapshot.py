"""SVG snapshots of the read-only console: the grid's Footer at 80 columns and the quit dialog."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from ui_helpers import make_app, pipeline_status, settle

from tui.ui.app import FleetApp


def still_readonly_app() -> FleetApp:
    app = make_app(status=pipeline_status(), readonly=True)
    app.animation_level = "none"
    return app


async def ready(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, FleetApp)
    await settle(pilot, app)
    while app.main_screen.pipeline_status is None:
        await pilot.pause(0.01)
    await pilot.pause()


def test_readonly_grid_80x24(snap_compare: Any) -> None:
    """The disabled keys first in the Footer, under 'read-only'; the title says it too."""
    assert snap_compare(still_readonly_app(), terminal_size=(80, 24), run_before=ready)


def test_readonly_quit_screen(snap_compare: Any) -> None:
    """Stop fleet is disabled and the dialog says why."""

    async def ask_quit(pilot: Pilot[None]) -> None:
        await ready(pilot)
        await pilot.press("q")
        await pilot.pause()

    assert snap_compare(still_readonly_app(), terminal_size=(80, 24), run_before=ask_quit)
