"""``GPUFLEET_PLAIN=render``: every render replacement switched off, the console draws the very
same screen through Textual's own path (its compositor, refresh and styles cache,
``Visual.to_strips``, the whole panel repainted)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual._compositor import Compositor
from textual.geometry import Region
from ui_helpers import make_app, settle, seven_gpu_fleet

from tui.fleet.snapshot import FleetSnapshot
from tui.ui.grid.gpu_panel import GpuPanelView

Cells = list[list[tuple[str, object]]]


def _reading(fleet: FleetSnapshot, step: int) -> FleetSnapshot:
    """A new reading: GPU 1's and 5's counts, KV use and throughput history moved."""
    panels = []
    for panel in fleet.panels:
        server = panel.server
        if server is not None and panel.gpu_index in (1, 5):
            history = (*server.throughput_history[1:], 1000.0 * step + 7 * panel.gpu_index)
            server = replace(
                server,
                running=(step * 3) % 17,
                queued=(step * 7) % 31,
                token_usage=step / 10,
                throughput_history=history,
                gen_throughput=history[-1],
                updated_at=server.updated_at + step,
            )
        panels.append(replace(panel, server=server))
    return replace(fleet, panels=tuple(panels), taken_at=fleet.taken_at + step)


async def _screens(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Cells], list[str]]:
    """The screen's cells after the first reading and four more, and how the panels refreshed
    (``whole`` or ``regions``)."""
    refreshed: list[str] = []
    original = GpuPanelView.refresh

    def refresh(self: Any, *regions: Region, **kwargs: Any) -> Any:
        refreshed.append("regions" if regions else "whole")
        return original(self, *regions, **kwargs)

    fleet = seven_gpu_fleet()
    app = make_app(fleet)
    screens: list[Cells] = []
    with monkeypatch.context() as patch:  # undone after this console
        async with app.run_test(size=(200, 50)) as pilot:
            await settle(pilot, app)
            patch.setattr(GpuPanelView, "refresh", refresh)
            for step in range(5):
                if step:
                    fleet = _reading(fleet, step)
                    app.main_screen.fleet = fleet
                await pilot.pause()
                await pilot.pause()
                strips = app.screen._compositor.render_strips()
                screens.append([[(s.text, s.style) for s in strip] for strip in strips])
            plain_path = type(app.main_screen._compositor) is Compositor
            panel = app.main_screen.query_one("#gpu-1", GpuPanelView)
            parts = (panel._rows, panel._drawer)
            assert plain_path == all(part is None for part in parts) == (not panel._line_diff)
    return screens, refreshed


async def test_the_render_switches_draw_the_same_screen_through_textual(
    monkeypatch: pytest.MonkeyPatch, plain_switch: Any
) -> None:
    ours, refreshed = await _screens(monkeypatch)
    assert set(refreshed) == {"regions"}  # the changed cells alone
    plain_switch("render")
    theirs, refreshed = await _screens(monkeypatch)
    assert set(refreshed) == {"whole"}  # linediff off: the changed panel, whole
    assert len(theirs) == len(ours) == 5
    for step, (mine, textuals) in enumerate(zip(ours, theirs, strict=True)):
        assert mine == textuals, step
    assert ours[1] != ours[0] and ours[4] != ours[3]  # the readings did change the screen
