"""A panel's rows framed by ``FramedRows`` are the rows Textual's styles cache renders."""

from __future__ import annotations

from dataclasses import replace

from textual._styles_cache import StylesCache
from textual.geometry import Region
from textual.strip import Strip
from ui_helpers import make_app, settle, seven_gpu_fleet

from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.grid.panel_rows import FramedRows


def _cells(strips: list[Strip]) -> list[list[tuple[str, object]]]:
    return [[(segment.text, segment.style) for segment in strip] for strip in strips]


def _rows(panel: GpuPanelView) -> FramedRows:
    rows = panel._rows
    assert isinstance(rows, FramedRows)
    return rows


def _framed_and_textuals(panel: GpuPanelView) -> tuple[list[Strip], list[Strip]]:
    """Rows of ``panel`` through its ``render_lines`` (the border cells kept from a first
    render; then the whole panel, the content rows alone as a partial update asks for them,
    whole and cut to some columns, and rows across a border) and through a fresh Textual
    styles cache (the reference: every row rendered from the CSS)."""
    region = panel.outer_size.region
    width, height = panel.outer_size
    _rows(panel).frame = None
    panel.refresh()  # Textual's rows drawn anew, its cache in step
    panel.render_lines(region)  # takes the border cells
    frame = _rows(panel).frame
    assert frame is not None
    crops = [
        region,
        Region(0, 1, width, height - 2),
        Region(3, 2, width - 9, 4),
        Region(0, 0, width, 3),
        Region(5, height - 3, width - 5, 3),
    ]
    framed = [strip for crop in crops for strip in panel.render_lines(crop)]
    assert _rows(panel).frame is frame  # the same cells framed them all
    textual = StylesCache()
    textuals = [strip for crop in crops for strip in textual.render_widget(panel, crop)]
    return framed, textuals


async def test_framed_rows_are_textuals_rows() -> None:
    """Every panel (ready, capped, failed, starting, stale, no GPU reading), selected or not,
    marked or not, and after a new reading: the same cells, styles and offsets."""
    fleet = seven_gpu_fleet()
    app = make_app(fleet)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        app.main_screen.marked = frozenset({3})
        app.main_screen.selected = 5
        await pilot.pause()
        panels = list(app.query(GpuPanelView))
        assert len(panels) == 7
        compared = 0
        for panel in panels:
            framed, textuals = _framed_and_textuals(panel)
            assert len(framed) == 2 * panel.outer_size.height - 2 + 4 + 3 + 3
            assert _cells(framed) == _cells(textuals)
            compared += 1
        server = fleet.panels[1].server
        assert server is not None
        changed = replace(server, running=31, queued=9, token_usage=0.77)
        panel = panels[1]
        panel.show(replace(fleet.panels[1], server=changed))
        await pilot.pause()
        framed, textuals = _framed_and_textuals(panel)
        assert "running 31" in "".join(strip.text for strip in framed)
        assert _cells(framed) == _cells(textuals)
        # late: its load values dimmed (Textual's filter turns dim to colour); no await from
        # here on, or the grid's tick would set the panel's age back
        panel.age_by(20.0)
        assert any(segment.style and segment.style.dim for segment in panel.render_line(5))
        framed, textuals = _framed_and_textuals(panel)
        assert "· 2" in "".join(strip.text for strip in framed)
        assert _cells(framed) == _cells(textuals)
    assert compared == 7


async def test_a_change_of_style_takes_the_border_cells_again() -> None:
    """Selecting a panel (a heavy border in another colour) clears the kept cells; the rows
    then carry the new border."""
    app = make_app(seven_gpu_fleet())
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        await pilot.pause()
        panel = app.query_one("#gpu-4", GpuPanelView)
        before = _rows(panel).frame
        assert before is not None  # the first paint took them
        app.main_screen.selected = 4
        await pilot.pause()
        await pilot.pause()
        after = _rows(panel).frame
        assert after is not None and after.left != before.left  # a new left border cell
        framed, textuals = _framed_and_textuals(panel)
        assert _cells(framed) == _cells(textuals)


async def test_a_line_shown_again_is_drawn_from_the_strip_kept() -> None:
    """'running 5' -> 'running 6' -> 'running 5': the third reading's row is the first one's
    strip (the same object, the same cells); a change of style draws it anew."""
    fleet = seven_gpu_fleet()
    app = make_app(fleet)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        panel = app.query_one("#gpu-1", GpuPanelView)
        server = fleet.panels[1].server
        assert server is not None

        def row(running: int) -> Strip:
            panel.show(replace(fleet.panels[1], server=replace(server, running=running)))
            y = next(i for i, c in enumerate(panel.lines()) if c.plain.startswith("running "))
            strip = panel.render_line(y)
            assert f"running {running}/" in strip.text
            return strip

        five = row(5)
        assert row(6) is not five
        assert row(5) is five
        app.main_screen.selected = 1  # another border: the panel's style changes
        await pilot.pause()
        await pilot.pause()
        again = row(5)
        assert again is not five
        assert _cells([again]) == _cells([five])  # the same text in the same colours
