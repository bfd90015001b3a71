"""k9s habits on the grid: space marks GPUs for `k` and `r` (visible on the panels), `/`
filters the panels by GPU, state or profile; what reached the backend is checked."""

from __future__ import annotations

from dataclasses import replace

from ui_helpers import RecordingFleet, make_app, settle, seven_gpu_fleet, wait_for

from tui.fleet.running_profiles import RunningProfile
from tui.fleet.snapshot import GpuPanel
from tui.ops.commands import Kill
from tui.ui.app import FleetApp
from tui.ui.grid.filter import panel_matches
from tui.ui.grid.filter_bar import FilterBar
from tui.ui.grid.gpu_grid import GpuGrid
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.stop_screen import StopScreen


def _app(actions: RecordingFleet) -> FleetApp:
    app = make_app(actions=actions)
    return app


def _titles(app: FleetApp) -> dict[int, str]:
    return {v.gpu_index: str(v.border_title) for v in app.main_screen.query(GpuPanelView)}


async def test_space_marks_gpus_and_k_stops_the_marked_ones() -> None:
    actions = RecordingFleet()
    app = _app(actions)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("2", "space", "4", "space", "5", "space", "space")  # 5 unmarked again
        assert app.main_screen.marked == frozenset({2, 4})
        titles = _titles(app)
        assert titles[2].startswith("● GPU 2") and titles[4].startswith("● GPU 4")
        assert not titles[5].startswith("●")
        assert "marked GPUs 2,4" in str(app.main_screen.sub_title)
        await pilot.press("k")
        await wait_for(pilot, lambda: isinstance(app.screen, StopScreen), "how to stop")
        asked = app.screen
        assert isinstance(asked, StopScreen)
        assert asked.title_text == "Stop the servers on GPUs 2,4?"
        await pilot.press("d")
        await wait_for(pilot, lambda: bool(actions.commands), "the stop")
        assert actions.commands == [Kill((2, 4))]
        await pilot.press("escape")  # clears the marks: k is the selected GPU's again
        assert app.main_screen.marked == frozenset()
        assert not any(t.startswith("●") for t in _titles(app).values())
        await pilot.press("k")
        await wait_for(pilot, lambda: isinstance(app.screen, StopScreen), "how to stop")
        asked = app.screen
        assert isinstance(asked, StopScreen)
        assert asked.title_text == "Stop the server on GPU 5?"


async def test_slash_filters_the_grid_by_state_and_escape_clears_it() -> None:
    app = _app(RecordingFleet())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        grid = app.main_screen.query_one(GpuGrid)
        await pilot.press("slash")
        bar = app.main_screen.query_one(FilterBar)
        await wait_for(pilot, lambda: bar.has_focus, "the filter bar")
        await pilot.press("f", "a", "i", "l")
        await wait_for(pilot, lambda: grid.gpu_indices == (2,), "only the failed GPU")
        await wait_for(pilot, lambda: len(grid.query_children(GpuPanelView)) == 1, "one panel")
        assert app.main_screen.selected == 2
        assert "filter /fail (1 shown)" in str(app.main_screen.sub_title)
        await pilot.press("enter")  # the filter stays, the bar closes
        assert not bar.display and grid.gpu_indices == (2,)
        await pilot.press("right")  # navigation stays among the panels shown
        assert app.main_screen.selected == 2
        await pilot.press("slash")
        await wait_for(pilot, lambda: bar.has_focus, "the filter bar")
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(grid.gpu_indices) == 7, "every panel again")
        assert "filter" not in str(app.main_screen.sub_title)


def test_filter_words_match_gpu_state_and_profile() -> None:
    fleet = seven_gpu_fleet()
    ready = fleet.panels[1]
    assert ready.server is not None
    tuned = replace(
        ready, server=replace(ready.server, profile=RunningProfile("sim-aggressive", ()))
    )
    assert panel_matches(tuned, "")
    assert panel_matches(tuned, "1") and not panel_matches(tuned, "2")
    assert panel_matches(tuned, "READY") and panel_matches(tuned, "aggr")
    assert panel_matches(tuned, "ready aggressive") and not panel_matches(tuned, "ready base")
    assert not panel_matches(GpuPanel(9, None, None), "ready")
    assert panel_matches(GpuPanel(9, None, None), "no server")
