"""Issue 4's keyboard acceptance, keys only: open the form, change max-mamba-cache-size and
max-running-requests, see the preflight, apply to all 7 GPUs, watch each reach ready, read the
verify report and the verdict, roll back. Against the recording backend (scripted apply)."""

from __future__ import annotations

import asyncio

from textual.widgets import Input, Static
from ui_helpers import RecordingFleet, finish_actions, make_app, press_until, settle, wait_for

from tui.ops.commands import Rollback
from tui.state.fleet_state import GpuState
from tui.ui.confirm import ConfirmScreen
from tui.ui.main_screen import MainScreen
from tui.ui.retune.apply_screen import ApplyScreen
from tui.ui.tuning.form_screen import TuningFormScreen
from tui.ui.tuning.preflight_panel import PreflightPanel

ALL = (0, 1, 2, 3, 4, 5, 6)


async def test_keyboard_alone_tune_apply_verify_and_roll_back() -> None:
    measured = asyncio.Event()
    actions = RecordingFleet(gates={})
    running = {
        g: GpuState(g, current={"name": "sim-baseline-tuned"}, previous={"name": "sim-baseline"})
        for g in ALL
    }
    app = make_app(actions=actions, running=running)
    async with app.run_test(size=(150, 50)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("T",), TuningFormScreen)
        form = app.screen
        assert isinstance(form, TuningFormScreen)
        # focus starts on mem_fraction_static; Tab walks the knobs; Home + Ctrl+K clears one
        await pilot.press("tab", "home", "ctrl+k", *"200")
        await pilot.press("tab", "tab", "home", "ctrl+k", *"64")
        assert isinstance(app.focused, Input) and app.focused.id == "knob-max_running_requests"
        await wait_for(pilot, lambda: form.preflight is not None, "the preflight")
        shown = str(form.query_one(PreflightPanel).render())
        assert shown.count("64 -> 40 (capped)") == 7
        assert form.preflight is not None and [p.gpu for p in form.preflight] == list(ALL)
        assert all(p.fits and p.mamba_slots == 200 for p in form.preflight)
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert "Restart GPUs 0-6 (7 servers)" in confirm.title_text
        actions.gates[len(actions.apply_script_events()) - 1] = measured
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, ApplyScreen), "the apply screen")
        screen = app.screen
        assert isinstance(screen, ApplyScreen)
        await wait_for(
            pilot, lambda: all(r.state == "ready" for r in screen.progress.rows), "ready"
        )
        measured.set()
        await wait_for(pilot, lambda: screen.finished, "the verdict")
        report = str(screen.query_one("#apply-gpus", Static).render())
        assert report.count("64 -> 40 CAPPED") == 7
        verdict = str(screen.query_one("#apply-throughput", Static).render())
        assert verdict.startswith("verdict: better: +21.3%")
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        await press_until(pilot, ("b",), ConfirmScreen)
        rollback = app.screen
        assert isinstance(rollback, ConfirmScreen)
        assert rollback.title_text == "Roll back GPUs 0-6 to sim-baseline?"
        await pilot.press("y")
        await finish_actions(pilot, app)
    applied = actions.applied()
    assert applied == [("sim-baseline-tuned", ALL)]
    (applied_profile,) = actions.applied_profiles()  # the form's candidate itself, unsaved
    assert actions.saved == []
    server = applied_profile.server
    assert (server.max_mamba_cache_size, server.max_running_requests) == (200, 64)
    assert actions.commands[-1] == Rollback()
