"""SVG snapshots of the tuning form opened on one GPU (issue 30, point 3): the scope not chosen
yet, shown at the top, and the question Save and Apply ask before anything is written."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input
from ui_helpers import make_app, pipeline_status, press_until, settle, wait_for

from tui.ui.app import FleetApp
from tui.ui.tuning.form_screen import TuningFormScreen
from tui.ui.tuning.scope import ScopeScreen


def still_app() -> FleetApp:
    app = make_app(status=pipeline_status())
    app.animation_level = "none"
    return app


async def _one_gpu_form(pilot: Pilot[None]) -> TuningFormScreen:
    app = pilot.app
    assert isinstance(app, FleetApp)
    await settle(pilot, app)
    await press_until(pilot, ("3", "t"), TuningFormScreen)
    form = app.screen
    assert isinstance(form, TuningFormScreen)
    form.query_one("#knob-mem_fraction_static", Input).value = "0.9"
    await wait_for(pilot, lambda: form.preflight is not None, "the preflight")
    for field in form.query(Input):
        field.cursor_blink = False
    form.set_focus(None)
    await pilot.pause()
    return form


def test_ux3_tuning_form_on_one_gpu_scope_not_chosen(snap_compare: Any) -> None:
    async def run(pilot: Pilot[None]) -> None:
        await _one_gpu_form(pilot)

    assert snap_compare(still_app(), terminal_size=(150, 45), run_before=run)


def test_ux3_tuning_form_asks_whom_the_change_is_for(snap_compare: Any) -> None:
    async def run(pilot: Pilot[None]) -> None:
        await _one_gpu_form(pilot)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ScopeScreen), "the question")
        await pilot.pause()

    assert snap_compare(still_app(), terminal_size=(100, 30), run_before=run)
