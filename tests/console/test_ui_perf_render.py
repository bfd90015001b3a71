"""What a new reading repaints: only the cells whose text changed, never the screen or grid."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import pytest
from textual.content import Content
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from ui_helpers import RecordingFleet, graphs_by_hand, make_app, settle, seven_gpu_fleet, wait_for

from tui.fleet.snapshot import FleetSnapshot, GpuPanel
from tui.ui.app import FleetApp
from tui.ui.format import sig3_text
from tui.ui.grid.gpu_grid import GpuGrid
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.grid.line_diff import changed_span, common_prefix, common_suffix
from tui.ui.main_screen import MainScreen


def test_changed_span_covers_only_the_differing_cells() -> None:
    old = Content("running 16  queued 30")
    assert changed_span(old, Content("running 16  queued 30")) is None
    assert changed_span(old, Content("running 16  queued 32")) == (20, 21)
    assert changed_span(old, Content("running 16  queued 3")) == (20, 21)  # shorter: old cell
    # A width change moves everything after it: the rest of the line is repainted.
    assert changed_span(old, Content("running 9  queued 30")) == (8, 21)
    assert changed_span(old, Content("running 17  queued 30")) == (9, 10)  # same width


def _painted(old: str, new: str) -> str:
    """What a terminal shows after ``old`` is drawn, then only ``changed_span``'s cells of
    ``new`` (one character per cell here)."""
    width = max(len(old), len(new)) + 2
    screen, fresh = list(old.ljust(width)), new.ljust(width)
    span = changed_span(Content(old), Content(new))
    if span is not None:
        screen[span[0] : span[1]] = fresh[span[0] : span[1]]
    return "".join(screen)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("util 45%  60°C  97/1000 W", "util 99%  75°C  843/1000 W"),  # the demo's '8431000 W'
        ("util 99%  75°C  843/1000 W", "util 5%  41°C  97/1000 W"),
        ("running 16  queued 30", "running 9  queued 30"),
        ("running 16  queued 30", "running 16  queued 3"),
        ("gen 38,700 tok/s ▃▄▅", "gen 1,930 tok/s ▄▅▆"),
        ("token 1%  mamba 8%", "token 12%  mamba 80%"),
        ("abc", ""),
        ("", "abc"),
        ("same", "same"),
    ],
)
def test_painting_only_the_changed_span_leaves_the_new_line_on_screen(old: str, new: str) -> None:
    assert _painted(old, new) == new.ljust(max(len(old), len(new)) + 2)


def test_changed_span_repaints_the_line_when_only_the_style_changes() -> None:
    old = Content.styled("ready", "$success")
    assert changed_span(old, Content.styled("ready", "$warning")) == (0, 5)


@pytest.mark.parametrize(
    ("value", "text"),
    [(1402.31, "1,400"), (45.67, "45.7"), (3.456, "3.46"), (0.0, "0"), (None, "–")],
)
def test_rates_show_three_significant_digits(value: float | None, text: str) -> None:
    assert sig3_text(value) == text


def _with(fleet: FleetSnapshot, gpu: int, **changes: Any) -> FleetSnapshot:
    panels = []
    for panel in fleet.panels:
        server = panel.server
        if server is not None:
            server = replace(server, updated_at=server.updated_at + 1.0)  # a new reading
            if panel.gpu_index == gpu:
                server = replace(server, **changes)
        panels.append(GpuPanel(panel.gpu_index, panel.gpu, server, panel.gpu_note))
    return FleetSnapshot(tuple(panels), fleet.gpu_source, fleet.taken_at + 1.0)


@asynccontextmanager
async def settled_console(fleet: FleetSnapshot) -> AsyncIterator[tuple[FleetApp, Pilot[None]]]:
    """The console at 200x50 on ``fleet``, every panel drawn once."""
    app = make_app(fleet)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        await pilot.pause()
        yield app, pilot


async def test_a_new_reading_repaints_only_the_changed_cells(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fleet = seven_gpu_fleet()
    async with settled_console(fleet) as (app, pilot):
        calls: list[tuple[str, tuple[Region, ...]]] = []

        def spy(cls: type[Widget]) -> None:
            original = cls.refresh

            def refresh(self: Any, *regions: Region, **kwargs: Any) -> Any:
                calls.append((type(self).__name__ + str(getattr(self, "gpu_index", "")), regions))
                return original(self, *regions, **kwargs)

            monkeypatch.setattr(cls, "refresh", refresh)

        for cls in (MainScreen, GpuGrid, GpuPanelView):
            spy(cls)
        app.main_screen.fleet = _with(fleet, 99)  # same numbers, newer timestamps
        await pilot.pause()
        assert calls == []
        app.main_screen.fleet = _with(fleet, 1, queued=7)  # "queued 11" -> "queued 7"
        await pilot.pause()
        assert len(calls) == 1
        name, regions = calls[0]
        assert name == "GpuPanelView1"
        view = app.screen.query_one("#gpu-1", GpuPanelView)
        line = next(i for i, c in enumerate(view.lines()) if c.plain.startswith("running"))
        assert len(regions) == 1 and regions[0].y == line and regions[0].height == 1
        assert regions[0].width <= 2  # the digits, not the line
        assert "queued 7" in str(view.render())


async def test_a_reading_that_changes_several_lines_refreshes_the_panel_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two changed lines of one panel: one ``refresh`` call carrying a region per line
    (each call costs Textual its own bookkeeping), the other panels none."""
    fleet = seven_gpu_fleet()
    async with settled_console(fleet) as (app, pilot):
        calls: list[tuple[int, tuple[Region, ...]]] = []
        original = GpuPanelView.refresh

        def refresh(self: Any, *regions: Region, **kwargs: Any) -> Any:
            calls.append((self.gpu_index, regions))
            return original(self, *regions, **kwargs)

        monkeypatch.setattr(GpuPanelView, "refresh", refresh)
        app.main_screen.fleet = _with(fleet, 5, queued=7, running=3, token_usage=0.5)
        await pilot.pause()
        view = app.screen.query_one("#gpu-5", GpuPanelView)
        lines = [c.plain for c in view.lines()]
        running = next(i for i, text in enumerate(lines) if text.startswith("running"))
        token = next(
            i for i, text in enumerate(lines) if text.startswith("KV") and text.endswith("%")
        )
        assert [gpu for gpu, _ in calls] == [5]
        assert sorted(region.y for region in calls[0][1]) == [running, token]
        assert "running 3/64  queued 7" in lines[running]


async def test_only_the_changed_line_is_rendered_again_and_a_theme_renders_all() -> None:
    fleet = seven_gpu_fleet()
    async with settled_console(fleet) as (app, pilot):
        view = app.screen.query_one("#gpu-1", GpuPanelView)
        before = list(view._strips)
        assert before and all(strip is not None for strip in before)  # every line drawn once
        app.main_screen.fleet = _with(fleet, 1, queued=7)
        await pilot.pause()
        after = list(view._strips)
        changed = [y for y, (a, b) in enumerate(zip(before, after, strict=True)) if a is not b]
        line = next(i for i, c in enumerate(view.lines()) if c.plain.startswith("running"))
        assert changed == [line]
        changed_strip = after[line]
        assert changed_strip is not None and "queued 7" in changed_strip.text
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        themed = list(view._strips)
        assert all(strip is not None for strip in themed)
        assert all(a is not b for a, b in zip(after, themed, strict=True))  # new colours


async def test_a_panel_line_has_the_cells_textual_would_render() -> None:
    """The panel's own line rendering gives the very segments (text, style, offsets) that
    ``Visual.to_strips`` gives, for every line of every panel (styled state words, bars,
    warnings, errors), in two themes."""
    from textual.visual import Visual

    from tui.fleet.snapshot import ServerState

    fleet = seven_gpu_fleet()
    fleet = _with(fleet, 3, state=ServerState.FAILED, last_error="CUDA out of memory", capped=True)
    async with settled_console(fleet) as (app, pilot):
        for theme in ("textual-dark", "textual-light"):
            app.theme = theme
            await pilot.pause()
            compared = 0
            for view in app.screen.query(GpuPanelView):
                style = view.visual_style
                drawer = view._drawer
                assert drawer is not None
                for line in view.lines():
                    ours = drawer.line_strip(line, style)
                    textual = Visual.to_strips(view, line, view.size.width, 1, style)[0]
                    assert list(ours) == list(textual), line.plain
                    assert ours.cell_length == textual.cell_length
                    compared += 1
            assert compared >= 7 * 7


def _count_calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Count the calls of ``owner.name`` (one list item per call)."""
    calls: list[int] = []
    original = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


async def test_the_grid_runs_no_interval_and_dims_the_panels_when_readings_stop() -> None:
    """Each reading pushes back the grid's one look at the ages (no Textual interval ticking
    every second); when the readings stop, that look comes and the panels dim with their age,
    once a second from then on."""
    import asyncio

    fleet = seven_gpu_fleet()
    app = make_app(fleet, poll_interval_s=0.2)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        grid = app.main_screen.query_one(GpuGrid)
        view = app.main_screen.query_one("#gpu-1", GpuPanelView)
        assert not list(grid._timers)
        port = app.port
        assert isinstance(port, RecordingFleet)
        polls = port.poller.polls
        await wait_for(pilot, lambda: port.poller.polls >= polls + 3, "readings")
        assert " · " not in _panel_text(view)
        answer = asyncio.Event()

        async def stopped() -> FleetSnapshot:
            await answer.wait()  # the monitor stops answering (cancelled as the app exits)
            return fleet

        port.poller.poll = stopped  # type: ignore[method-assign]  # the monitor stops answering
        await wait_for(pilot, lambda: "queued 11 · " in _panel_text(view), "dimmed", timeout=15)
        first = _panel_text(view)
        await wait_for(pilot, lambda: _panel_text(view) != first, "the age moving on")
        assert "queued 11 · " in _panel_text(view)


def _panel_text(view: GpuPanelView) -> str:
    return "\n".join(line.plain for line in view.lines())


async def test_an_age_tick_that_changes_no_age_builds_no_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The grid's age tick, every second, builds no panel's lines while the next reading is not
    yet due (the same age: nothing to draw); a late reading dims, and the same values arriving
    again undim, though the panel's reading did not change."""
    import time

    fleet = seven_gpu_fleet()
    async with settled_console(fleet) as (app, pilot):
        grid = app.main_screen.query_one(GpuGrid)
        view = app.main_screen.query_one("#gpu-1", GpuPanelView)
        built = _count_calls(monkeypatch, GpuPanelView, "lines")
        grid._received_at = time.monotonic()
        grid._age_panels()
        await pilot.pause()
        assert built == []
        assert " · " not in _panel_text(view)
        # the next reading a fraction of a second past the interval (the poll takes a moment):
        # not late, nothing built (each tick used to build every panel's lines for it)
        built.clear()  # (reading the text above built it once)
        for fraction in (0.1, 0.3, 0.6):
            grid._received_at = time.monotonic() - app.poll_interval_s - fraction
            grid._age_panels()
            await pilot.pause()
        assert built == []
        # the monitor stopped answering: the next reading is 20 s late
        grid._received_at = time.monotonic() - app.poll_interval_s - 20.0
        grid._age_panels()
        await pilot.pause()
        assert len(built) >= len(fleet.panels)
        assert "queued 11 · 19s" in _panel_text(view) or "queued 11 · 20s" in _panel_text(view)
        app.main_screen.fleet = fleet  # the very same reading again, now current
        await pilot.pause()
        assert view.late_s == 0.0
        assert " · " not in _panel_text(view)


async def test_the_graphs_are_drawn_again_only_for_new_series(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A panel's graphs are drawn once per series read (every few seconds), not at
    every reading; a new series or another size draws them again."""
    from tui.ui.grid import gpu_panel
    from tui.ui.grid.panel_graphs import PanelSeries

    WINDOW_S = 600.0  # what a 40-wide panel's graphs cover (graph_span)

    def series(now: float) -> PanelSeries:
        ts = [now - WINDOW_S + 10 * i for i in range(60)]
        return PanelSeries(
            now - WINDOW_S, now, {"util": tuple((t, 50.0 + i) for i, t in enumerate(ts))}
        )

    graphs_by_hand(monkeypatch)
    fleet = seven_gpu_fleet()
    async with settled_console(fleet) as (app, pilot):
        view = app.main_screen.query_one("#gpu-1", GpuPanelView)
        assert view.spare_rows() >= 3
        drawn = _count_calls(monkeypatch, gpu_panel, "graph_lines")
        view.show_graphs(series(1000.0))
        await pilot.pause()
        assert len(drawn) == 1 and "util 108%" in _panel_text(view)
        for queued in (7, 8, 9):
            app.main_screen.fleet = _with(fleet, 1, queued=queued)
            await pilot.pause()
        assert len(drawn) == 1
        assert "queued 9" in _panel_text(view) and "util 108%" in _panel_text(view)
        view.show_graphs(series(1005.0))
        await pilot.pause()
        assert len(drawn) == 2


async def test_the_sparkline_draws_each_readings_history() -> None:
    """A reading whose throughput history moved redraws the sparkline with it, beside the new
    rate (the 3 s hold of the history it once had bought no CPU: bench/results.md, issue 37)."""
    from tui.ui.grid.panel_lines import gen_line

    fleet = seven_gpu_fleet()
    async with settled_console(fleet) as (app, pilot):
        view = app.main_screen.query_one("#gpu-1", GpuPanelView)
        server = fleet.panels[1].server
        assert server is not None and len(server.throughput_history) > 10
        gen_y = next(i for i, c in enumerate(view.lines()) if c.plain.startswith("gen "))
        before = view.lines()[gen_y].plain
        for rate in (5000.0, 200.0):
            shifted = (*server.throughput_history[1:], rate)
            fleet = _with(fleet, 1, throughput_history=shifted, gen_throughput=rate)
            app.main_screen.fleet = fleet
            await pilot.pause()
            server = fleet.panels[1].server
            assert server is not None
            expected = gen_line(server, view.size.width, full=True).plain
            assert view.lines()[gen_y].plain == expected != before
            before = expected


async def test_a_graph_read_that_draws_the_same_cells_builds_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The grid reads the history every few seconds, but a graph moves only when a cell
    completes: a read with no new point up to the last whole cell builds no panel line and
    draws no graph; one whose right edge passed a cell's end draws again."""
    from tui.ui.grid import gpu_panel
    from tui.ui.grid.panel_graphs import PanelSeries

    WINDOW_S = 600.0  # what a 40-wide panel's graphs cover (graph_span)

    def series(now: float) -> PanelSeries:
        ts = [now - WINDOW_S + 10 * i for i in range(60)]
        return PanelSeries(
            now - WINDOW_S, now, {"util": tuple((t, 50.0 + i) for i, t in enumerate(ts))}
        )

    graphs_by_hand(monkeypatch)
    fleet = seven_gpu_fleet()
    async with settled_console(fleet) as (app, pilot):
        view = app.main_screen.query_one("#gpu-1", GpuPanelView)
        step = WINDOW_S / view.size.width  # one cell: two dot columns
        now = 1000 * step + 0.1
        first = series(now)
        view.show_graphs(first)
        await pilot.pause()
        built = _count_calls(monkeypatch, GpuPanelView, "lines")
        drawn = _count_calls(monkeypatch, gpu_panel, "graph_lines")
        for later in (0.25, 0.5, 0.8):  # read again within the cell, no new point
            shift = later * step
            view.show_graphs(PanelSeries(first.start + shift, first.end + shift, first.points))
            await pilot.pause()
        assert (built, drawn) == ([], [])
        moved = PanelSeries(first.start + step, first.end + step, first.points)
        view.show_graphs(moved)
        await pilot.pause()
        assert len(drawn) == 1 and len(built) >= 1


def test_common_prefix_and_suffix_agree_with_the_character_loop() -> None:
    """The halving search against the plain loop it replaced, on strings that share some of
    their start and end (the shape of a panel line whose number changed)."""
    rng = random.Random(7)
    for _ in range(2000):
        head = "".join(rng.choice("ab 1/W") for _ in range(rng.randrange(8)))
        tail = "".join(rng.choice("ab 1/W") for _ in range(rng.randrange(8)))
        a = head + "".join(rng.choice("0123") for _ in range(rng.randrange(4))) + tail
        b = head + "".join(rng.choice("0123") for _ in range(rng.randrange(4))) + tail
        prefix = 0
        while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
            prefix += 1
        suffix = 0
        while suffix < min(len(a), len(b)) and a[-1 - suffix] == b[-1 - suffix]:
            suffix += 1
        assert (common_prefix(a, b), common_suffix(a, b)) == (prefix, suffix), (a, b)
