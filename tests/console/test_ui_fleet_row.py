"""The fleet's totals under the grid: what the panels add up to and where the job stands, in the
long form at 200x50 and the short one at 80x24; a reading that changes nothing repaints nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual.geometry import Region
from ui_helpers import make_app, pipeline_status, settle, settled_app, seven_gpu_fleet, wait_for

from tui.fleet.snapshot import FleetSnapshot
from tui.ui.grid.fleet_row import FleetField, FleetRow, fleet_line, fleet_totals


def test_the_totals_count_what_the_panels_show() -> None:
    totals = fleet_totals(seven_gpu_fleet())
    # ready: 0, 1, 5, 6; failed: 2; starting: 3; stale: 4 (its load still shown)
    assert (totals.servers, totals.ready, totals.failed) == (7, 4, 1)
    assert totals.running == 5 * 40 and totals.queued == 12 + 11 + 8 + 7 + 6
    assert totals.gen_tok_s == 7000.0  # 5 x ~1400, to three digits


def test_the_line_is_long_where_it_fits_and_short_where_it_does_not() -> None:
    totals = fleet_totals(seven_gpu_fleet())
    long = fleet_line(totals, pipeline_status(), 200).plain
    assert long == (
        "fleet 4/7 ready 1 failed · gen 7,000 tok/s · running 200  queued 44 · "
        "job 6.10 req/s 3,460 out tok/s · done 35% · ETA 1d 02h"
    )
    short = fleet_line(totals, pipeline_status(), 78).plain
    assert short == "4/7 ready 1 failed · 7000 tok/s · run 200 q44 · 6.10 req/s · ETA 1d 02h"
    stopped = fleet_line(totals, replace(pipeline_status(), state="stopped"), 200).plain
    assert stopped.endswith("job pipeline stopped · done 35%")  # no rate, no ETA: why
    assert fleet_line(totals, None, 200).plain.endswith("· no job")


@pytest.mark.parametrize(("size", "expected"), [((80, 24), "run 200 q44"), ((200, 50), "gen 7")])
async def test_the_row_is_on_screen_under_the_grid(size: tuple[int, int], expected: str) -> None:
    app = make_app(status=pipeline_status())
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        row = app.screen.query_one(FleetRow)
        await wait_for(pilot, lambda: "ETA 1d 02h" in row.line.plain, "the job's ETA")
        grid = app.screen.query_one("#grid").region
        assert row.region.y == grid.bottom and row.region.height == 1
        assert expected in row.line.plain and row.region.width == size[0]


async def test_a_reading_repaints_only_the_field_that_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same totals repaint nothing; another queue length repaints its field alone (a line
    is sent from its widget's left edge: one widget for the row resent most of it each time)."""
    calls: list[tuple[str, tuple[Region, ...]]] = []
    original = FleetField.refresh

    def refresh(self: FleetField, *regions: Region, **kwargs: Any) -> Any:
        calls.append((self.text.plain, regions))
        return original(self, *regions, **kwargs)

    async with settled_app(status=pipeline_status(), size=(200, 40)) as (app, pilot):
        row = app.screen.query_one(FleetRow)
        await wait_for(pilot, lambda: "ETA" in row.line.plain, "the row")
        monkeypatch.setattr(FleetField, "refresh", refresh)
        fleet = seven_gpu_fleet()
        app.main_screen.fleet = FleetSnapshot(fleet.panels, fleet.gpu_source, fleet.taken_at + 1)
        await pilot.pause()
        assert calls == []
        one = fleet.panels[1]
        assert one.server is not None
        busier = replace(one, server=replace(one.server, queued=30))  # 44 -> 63 in all
        panels = (*fleet.panels[:1], busier, *fleet.panels[2:])
        app.main_screen.fleet = FleetSnapshot(panels, fleet.gpu_source, fleet.taken_at + 2)
        await pilot.pause()
        assert [text for text, _ in calls] == ["· running 200  queued 63"]
        assert "queued 63" in row.line.plain
        # fewer digits: the field keeps its width (a new width would lay the screen out again)
        calls.clear()
        quiet = tuple(
            p if p.server is None else replace(p, server=replace(p.server, queued=1))
            for p in fleet.panels
        )
        app.main_screen.fleet = FleetSnapshot(quiet, fleet.gpu_source, fleet.taken_at + 3)
        await pilot.pause()
        ((text, regions),) = calls
        assert text == "· running 200  queued 6 " and regions  # padded, repainted in place


async def test_a_new_document_is_shown_with_the_next_reading_not_on_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One screen update a second, not two: the job's fields wait for the monitor's next
    reading; with readings stopped (``STATUS_WAIT_S`` passed) a document shows at once."""
    # Readings count as flowing however long the loaded machine takes between two steps (with
    # the real 2 s, a step slower than that showed the document at once: seen under load).
    monkeypatch.setattr(FleetRow, "STATUS_WAIT_S", 1e9)
    async with settled_app(status=pipeline_status(), size=(200, 40)) as (app, pilot):
        row = app.screen.query_one(FleetRow)
        await wait_for(pilot, lambda: "3,460 out tok/s" in row.line.plain, "the row")
        app.main_screen.pipeline_status = pipeline_status(tok_s=5000.0)
        await pilot.pause()
        assert "3,460 out tok/s" in row.line.plain  # waits for the reading
        fleet = seven_gpu_fleet()
        app.main_screen.fleet = FleetSnapshot(fleet.panels, fleet.gpu_source, fleet.taken_at + 1)
        await pilot.pause()
        assert "5,000 out tok/s" in row.line.plain
        monkeypatch.setattr(FleetRow, "STATUS_WAIT_S", -1.0)  # as if readings had stopped
        app.main_screen.pipeline_status = pipeline_status(tok_s=6000.0)
        await pilot.pause()
        assert "6,000 out tok/s" in row.line.plain


def test_a_finished_job_is_not_named_twice() -> None:
    # Seen in the walk: 'job job finished' (the halted reason already says 'job').
    totals = fleet_totals(seven_gpu_fleet())
    done = replace(pipeline_status(), state="finished", done=913_786)
    assert fleet_line(totals, done, 200).plain.endswith("· job finished · done 100%")
    assert "job job" not in fleet_line(totals, done, 200).plain


async def test_at_80_columns_the_eta_stays_on_screen_once_the_job_appears() -> None:
    """Seen in the walk at 80x24: the row opened in the long form (no job yet: it fitted), its
    fields kept those widths when the job's document made it switch to the short form, and the
    ETA was pushed past the 80th column for the console's life."""
    async with settled_app(status=None, size=(80, 24)) as (app, pilot):
        row = app.screen.query_one(FleetRow)
        await wait_for(pilot, lambda: row.line.plain.startswith("fleet "), "the long form")
        app.main_screen.pipeline_status = pipeline_status()
        fleet = seven_gpu_fleet()
        app.main_screen.fleet = FleetSnapshot(fleet.panels, fleet.gpu_source, fleet.taken_at + 1)
        await wait_for(pilot, lambda: "ETA 1d 02h" in row.line.plain, "the job's ETA")
        await pilot.pause()
        last = [f for f in row.query_children(FleetField) if "ETA" in f.text.plain]
        assert last and last[0].region.right <= 80, [f.region for f in last]
        assert row.line.cell_length <= 80, row.line.plain


def _slowed(fleet: FleetSnapshot) -> FleetSnapshot:
    """GPU 3 at 290 tok/s while the six others make 1,160 (the monitor's imbalance check run
    on those rates, as it runs on every reading)."""
    from tui.fleet.imbalance import READINGS, outliers

    rates = {i: 1160.0 for i in range(7)} | {3: 290.0}
    found = outliers(rates, next(r for r in READINGS if r.name == "tok_s"))
    return replace(fleet, imbalance=found)


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ((200, 50), "· GPU 3 tok/s 290: 0.25x the fleet median 1,160"),
        # no room for its ratio: the job's rate gives its place (the pane has it), the ETA stays
        ((80, 24), "· GPU 3 tok/s"),
    ],
)
async def test_the_row_names_the_gpu_that_stands_out(size: tuple[int, int], expected: str) -> None:
    status = pipeline_status()
    async with settled_app(_slowed(seven_gpu_fleet()), size=size, status=status) as (app, pilot):
        row = app.screen.query_one(FleetRow)
        await wait_for(pilot, lambda: "GPU 3" in row.line.plain, "the outlier's words")
        assert expected in row.line.plain and "ETA 1d 02h" in row.line.plain
        field = list(row.query_children(FleetField))[-1]
        assert field.region.right <= size[0]  # on screen, not past the edge
    async with settled_app(seven_gpu_fleet(), size=size) as (app, pilot):
        assert "GPU" not in app.screen.query_one(FleetRow).line.plain  # none stands out
