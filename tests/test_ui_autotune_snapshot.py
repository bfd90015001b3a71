"""SVG snapshot of the autotune screen with a fixed status document (a search measuring its
fourth candidate after two adoptions and one rollback)."""

from __future__ import annotations

from typing import Any

from test_ui_autotune import status
from textual.pilot import Pilot
from ui_helpers import make_app, settle, wait_for

from tui.autotune.status import write_status
from tui.ui.app import FleetApp
from tui.ui.autotune.autotune_screen import AutotuneScreen


def test_autotune_screen(snap_compare: Any) -> None:
    write_status(status("canary"))
    app = make_app()
    assert isinstance(app, FleetApp)
    app.animation_level = "none"

    async def open_screen(pilot: Pilot[None]) -> None:
        await settle(pilot, app)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, AutotuneScreen), "the screen")
        screen = app.screen
        assert isinstance(screen, AutotuneScreen)
        await wait_for(pilot, lambda: screen.doc is not None, "the status")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(100, 32), run_before=open_screen)
