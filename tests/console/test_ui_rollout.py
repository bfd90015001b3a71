"""Canary and rollout keys through Pilot with the recording fake: what reached the backend, what
the screens say live and at the end, and when `c` and `o` are offered."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Static
from ui_helpers import (
    RecordingFleet,
    finish_actions,
    fleet_of,
    make_app,
    press_until,
    scripted_canary,
    scripted_rollout,
    settle,
    wait_for,
)

from tui.ops.commands import Canary, Kind, Rollout
from tui.rollout.canary_result import CanaryLook
from tui.ui.app import FleetApp
from tui.ui.confirm import ConfirmScreen
from tui.ui.format import duration
from tui.ui.main_screen import MainScreen
from tui.ui.operation_strip import OperationStrip
from tui.ui.retune.profile_picker import ProfilePickerScreen
from tui.ui.rollout.canary_screen import CanaryScreen
from tui.ui.rollout.describe import compact_range
from tui.ui.rollout.rollout_screen import RolloutScreen


def app_with(actions: RecordingFleet, **kwargs: Any) -> FleetApp:
    return make_app(actions=actions, **kwargs)


def text(screen: object, selector: str) -> str:
    assert isinstance(screen, CanaryScreen | RolloutScreen)
    return str(screen.query_one(selector, Static).render())


async def open_canary(pilot: Pilot[None], app: FleetApp, gpu: str) -> CanaryScreen:
    """Select ``gpu``, press c, pick sim-aggressive, check the confirm, say yes."""
    await press_until(pilot, (gpu, "c"), ProfilePickerScreen)
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
    confirm = app.screen
    assert isinstance(confirm, ConfirmScreen)
    assert confirm.title_text == (
        f"Try profile sim-aggressive on GPU {gpu}; GPUs "
        f"{compact_range([g for g in range(7) if g != int(gpu)])} stay as control"
    )
    await pilot.press("y")
    await wait_for(pilot, lambda: isinstance(app.screen, CanaryScreen), "the canary screen")
    screen = app.screen
    assert isinstance(screen, CanaryScreen)
    return screen


async def test_canary_shows_looks_live_then_better_and_offers_the_rollout() -> None:
    script = scripted_canary("better")
    items, _ = script("sim-aggressive", 3)
    last_look = len(items) - 1
    held = asyncio.Event()
    actions = RecordingFleet(canary_script=script, gates={last_look: held})
    app = app_with(actions)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot, app)
        screen = await open_canary(pilot, app, "3")
        assert "GPUs 0-2,4-6" in text(screen, "#canary-title")
        await wait_for(pilot, lambda: len(screen.looks) == 2, "two looks")
        live = text(screen, "#canary-looks")
        assert "5 intervals (25s): +" in live and "6 intervals (30s): +" in live
        assert "-> no measurable difference (interval spans 0)" in live and "better" not in live
        assert "ready" in text(screen, "#canary-gpu")
        assert screen.check_action("rollout", ()) is False  # no verdict yet: `o` hidden
        await pilot.press("escape")  # still running: the report hides, the canary goes on
        assert isinstance(app.screen, MainScreen) and app.operation is screen
        strip = app.main_screen.query_one(OperationStrip)
        strip.refresh_line()
        line = str(strip.render())
        assert line.startswith("canary sim-aggressive GPU 3 · look 2: no measurable difference")
        await pilot.press("c")  # a second operation is refused (one at a time), not queued
        await pilot.pause()
        assert isinstance(app.screen, MainScreen) and app.operation is screen
        await pilot.press("w")
        assert app.screen is screen
        held.set()
        await wait_for(pilot, lambda: screen.finished, "the verdict")
        verdict = text(screen, "#canary-verdict")
        assert "verdict: better" in verdict
        assert "tokens/s per GPU: 1,5" in verdict and "(+10.0%" in verdict
        assert "requests/s per GPU: 0.5" in verdict
        assert "95% over 3 looks" in verdict and "35s, 7 intervals, stopped early" in verdict
        assert "throughput lost: 6.3 GPU-seconds" in verdict
        assert "more measuring" not in verdict
        assert screen.check_action("rollout", ()) is True
        await press_until(pilot, ("o",), ConfirmScreen)
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert confirm.title_text == "Roll out sim-aggressive to GPUs 0-2,4-6, one GPU at a time?"
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutScreen), "the rollout")
        # the canary's report is closed for good: Escape never returns to its spent `o`
        assert screen not in app.screen_stack and not app.is_screen_installed(screen)
        rollout = app.screen
        assert isinstance(rollout, RolloutScreen)
        await wait_for(pilot, lambda: rollout.finished, "the rollout's end")
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen) and app.operation is None
        await finish_actions(pilot, app)
    assert actions.commands == [Canary("sim-aggressive", 3), Rollout("sim-aggressive", 1)]


async def test_undecided_canary_says_how_long_and_offers_no_rollout() -> None:
    script = scripted_canary("no measurable difference", 4.0)
    _, result = script("sim-aggressive", 0)
    assert result.more_s_to_bound and result.more_s_to_exclude_zero
    actions = RecordingFleet(canary_script=script)
    app = app_with(actions)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot, app)
        screen = await open_canary(pilot, app, "0")
        await wait_for(pilot, lambda: screen.finished, "the verdict")
        verdict = text(screen, "#canary-verdict")
        assert "verdict: no measurable difference" in verdict
        bound, zero = duration(result.more_s_to_bound), duration(result.more_s_to_exclude_zero)
        assert f"to bound within +/-3%: about {bound} more measuring" in verdict
        assert f"from 0: about {zero} more measuring" in verdict
        assert "40s, 8 intervals: window 40 s ended" in verdict
        assert "throughput lost: 4.0 GPU-seconds" in verdict
        assert screen.check_action("rollout", ()) is False
        await pilot.press("o")
        await pilot.pause()
        assert app.screen is screen  # nothing asked
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
    assert [type(c) for c in actions.commands] == [Canary]


async def test_rollout_key_stops_at_gpu_4_and_names_who_stayed() -> None:
    script = scripted_rollout(failing=4)
    items, _ = script("sim-aggressive", 1)
    held = asyncio.Event()
    actions = RecordingFleet(rollout_script=script, gates={len(items): held})
    app = app_with(actions)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("o",), ProfilePickerScreen)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert confirm.title_text == "Roll out sim-aggressive to GPUs 0-6, one GPU at a time?"
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutScreen), "the rollout")
        screen = app.screen
        assert isinstance(screen, RolloutScreen)
        await wait_for(pilot, lambda: len(screen.progress.rows) == 4, "GPUs 0, 1, 2, 4")
        await pilot.pause()
        assert not screen.finished  # every batch's ApplyFinished went by: only the result ends it
        live = text(screen, "#rollout-gpus")
        assert [r.state for r in screen.progress.rows] == ["ready"] * 3 + ["failed"]
        assert "GPU 4: OOM while allocating the Mamba cache" in live
        held.set()
        await wait_for(pilot, lambda: screen.finished, "the result")
        rows = text(screen, "#rollout-gpus")
        assert rows.count("stayed") == 2 and "old profile" in rows
        summary = text(screen, "#rollout-summary")
        assert "rollout of sim-aggressive: 3 of 6 GPUs done" in summary
        assert "STOPPED at GPU 4: OOM while allocating the Mamba cache" in summary
        assert "stayed on the old profile: GPUs 5-6" in summary
        assert "relaunched on the old profile: GPU 4" in summary  # one GPU, not "GPUs 4"
        assert "already on it (skipped): GPU 3" in summary
        assert "throughput lost: 71.4 GPU-seconds" in summary
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
    assert actions.commands == [Rollout("sim-aggressive", 1)]


@pytest.mark.parametrize("action", ["canary", "rollout"])
async def test_keys_disabled_without_backend_support_or_gpus(action: str) -> None:
    unsupported = app_with(RecordingFleet(supported=frozenset(Kind) - {Kind(action)}))
    async with unsupported.run_test(size=(120, 40)) as pilot:
        await settle(pilot, unsupported)
        assert unsupported.main_screen.check_action(action, ()) is None
        await pilot.press("c" if action == "canary" else "o")
        await pilot.pause()
        assert isinstance(unsupported.screen, MainScreen)
    lone = app_with(RecordingFleet(), fleet=fleet_of(1))
    async with lone.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lone)
        # one GPU: nothing to compare a canary with; a rollout is still possible
        expected = None if action == "canary" else True
        assert lone.main_screen.check_action(action, ()) is expected
    supported = app_with(RecordingFleet())
    async with supported.run_test(size=(120, 40)) as pilot:
        await settle(pilot, supported)
        assert supported.main_screen.check_action(action, ()) is True


def test_compact_range_collapses_runs() -> None:
    assert compact_range([6, 0, 1, 2, 4, 5]) == "0-2,4-6"
    assert compact_range([3]) == "3"
    assert compact_range([1, 3, 4]) == "1,3-4"
    assert compact_range([]) == "none"


def test_canary_look_window_is_intervals_times_interval() -> None:
    look = CanaryLook(0, 7, 5.0, "better", True, "interval above 0")
    assert look.window_s == 35.0
