"""A reading with the same GPUs reaches the panels without an awaited watcher; a reading with
another set of GPUs still rebuilds the grid."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual import reactive
from ui_helpers import make_app, settle, seven_gpu_fleet

from tui.ui.grid.gpu_grid import GpuGrid
from tui.ui.grid.gpu_panel import GpuPanelView


async def test_readings_of_the_same_gpus_await_no_watcher(monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = seven_gpu_fleet()
    app = make_app(fleet)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        awaited: list[Any] = []
        original = reactive.await_watcher

        async def counted(obj: Any, awaitable: Any) -> None:
            awaited.append(obj)
            await original(obj, awaitable)

        monkeypatch.setattr(reactive, "await_watcher", counted)
        grid = app.main_screen.query_one(GpuGrid)
        for queued in (3, 4, 5):
            panels = list(fleet.panels)
            server = panels[1].server
            assert server is not None
            panels[1] = replace(panels[1], server=replace(server, queued=queued))
            app.main_screen.fleet = replace(fleet, panels=tuple(panels))
            await pilot.pause()
            view = grid.query_one("#gpu-1", GpuPanelView)
            assert f"queued {queued}" in "\n".join(line.plain for line in view.lines())
        assert not [obj for obj in awaited if isinstance(obj, GpuGrid)]
        fewer = replace(fleet, panels=fleet.panels[:5])  # two GPUs gone: the grid rebuilds
        app.main_screen.fleet = fewer
        await settle(pilot, app)
        await pilot.pause()
        assert [view.gpu_index for view in grid.query_children(GpuPanelView)] == [0, 1, 2, 3, 4]
        assert [obj for obj in awaited if isinstance(obj, GpuGrid)]
