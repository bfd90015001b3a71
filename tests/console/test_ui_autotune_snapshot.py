"""SVG snapshots of the autotune screen with a fixed status document (a search measuring its
fourth candidate after two adoptions and one rollback), at 100x32, 80x24 and 200x50."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from ui_helpers import make_app, settle, wait_for

from tui.autotune.status import write_status
from tui.ui.autotune.autotune_screen import AutotuneScreen

from .test_ui_autotune import status


def _opened(snap_compare: Any, size: tuple[int, int]) -> bool:
    write_status(status("canary"))
    app = make_app()
    app.animation_level = "none"

    async def open_screen(pilot: Pilot[None]) -> None:
        await settle(pilot, app)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, AutotuneScreen), "the screen")
        screen = app.screen
        assert isinstance(screen, AutotuneScreen)
        await wait_for(pilot, lambda: screen.doc is not None, "the status")
        await pilot.pause()

    return bool(snap_compare(app, terminal_size=size, run_before=open_screen))


def test_autotune_screen(snap_compare: Any) -> None:
    assert _opened(snap_compare, (100, 32))


def test_autotune_screen_at_80x24(snap_compare: Any) -> None:
    """The smallest terminal: the chart keeps its axes and every candidate's number."""
    assert _opened(snap_compare, (80, 24))


def test_autotune_screen_at_200x50(snap_compare: Any) -> None:
    """A large terminal: the chart widens its bars, grows to its most rows."""
    assert _opened(snap_compare, (200, 50))
