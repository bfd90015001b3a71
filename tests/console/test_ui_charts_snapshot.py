"""SVG snapshots of the charts at 80x24 and 200x50, on fixed data: the grid with an hour of each
GPU's history (graphs and sparklines with their scales, the last row spanning the width, the
fleet's row), and the generation pane (round ticks, named markers, the last windows shaded)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from textual.pilot import Pilot
from ui_helpers import (
    RETUNE_MARKS,
    T0,
    make_app,
    pipeline_status,
    settle,
    show_chart,
    wait_for,
)

from tui.history import Sample
from tui.ui.app import FleetApp
from tui.ui.grid.gpu_grid import GpuGrid, panel_read
from tui.ui.grid.gpu_panel import GpuPanelView

CANARY_GPU = 0
"""The GPU whose rate rose 25 minutes ago (a canary that worked)."""


def gpu_history() -> list[Sample]:
    """An hour of 5 s readings for the ready GPUs (0, 1, 4, 5, 6), ending a minute before
    ``T0``: steady rates with a small fixed wobble, GPU 0 faster from -25m on."""
    samples = []
    for i in range(708):
        t = T0 - 3600 + 5 * i
        for gpu in (0, 1, 4, 5, 6):
            wobble = (i * (gpu + 3)) % 11
            faster = 300.0 if gpu == CANARY_GPU and t >= T0 - 1500 else 0.0
            samples += [
                Sample(t, gpu, "tok_s", 1250.0 + 12 * wobble + faster),
                Sample(t, gpu, "util", 92.0 + wobble % 7),
                Sample(t, gpu, "mem", 84.0),
                Sample(t, gpu, "running", 36.0 + wobble % 5),
            ]
    return samples


def app_on_fixed_data() -> FleetApp:
    app = make_app(status=replace(pipeline_status(), started_at=T0 - 3600), marks=RETUNE_MARKS)
    app.animation_level = "none"
    return app


async def with_history(pilot: Pilot[None]) -> None:
    """The fleet drawn, then the GPUs' history read at ``T0`` and drawn in the panels."""
    app = pilot.app
    assert isinstance(app, FleetApp)
    await settle(pilot, app)
    await wait_for(pilot, lambda: app.main_screen.pipeline_status is not None, "the document")
    app.history.add(gpu_history())
    app.history.flush()
    grid = app.main_screen.query_one(GpuGrid)
    grid.clock = lambda: T0
    views = [v for v in grid.query_children(GpuPanelView) if v.gpu_index in (0, 1, 4, 5, 6)]

    def shown(issued: int) -> Callable[[], bool]:
        """Every panel shows read ``issued`` or a later one (the grid's timer reads too)."""
        return lambda: all(grid._read_shown.get(v.gpu_index, 0) >= issued for v in views)

    # A read issued before the layout gave the last row its span reads a narrow panel's hour
    # (seen under three burners: GPU 6's sparkline a third of its width): read again until
    # every panel shows a read as long as its size asks for.
    for _ in range(5):
        grid._graph_panels()
        await wait_for(pilot, shown(grid._reads_issued), "the graphs")
        await pilot.pause()
        if all(read_at_its_size(v) for v in views):
            break
    assert all(read_at_its_size(v) for v in views)


def read_at_its_size(view: GpuPanelView) -> bool:
    """The panel's series spans what a read at its present size would ask for."""
    read, series = panel_read(view), view.graphs
    if read is None or series is None:
        return False
    return series.end - series.start >= read.span_s - 1e-6


async def with_the_chart(pilot: Pilot[None]) -> None:
    """The grid's history, then an hour of the job's rate (two operations) in the pane."""
    await with_history(pilot)
    app = pilot.app
    assert isinstance(app, FleetApp)
    await show_chart(pilot, app)


def test_charts_grid_80x24(snap_compare: Any) -> None:
    assert snap_compare(app_on_fixed_data(), terminal_size=(80, 24), run_before=with_history)


def test_charts_grid_200x50(snap_compare: Any) -> None:
    assert snap_compare(app_on_fixed_data(), terminal_size=(200, 50), run_before=with_history)


def test_charts_generation_pane_80x24(snap_compare: Any) -> None:
    assert snap_compare(app_on_fixed_data(), terminal_size=(80, 24), run_before=with_the_chart)


def test_charts_generation_pane_200x50(snap_compare: Any) -> None:
    assert snap_compare(app_on_fixed_data(), terminal_size=(200, 50), run_before=with_the_chart)
