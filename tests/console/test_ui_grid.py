"""The grid's layout at 80x24, 200x50 and with 16 GPUs; what a panel says."""

from __future__ import annotations

import pytest
from textual.geometry import Region
from ui_helpers import fleet_of, make_app, settle, seven_gpu_fleet

from tui.fleet.snapshot import FleetSnapshot, ServerSnapshot
from tui.ui.app import FleetApp
from tui.ui.grid.gpu_grid import GpuGrid
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.grid.layout import MIN_PANEL_HEIGHT, MIN_PANEL_WIDTH, choose_shape, last_row_columns


@pytest.mark.parametrize("count", range(1, 17))
@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
def test_shape_fits_every_count_in_the_area(count: int, size: tuple[int, int]) -> None:
    width, height = size[0], size[1] - 2  # header and footer
    shape = choose_shape(count, width, height)
    assert shape.columns * shape.rows >= count
    assert shape.fits
    assert width // shape.columns >= MIN_PANEL_WIDTH
    assert height // shape.rows >= MIN_PANEL_HEIGHT


def test_shape_prefers_the_full_layout_when_there_is_room() -> None:
    assert choose_shape(7, 200, 48).full
    assert not choose_shape(7, 80, 22).full


async def panel_regions(
    fleet: FleetSnapshot, size: tuple[int, int]
) -> tuple[list[Region], FleetApp]:
    app = make_app(fleet)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        grid = app.screen.query_one(GpuGrid)
        regions = [view.region for view in app.screen.query(GpuPanelView)]
        assert grid.region.bottom <= size[1] - 1  # footer stays visible
    return regions, app


def assert_all_visible(regions: list[Region], size: tuple[int, int], count: int) -> None:
    screen = Region(0, 1, size[0], size[1] - 2)
    assert len(regions) == count
    for region in regions:
        assert screen.contains_region(region), region  # no panel cut or off screen
        assert region.height >= MIN_PANEL_HEIGHT
    for i, a in enumerate(regions):
        assert all(not a.overlaps(b) for b in regions[i + 1 :])


async def test_seven_gpus_fit_at_80x24() -> None:
    regions, _ = await panel_regions(seven_gpu_fleet(), (80, 24))
    assert_all_visible(regions, (80, 24), 7)


async def test_seven_gpus_show_everything_at_200x50() -> None:
    app = make_app(seven_gpu_fleet())
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        views = list(app.screen.query(GpuPanelView))
        assert_all_visible([v.region for v in views], (200, 50), 7)
        assert app.screen.query_one(GpuGrid).shape.full
        capped = str(views[0].render())
        for text in (
            "KV 798,080 tok",
            "mamba 200 slots",
            "40 (arg 64)",  # no profile recorded: the server's argument, not "asked"
            "running 40/40 (arg 64)",
            "gen 1,400 tok/s",  # 3 significant digits: the last ones jitter
        ):
            assert text in capped
        failed = str(views[2].render())
        assert "OOM: RuntimeError: Not enough memory" in failed
        assert "capturing CUDA graphs" in str(views[3].render())
        assert "stale" in str(views[4].render())
        assert "NVML cannot read GPU 6" in str(views[6].render())


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_sixteen_gpus_fit(size: tuple[int, int]) -> None:
    regions, _ = await panel_regions(fleet_of(16), size)
    assert_all_visible(regions, size, 16)


async def test_columns_follow_a_resize() -> None:
    app = make_app(seven_gpu_fleet())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        grid = app.screen.query_one(GpuGrid)
        assert grid.shape.columns == 3
        await pilot.resize_terminal(200, 50)
        await pilot.pause()
        await pilot.pause()
        assert grid.shape.full
        assert grid.styles.grid_size_columns == last_row_columns(7, grid.shape.columns)[0]
        assert_all_visible([v.region for v in app.screen.query(GpuPanelView)], (200, 50), 7)


async def test_capped_value_is_styled_as_a_warning_and_error_as_error() -> None:
    app = make_app(seven_gpu_fleet())
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        views = list(app.screen.query(GpuPanelView))
        capped = views[0].render()
        assert any(
            "$warning" in str(span.style) and capped.plain[span.start : span.end] == "40 (arg 64)"
            for span in capped.spans
        )
        failed = views[2].render()
        assert any("$error" in str(span.style) for span in failed.spans)
        assert views[2].has_class("-failed")


def _fleet_with(*servers: ServerSnapshot | None) -> FleetSnapshot:
    from dataclasses import replace

    fleet = seven_gpu_fleet()
    panels = tuple(
        replace(p, server=servers[i]) if i < len(servers) else p for i, p in enumerate(fleet.panels)
    )
    return replace(fleet, panels=panels)


async def test_stuck_and_pressure_show_on_the_panel_apart_from_errors() -> None:
    from ui_helpers import ready_server

    from tui.fleet.snapshot import ServerState

    stuck = ready_server(0, state=ServerState.STUCK, stuck_for_s=42.4)
    pressured = ready_server(1, pressure="retracted 3", pressure_age_s=12.2)
    too_long = ready_server(
        2,
        last_error="Input length (300000 tokens) exceeds the maximum allowed length",
        error_reason="input_too_long",
        error_fatal=False,
    )
    for size in ((200, 50), (80, 24)):  # full and compact layouts
        app = make_app(_fleet_with(stuck, pressured, too_long))
        async with app.run_test(size=size) as pilot:
            await settle(pilot, app)
            views = list(app.screen.query(GpuPanelView))
            first = views[0].render()
            assert first.plain.startswith("stuck 42s")
            assert any("$error" in str(s.style) for s in first.spans if s.start == 0)
            assert views[0].has_class("-failed")
            second = views[1].render()
            line = next(ln for ln in second.plain.splitlines() if "retracted" in ln)
            assert line.startswith("retracted 3 (12s ago)")
            start = second.plain.index("retracted 3")
            assert any("$warning" in str(s.style) for s in second.spans if s.start == start)
            assert not views[1].has_class("-failed")
            third = views[2].render()
            start = third.plain.index("INPUT_TOO_LONG")
            assert any("$warning" in str(s.style) for s in third.spans if s.start == start)


def test_detail_numbers_say_why_stuck_and_the_pressure() -> None:
    from dataclasses import replace

    from ui_helpers import ready_server

    from tui.fleet.snapshot import ServerState
    from tui.ui.detail.detail_screen import numbers_text

    panel = seven_gpu_fleet().panels[0]
    server = ready_server(
        0, state=ServerState.STUCK, stuck_for_s=42.0, pressure="decode OOM", pressure_age_s=5.0
    )
    text = numbers_text(replace(panel, server=server)).plain
    assert "no progress for 42s with requests waiting" in text
    assert "decode OOM (5s ago)" in text


def test_a_short_last_row_shares_the_whole_width() -> None:
    assert last_row_columns(7, 5) == (10, (2,) * 5 + (5, 5))  # 200x50: 5 + 2 panels
    assert last_row_columns(7, 3) == (3, (1,) * 6 + (3,))  # 80x24: 3 + 3 + 1
    assert last_row_columns(6, 3) == (3, (1,) * 6)  # full rows: as they were
    assert last_row_columns(2, 5) == (5, (1, 1))  # one row: the shape chose its columns


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_no_empty_band_the_last_row_fills_the_grids_width(size: tuple[int, int]) -> None:
    app = make_app(seven_gpu_fleet())
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        grid = app.screen.query_one(GpuGrid).region
        regions = [view.region for view in app.screen.query(GpuPanelView)]
        last_row = [r for r in regions if r.y == max(r.y for r in regions)]
        assert len(last_row) < len(regions)  # a second row, shorter than the first
        assert min(r.x for r in last_row) == grid.x
        assert max(r.right for r in last_row) >= grid.right - 2  # the grid's width, less rounding
    assert_all_visible(regions, size, 7)
