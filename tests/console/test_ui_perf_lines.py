"""What a reading costs a panel: power shown to 5 W (a few watts of jitter redraw nothing), and
the graph rows fitted once when drawn, not at every reading."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual.geometry import Region
from ui_helpers import gpu, graphs_by_hand, make_app, settle, seven_gpu_fleet

from tui.fleet.snapshot import FleetSnapshot
from tui.ui.grid import gpu_panel
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.grid.panel_graphs import PanelSeries
from tui.ui.grid.panel_lines import full_lines, gpu_lines


@pytest.mark.parametrize(
    ("watts", "shown"),
    [(610.0, "610"), (612.4, "610"), (607.6, "610"), (613.0, "615"), (843.2, "845"), (0.4, "0")],
)
def test_power_is_shown_to_the_nearest_5_w(watts: float, shown: str) -> None:
    reading = replace(gpu(0), power_w=watts)
    full = [line.plain for line in gpu_lines(reading, "", 40, full=True)]
    assert full[1].endswith(f"  {shown}/700 W")
    (compact,) = gpu_lines(reading, "", 40, full=False)
    assert compact.plain.endswith(f" {shown}W")


def _power(fleet: FleetSnapshot, index: int, watts: float) -> FleetSnapshot:
    panels = []
    for panel in fleet.panels:
        reading = panel.gpu
        if panel.gpu_index == index and reading is not None:
            reading = replace(reading, power_w=watts)
        panels.append(replace(panel, gpu=reading))
    return replace(fleet, panels=tuple(panels), taken_at=fleet.taken_at + 1.0)


async def test_a_few_watts_of_jitter_redraw_nothing_and_5_w_redraw_the_digits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fleet = seven_gpu_fleet()
    app = make_app(fleet)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        await pilot.pause()
        calls: list[tuple[int, tuple[Region, ...]]] = []
        original = GpuPanelView.refresh

        def refresh(self: Any, *regions: Region, **kwargs: Any) -> Any:
            calls.append((self.gpu_index, regions))
            return original(self, *regions, **kwargs)

        monkeypatch.setattr(GpuPanelView, "refresh", refresh)
        view = app.main_screen.query_one("#gpu-2", GpuPanelView)
        assert any(line.plain.endswith(" 620/700 W") for line in view.lines())
        for watts in (621.9, 618.2, 622.4):  # GPU 2 draws 620 W in the fleet
            app.main_screen.fleet = _power(fleet, 2, watts)
            await pilot.pause()
        assert calls == []
        app.main_screen.fleet = _power(fleet, 2, 626.0)
        await pilot.pause()
        assert [gpu for gpu, _ in calls] == [2]
        (region,) = calls[0][1]
        assert region.width <= 2  # "620" -> "625": the last digits only
        assert any(line.plain.endswith(" 625/700 W") for line in view.lines())


async def test_a_reading_fits_the_number_lines_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The graph rows are fitted to the width when drawn (once per cell); a reading fits the
    number lines above them, and passes the unchanged graph rows over at once."""
    WINDOW_S = 600.0  # what a 40-wide panel's graphs cover (graph_span)

    def series(now: float) -> PanelSeries:
        ts = [now - WINDOW_S + 10 * i for i in range(60)]
        return PanelSeries(
            now - WINDOW_S,
            now,
            {
                "util": tuple((t, 50.0 + i) for i, t in enumerate(ts)),
                "running": tuple((t, float(i % 9)) for i, t in enumerate(ts)),
            },
        )

    graphs_by_hand(monkeypatch)
    fleet = seven_gpu_fleet()
    app = make_app(fleet)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        view = app.main_screen.query_one("#gpu-1", GpuPanelView)
        view.show_graphs(series(1000.0))
        await pilot.pause()
        lines = view.lines()
        filled = sum(1 for line in lines if any(c in "▁▂▃▄▅▆▇█" for c in line.plain))
        assert filled >= 2  # the graphs' rows of blocks
        fitted: list[int] = []
        original = GpuPanelView._fit

        def fit(*args: Any) -> Any:
            fitted.append(1)
            return original(*args)

        monkeypatch.setattr(GpuPanelView, "_fit", fit)
        panel = view.panel
        assert panel is not None
        numbers = len(full_lines(panel, view.size.width))
        before = view.lines()
        assert len(fitted) == numbers < len(before)  # not the graph rows below them
        after = view.lines()
        assert all(a is b for a, b in zip(before[numbers:], after[numbers:], strict=True))
        assert [line.plain for line in before] == [line.plain for line in after]


async def test_a_line_too_long_is_cut_once_while_it_stays_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The note of a GPU with no reading, longer than the panel, is cut when first shown only;
    the next readings show the same cut line (the same object: nothing to compare), and a new
    note is cut anew, once."""
    note = "no reading: " + "the GPU's driver could not be reached on this node " * 3
    fleet = seven_gpu_fleet()
    panels = tuple(
        replace(panel, gpu=None, gpu_note=note) if panel.gpu_index == 6 else panel
        for panel in fleet.panels
    )
    app = make_app(replace(fleet, panels=panels))
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        view = app.main_screen.query_one("#gpu-6", GpuPanelView)
        cut: list[str] = []
        original = gpu_panel.fit

        def fit(*args: Any) -> Any:
            cut.append(args[0].plain)
            return original(*args)

        monkeypatch.setattr(gpu_panel, "fit", fit)
        before = view.lines()
        (noted,) = [line for line in before if line.plain.startswith("no reading")]
        assert noted.plain.endswith(" …") and noted.cell_length <= view.size.width
        after = view.lines()
        assert next(line for line in after if line.plain.startswith("no reading")) is noted
        assert cut == []  # cut at the first paint, not since
        panel = view.panel
        assert panel is not None
        other = note.replace("driver", "daemon")
        view.show(replace(panel, gpu_note=other))
        view.lines()
        view.lines()
        assert cut == [other]


def test_a_line_that_reads_as_before_is_the_same_object_and_its_style_keeps_it_apart() -> None:
    """A new reading whose state, memory, KV and max running did not move builds those lines
    as the very objects shown (the panel's diff passes them at once); the load lines moved.
    Lines of the same text in another style are never shared (Content compares by text)."""
    from tui.ui.grid.panel_lines import line, max_running

    panel = seven_gpu_fleet().panels[1]
    server = panel.server
    assert server is not None and server.running is not None
    moved = replace(panel, server=replace(server, running=server.running + 1))
    before, after = full_lines(panel, 38), full_lines(moved, 38)
    same = [a is b for a, b in zip(before, after, strict=True)]
    texts = [a.plain for a in after]
    assert same[texts.index(next(t for t in texts if t.startswith("KV ")))]
    assert same[0] and same[1]  # the state and memory lines
    running = texts.index(next(t for t in texts if t.startswith("running ")))
    assert not same[running] and after[running].plain != before[running].plain
    plain, warned = line("40"), line(("40", "$warning"))
    assert plain == warned and plain is not warned  # equal text, never the same line
    assert [s.style for s in warned.spans] == ["$warning"] and not plain.spans
    capped = replace(server, capped=True, max_running_effective=40, max_running_requested=64)
    assert max_running(capped).plain.startswith("40 (")
    assert max_running(capped).spans and max_running(capped) is max_running(capped)
