"""How often the grid reads the panels' graphs: once per completed cell, not on a fixed cadence."""

from __future__ import annotations

from typing import Any

import pytest
from ui_helpers import make_app, settle, seven_gpu_fleet

from tui.ui.app import FleetApp
from tui.ui.grid.gpu_grid import GpuGrid
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.grid.panel_graphs import SETTLE_S, cell_s


async def test_the_history_is_read_once_per_graph_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph moves only when a cell completes: ticks within a cell read nothing, the tick
    after its edge reads once (up to ``SETTLE_S`` ago, where every bucket is complete), and a
    resize reads again at once."""
    reads: list[tuple[tuple[int, ...], float]] = []

    def read(self: GpuGrid, gpus: tuple[int, ...], now: float) -> None:
        reads.append((gpus, now))

    monkeypatch.setattr(GpuGrid, "_read_graphs", read)
    app = make_app(seven_gpu_fleet())
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        grid = app.main_screen.query_one(GpuGrid)
        widths = {view.size.width for view in grid.query_children(GpuPanelView)}
        assert len(widths) == 1  # five columns of 40 cells: one cell grid for all
        step = cell_s(widths.pop())
        start = (10_000 + 0.1) * step + SETTLE_S  # just past a cell's edge
        now = start

        def clock() -> float:
            return now

        grid.clock = clock
        reads.clear()
        for late in (0.0, 0.3, 0.6, 0.85):  # within one cell: one read
            now = start + late * step
            grid._tick()
        assert [at for _, at in reads] == [start - SETTLE_S]
        assert reads[0][0] == tuple(range(7))  # every panel has spare rows at 200x50
        now = start + step  # the next cell completed
        grid._tick()
        assert [at for _, at in reads] == [start - SETTLE_S, start + step - SETTLE_S]
        await pilot.resize_terminal(190, 50)
        await settle(pilot, app)
        grid._tick()
        assert len(reads) >= 3  # another width: another grid of cells, read at once


async def test_a_tick_reads_no_history_where_no_panel_has_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 80x24 no panel has spare rows: the ticks read no history at all."""
    calls: list[Any] = []
    monkeypatch.setattr(GpuGrid, "_read_graphs", lambda self, *args: calls.append(args))
    app = make_app(seven_gpu_fleet())
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        grid = app.main_screen.query_one(GpuGrid)
        for _ in range(3):
            grid._tick()
        assert calls == []


def test_a_cell_finer_than_the_finest_bucket_waits_for_a_bucket() -> None:
    """One full-width panel: 600 s over 200 cells is 3 s a cell, finer than the 5 s buckets."""
    from tui.ui.grid.panel_graphs import FINEST_BUCKET_S, SETTLE_S, cell_s, cells_due

    assert cell_s(200) < FINEST_BUCKET_S
    base = 1_000_000 * FINEST_BUCKET_S + SETTLE_S  # the start of a bucket, edge lag included
    seen = {cells_due((200,), base + t / 10) for t in range(0, 300)}  # 30 s
    assert len(seen) == 6  # a read per 5 s bucket, not one per 3 s cell (10)
    wide = {cells_due((66,), base + t / 10) for t in range(0, 300)}  # 9.1 s cells: unchanged
    assert len(wide) in (3, 4)
