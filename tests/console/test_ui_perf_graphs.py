"""How often the grid reads the panels' history: once per completed cell, not on a fixed cadence;
at 80x24 only the sparklines' one metric."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from ui_helpers import make_app, settle, seven_gpu_fleet

from tui.ui.grid.gpu_grid import GpuGrid
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.grid.panel_graphs import SETTLE_S, PanelRead, read_every_s


async def test_the_history_is_read_once_per_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph or a sparkline moves only when a cell completes: a minute of ticks four times a
    second reads once per cell edge of some panel (each read up to ``SETTLE_S`` ago, where
    every bucket is complete), not at each tick; a resize reads again at once."""
    reads: list[tuple[tuple[PanelRead, ...], float]] = []
    clocks: list[float] = []

    def read(self: GpuGrid, wanted: tuple[PanelRead, ...], edge: float, number: int) -> None:
        reads.append((wanted, edge))
        clocks.append(now)

    monkeypatch.setattr(GpuGrid, "_read_graphs", read)
    app = make_app(seven_gpu_fleet())
    now = 1_000_000.0
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        grid = app.main_screen.query_one(GpuGrid)
        views = list(grid.query_children(GpuPanelView))
        every = {read_every_s(v.size.width, v.spark_cells(), True) for v in views}

        def clock() -> float:
            return now

        grid.clock = clock
        grid._tick()  # the first look at this clock
        reads.clear()
        clocks.clear()
        for quarter in range(1, 241):
            now = 1_000_000.0 + quarter / 4
            grid._tick()
        edges = sum(math.floor(60 / step) + 1 for step in every)  # each panel size's cells
        assert 60 / max(every) - 1 <= len(reads) <= edges < 240 / 10
        assert [edge for _, edge in reads] == [t - SETTLE_S for t in clocks]
        per_gpu = Counter(read.gpu for wanted_, _ in reads for read in wanted_)
        for view in views:  # each panel read once per cell of its own, not at the others'
            step = read_every_s(view.size.width, view.spark_cells(), True)
            assert per_gpu[view.gpu_index] <= math.floor(60 / step) + 1
        wanted = {read.gpu: read for wanted_, _ in reads for read in wanted_}
        assert set(wanted) == set(range(7))  # every panel has spare rows at 200x50
        assert set(wanted[1].metrics) == {"util", "mem", "tok_s", "running"}
        assert wanted[6].span_s > wanted[1].span_s  # the wider last row: more history
        count = len(reads)
        await pilot.resize_terminal(190, 50)
        await settle(pilot, app)
        grid._tick()
        assert len(reads) == count + 1  # another size: read at once


async def test_at_80x24_the_ticks_read_only_the_sparklines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 80x24 no panel has spare rows: a read asks for the sparkline's metric only."""
    calls: list[tuple[PanelRead, ...]] = []
    monkeypatch.setattr(GpuGrid, "_read_graphs", lambda self, wanted, *_: calls.append(wanted))
    app = make_app(seven_gpu_fleet())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        grid = app.main_screen.query_one(GpuGrid)
        for _ in range(3):
            grid._tick()
        assert len(calls) == 1  # once for these cells, not at every tick
        assert all(read.metrics == ("tok_s",) for read in calls[0])


def test_no_cell_is_read_more_often_than_the_history_is_written() -> None:
    """Whatever the room, a panel's finest cell is at least the finest bucket (5 s): a read
    per finer cell would redraw rows with no new data of their own."""
    from tui.ui.grid.panel_graphs import FINEST_BUCKET_S, cells_due

    cells = [
        read_every_s(w, c, g) for w in range(10, 201) for c in (0, 4, 7, 60) for g in (False, True)
    ]
    assert min(cells) >= FINEST_BUCKET_S
    base = 1_000_000 * FINEST_BUCKET_S + SETTLE_S  # the start of a bucket, edge lag included
    seen = {cells_due((FINEST_BUCKET_S,), base + t / 10) for t in range(0, 300)}  # 30 s
    assert len(seen) == 6  # a read per 5 s bucket
