"""SVG snapshot of the canary verdict screen (scripted 'better' canary, fixed size, no blink)."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from ui_helpers import RecordingFleet, make_app, pipeline_status, settle, wait_for

from tui.ops.commands import Canary
from tui.ui.messages import OperationRequested
from tui.ui.rollout.canary_screen import CanaryScreen


def test_canary_verdict_screen(snap_compare: Any) -> None:
    app = make_app(actions=RecordingFleet(), status=pipeline_status())
    app.animation_level = "none"

    async def verdict(pilot: Pilot[None]) -> None:
        await settle(pilot, app)
        await wait_for(pilot, lambda: app.main_screen.pipeline_status is not None, "the status")
        app.post_message(OperationRequested(Canary("sim-aggressive", 3)))
        await wait_for(pilot, lambda: isinstance(app.screen, CanaryScreen), "the canary screen")
        screen = app.screen
        assert isinstance(screen, CanaryScreen)
        await wait_for(pilot, lambda: screen.finished, "the verdict")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(140, 48), run_before=verdict)
