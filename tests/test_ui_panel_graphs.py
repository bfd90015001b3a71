"""Per-GPU graphs in the panels' spare rows at 200x50 (util, memory, tok/s, running), read from
the fleet's history store; none at 80x24, where a panel has no room to spare."""

from __future__ import annotations

import time

from textual.pilot import Pilot
from ui_helpers import RecordingActions, make_app, settle, seven_gpu_fleet, wait_for

from tui import paths
from tui.history import HistoryStore, Sample
from tui.ui.app import FleetApp
from tui.ui.grid.gpu_grid import GpuGrid
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.grid.panel_graphs import WINDOW_S, PanelSeries, graph_lines

BRAILLE = range(0x2801, 0x2900)


def _series(now: float) -> PanelSeries:
    ts = [now - WINDOW_S + 10 * i for i in range(60)]
    return PanelSeries(
        now - WINDOW_S,
        now,
        {
            "util": tuple((t, 90.0 + (i % 5)) for i, t in enumerate(ts)),
            "mem": tuple((t, 84.0) for t in ts),
            "tok_s": tuple((t, 1000.0 + 40 * (i % 7)) for i, t in enumerate(ts)),
            "running": tuple((t, float(i % 40)) for i, t in enumerate(ts)),
        },
    )


def test_graphs_fill_the_spare_rows_with_labels_and_dots() -> None:
    lines = [line.plain for line in graph_lines(_series(1000.0), 38, 13)]
    assert len(lines) == 12  # four graphs: a label and two rows of dots each
    labels = [lines[i] for i in (0, 3, 6, 9)]
    assert labels[0].startswith("util 94%") and labels[0].endswith("max 100% · 10m")
    assert labels[1].startswith("mem 84%") and labels[2].startswith("tok/s 1120")
    assert labels[3].startswith("running 19")
    for head in (0, 3, 6, 9):  # a flat line lies in one of its graph's rows
        rows = lines[head + 1 : head + 3]
        assert any(ord(c) in BRAILLE for row in rows for c in row), rows
        assert all(len(row) <= 38 for row in rows)
    assert graph_lines(_series(1000.0), 38, 2) == []  # no room for one graph


def _write_history(now: float) -> None:
    store = HistoryStore(paths.history_file())
    samples = [
        Sample(now - 300 + 5 * i, gpu, metric, value)
        for i in range(60)
        for gpu in range(7)
        for metric, value in (
            ("util", 97.0),
            ("mem", 88.0),
            ("tok_s", 1400.0 + i),
            ("running", 40.0),
        )
    ]
    store.write(samples)
    store.close()


async def _graphed(pilot: Pilot[None], app: FleetApp) -> GpuGrid:
    await settle(pilot, app)
    grid = app.main_screen.query_one(GpuGrid)
    grid._graph_panels()
    return grid


async def test_panels_at_200x50_graph_their_gpus_history() -> None:
    _write_history(time.time())
    app = make_app(seven_gpu_fleet(), actions=RecordingActions())
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(200, 50)) as pilot:
        grid = await _graphed(pilot, app)
        views = {v.gpu_index: v for v in grid.query_children(GpuPanelView)}
        await wait_for(pilot, lambda: views[1].graphs is not None, "GPU 1's graphs")
        text = [line.plain for line in views[1].lines()]
        assert any(line.startswith("util 97%") for line in text)
        assert any(line.startswith("tok/s 14") for line in text)
        assert sum(1 for line in text if any(ord(c) in BRAILLE for c in line)) >= 4
        assert len(text) <= views[1].size.height


async def test_no_graphs_where_a_panel_has_no_room() -> None:
    _write_history(time.time())
    app = make_app(seven_gpu_fleet(), actions=RecordingActions())
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(80, 24)) as pilot:
        grid = await _graphed(pilot, app)
        await pilot.pause(0.2)
        views = list(grid.query_children(GpuPanelView))
        assert all(v.spare_rows() == 0 and v.graphs is None for v in views)


def test_reads_within_one_cell_draw_the_same_graph() -> None:
    """The graphs' right edge is the last whole cell: reads seconds later (the same points,
    the cell not yet complete) draw the very same lines, so nothing is resent; once the time
    passes a cell's edge, the graph moves."""
    width = 38
    step = 2 * WINDOW_S / (width * 2)
    now = 1000 * step + 0.2  # just past a column's edge
    first = [line.plain for line in graph_lines(_series(now), width, 13)]
    same = [line.plain for line in graph_lines(_series(now), width, 13)]
    assert first == same
    for late in (1.0, 5.0, 10.0, step - 0.5):
        later = PanelSeries(now - WINDOW_S + late, now + late, _series(now).points)
        assert [line.plain for line in graph_lines(later, width, 13)] == first
    moved = PanelSeries(now - WINDOW_S + 3 * step, now + 3 * step, _series(now).points)
    assert [line.plain for line in graph_lines(moved, width, 13)] != first
