"""Per-GPU history in the panels, read from the fleet's history store: graphs in the spare rows
at 200x50 (util, memory, tok/s, running) and every panel's tok/s sparkline, each with its scale
and the time it covers; the span grows with the panel's width; none where there is no room."""

from __future__ import annotations

import time

from textual.pilot import Pilot
from ui_helpers import RecordingFleet, make_app, settle, seven_gpu_fleet, wait_for

from tui import paths
from tui.history import HistoryStore, Sample
from tui.ui.app import FleetApp
from tui.ui.grid.gpu_grid import GpuGrid
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.grid.panel_graphs import (
    PanelSeries,
    graph_lines,
    graph_span,
    spark_scale,
    spark_span,
    spark_text,
    spark_top,
)

BLOCKS = set("▁▂▃▄▅▆▇█")
WINDOW_S = 600.0
"""What a 40-wide panel's graphs cover."""


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


def test_graphs_fill_the_spare_rows_with_their_scale_and_span() -> None:
    lines = [line.plain for line in graph_lines(_series(1000.0), 38, 13)]
    assert len(lines) == 12  # four graphs: a label and two rows of blocks each
    labels = [lines[i] for i in (0, 3, 6, 9)]
    assert labels[0].startswith("tok/s 1") and labels[0].endswith("max 2k · 10m")  # 1-2-5
    assert labels[1].startswith("util 9") and labels[1].endswith("max 100% · 10m")
    assert labels[2].startswith("running ") and labels[2].endswith("max 50 · 10m")
    assert labels[3].startswith("mem 84%")
    for head in (0, 3, 6, 9):  # filled from 0: the bottom row is blocks across
        rows = lines[head + 1 : head + 3]
        assert set(rows[-1].strip()) <= BLOCKS and rows[-1].strip(), rows
        assert all(len(row) <= 38 for row in rows)
    one = [line.plain for line in graph_lines(_series(1000.0), 38, 5)]
    assert len(one) == 5 and one[0].startswith("tok/s")  # one graph, taller
    assert graph_lines(_series(1000.0), 38, 2) == []  # no room for one graph


def test_a_wider_panel_shows_more_history_not_the_same_stretched() -> None:
    assert [graph_span(w) for w in (38, 60, 98, 198)] == [600.0, 900.0, 1200.0, 1800.0]
    assert [spark_span(c) for c in (4, 6, 8, 22, 68)] == [60.0, 60.0, 120.0, 300.0, 900.0]
    wide = [line.plain for line in graph_lines(_series(1000.0), 98, 13)]
    assert wide[0].endswith("max 2k · 20m")


def test_the_sparkline_is_drawn_from_the_history_on_a_shared_scale() -> None:
    series = {1: _series(1000.0), 2: PanelSeries(400.0, 1000.0, {"tok_s": ((990.0, 300.0),)})}
    top = spark_top(series, {1: 8, 2: 8})
    assert top == 2000.0  # over both GPUs: the faster's 1240 rounded up
    quiet = spark_text(series[2], 8, top)
    assert quiet[-1] == "▂" and quiet[:-1].strip() == ""  # 300 of 2000; before it, nothing
    assert spark_scale(top, 8, short=False) == "max 2k · 2m"
    assert spark_scale(top, 8, short=True) == "2k·2m"


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
    app = make_app(seven_gpu_fleet(), actions=RecordingFleet())
    async with app.run_test(size=(200, 50)) as pilot:
        grid = await _graphed(pilot, app)
        views = {v.gpu_index: v for v in grid.query_children(GpuPanelView)}
        await wait_for(pilot, lambda: views[1].graphs is not None, "GPU 1's graphs")
        text = [line.plain for line in views[1].lines()]
        assert any(line.startswith("util 97%") for line in text)
        assert any(line.startswith("tok/s 14") for line in text)
        assert sum(1 for line in text if set(line.strip()) <= BLOCKS and line.strip()) >= 4
        gen = next(line for line in text if line.startswith("gen "))
        assert gen.endswith("max 2k · 1m")  # the sparkline's scale and span
        assert len(text) <= views[1].size.height
        # the last row's two panels share its width: wider, so more history
        wide = [line.plain for line in views[6].lines()]
        assert any(line.startswith("util") and line.endswith("· 20m") for line in wide)


async def test_at_80x24_no_graphs_but_every_sparkline_says_its_scale() -> None:
    _write_history(time.time())
    app = make_app(seven_gpu_fleet(), actions=RecordingFleet())
    async with app.run_test(size=(80, 24)) as pilot:
        grid = await _graphed(pilot, app)
        views = {v.gpu_index: v for v in grid.query_children(GpuPanelView)}
        await wait_for(pilot, lambda: views[1].graphs is not None, "GPU 1's sparkline")
        assert all(v.spare_rows() == 0 for v in views.values())  # no room for graphs
        gen = next(line.plain for line in views[1].lines() if " t/s " in line.plain)
        assert gen.endswith(" 2k·1m") and set(gen.split()[2]) <= BLOCKS


async def test_a_read_issued_earlier_never_replaces_a_later_one() -> None:
    """Two reads in flight (a panel's cell and a resize): whichever finishes last, a panel
    shows the one issued last."""
    from tui.ui.grid.panel_graphs import PanelRead

    app = make_app(seven_gpu_fleet(), actions=RecordingFleet())
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        grid = app.main_screen.query_one(GpuGrid)
        view = grid.query_one("#gpu-1", GpuPanelView)
        reads = (PanelRead(1, 600.0, ("tok_s",)),)
        newer, older = _series(2000.0), _series(1000.0)
        number = grid._reads_issued + 10
        grid._take_graphs(reads, {1: newer}, number)
        grid._take_graphs(reads, {1: older}, number - 1)  # issued before, finished after
        assert view.graphs is newer
