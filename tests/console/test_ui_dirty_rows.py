"""The main screen's partial updates render only the changed rows of the changed widgets, and
send exactly what Textual's own compositor would."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual._compositor import ChopsUpdate, Compositor
from textual.widget import Widget
from ui_helpers import make_app, settle, seven_gpu_fleet

from tui.fleet.snapshot import FleetSnapshot, GpuPanel
from tui.ui.app import FleetApp
from tui.ui.grid.gpu_grid import GpuGrid
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.main_screen import MainScreen
from tui.ui.render.dirty_rows import DirtyRowsCompositor


def _with(fleet: FleetSnapshot, step: int, gpus: tuple[int, ...]) -> FleetSnapshot:
    """A new reading whose ``gpus`` changed their counts and KV usage (two lines each)."""
    panels = []
    for panel in fleet.panels:
        server = panel.server
        if server is not None:
            server = replace(server, updated_at=server.updated_at + step)
            if panel.gpu_index in gpus:
                server = replace(
                    server,
                    running=step % 17,
                    queued=(step * 7) % 31,
                    token_usage=step / 10,  # another line of the panel
                )
        panels.append(GpuPanel(panel.gpu_index, panel.gpu, server, panel.gpu_note))
    return FleetSnapshot(tuple(panels), fleet.gpu_source, fleet.taken_at + step)


def _seven_gpu_app() -> tuple[FleetSnapshot, FleetApp]:
    """The seven-GPU fleet and a console app showing it."""
    fleet = seven_gpu_fleet()
    app = make_app(fleet)
    return fleet, app


def _count_renders(monkeypatch: pytest.MonkeyPatch, cls: type[Widget], rendered: list[str]) -> None:
    """Record the id of each ``cls`` widget rendered, in ``rendered``."""
    original = cls.render_lines

    def counted(self: Widget, crop: Any) -> Any:
        rendered.append(self.id or "")
        return original(self, crop)

    monkeypatch.setattr(cls, "render_lines", counted)


async def test_partial_updates_send_what_textuals_compositor_sends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each update is computed both ways on the same changed regions: the bytes must match,
    and only the changed panels are rendered (not the others, nor the grid behind them)."""
    fleet, app = _seven_gpu_app()
    compared: list[tuple[str, str]] = []
    rendered: list[str] = []
    ours = DirtyRowsCompositor.render_partial_update

    def both(self: DirtyRowsCompositor) -> ChopsUpdate | None:
        changed = set(self._dirty_regions)
        theirs = Compositor.render_partial_update(self)  # Textual's: every widget in the box
        self._dirty_regions.update(changed)
        rendered.clear()
        mine = ours(self)
        if theirs is None or mine is None:
            assert theirs is mine
            return mine
        console = app.console
        compared.append((theirs.render_segments(console), mine.render_segments(console)))
        return mine

    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        await pilot.pause()
        assert isinstance(app.main_screen._compositor, DirtyRowsCompositor)
        monkeypatch.setattr(DirtyRowsCompositor, "render_partial_update", both)
        for cls in (GpuPanelView, GpuGrid, MainScreen):
            _count_renders(monkeypatch, cls, rendered)
        for step, gpus in enumerate([(0, 6), (1,), (1, 5), (0, 1, 2, 3, 4, 5, 6), (3,)], 1):
            fleet = _with(fleet, step, gpus)
            app.main_screen.fleet = fleet
            await pilot.pause()
            await pilot.pause()
            if gpus == (1,):
                # not the six others, nor the grid and the screen behind the panel
                assert rendered and set(rendered) == {"gpu-1"}
    assert len(compared) >= 4
    for theirs_text, mine_text in compared:
        assert mine_text == theirs_text


async def test_a_reading_renders_exactly_its_changed_panels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each reading's next frame renders the panels it changed, none of the others."""
    fleet, app = _seven_gpu_app()
    rendered: list[str] = []
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        await pilot.pause()
        _count_renders(monkeypatch, GpuPanelView, rendered)
        for step, gpus in enumerate([(4,), (1, 5), (0, 6)], 1):
            rendered.clear()
            fleet = _with(fleet, step, gpus)
            app.main_screen.fleet = fleet
            await pilot.pause()
            await pilot.pause()
            assert set(rendered) == {f"gpu-{gpu}" for gpu in gpus}, step
            view = app.main_screen.query_one(f"#gpu-{gpus[0]}", GpuPanelView)
            assert f"queued {(step * 7) % 31}" in "\n".join(line.plain for line in view.lines())
