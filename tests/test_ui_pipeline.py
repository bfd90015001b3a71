"""The generation pane: its numbers, and the output-rate chart read back from the history
(ranges, retune markers, a scaled axis, visible at 80x24, the same after a re-attach)."""

from __future__ import annotations

from textual.widgets import ProgressBar
from ui_helpers import (
    RETUNE_MARKS,
    T0,
    make_app,
    pipeline_history_statuses,
    pipeline_status,
    settle,
    wait_for,
)

from tui.agent.history import HistoryError
from tui.history import HistoryStore
from tui.history.samples import pipeline_samples
from tui.ui.app import FleetApp
from tui.ui.history.chart import RANGES, ChartData, HistoryChart, chart_lines
from tui.ui.history.plot import axis_for, braille_rows, columns, mark_columns, time_labels
from tui.ui.pipeline.generation_pane import GenerationPane, PaneProgressBar, chart_data


def recorded_hour(app: FleetApp) -> None:
    """An hour of status documents a minute apart (two retune dips), written to the history
    (as an earlier console did: older than the document the app has just read)."""
    for status in pipeline_history_statuses():
        app.history.add(pipeline_samples(status))
    app.history.flush()


def test_a_constant_rate_is_a_flat_line_not_a_solid_block() -> None:
    axis = axis_for([6000.0] * 50, floor=50.0)
    assert axis.low < 6000.0 < axis.high  # scaled to the data, the line in the middle
    rows = braille_rows([6000.0] * 40, axis, 4)
    drawn = [r for r in rows if r.strip()]
    assert len(drawn) == 1 and set(drawn[0]) == {"⣀"}  # one row of dots, nothing filled below
    idle = axis_for([0.0] * 10, floor=50.0)
    assert (idle.low, idle.high) == (0.0, 50.0)  # the floor: an idle series lies on the bottom
    assert braille_rows([0.0] * 4, idle, 2) == ["  ", "⣀⣀"]
    wide = axis_for([100.0, 4000.0], floor=50.0)
    assert wide.low == 0.0 and 4000.0 < wide.high <= 4500.0


def test_a_percentage_axis_stops_at_its_ceiling() -> None:
    # A GPU at 93-99% rounded up to a 50-step axis printed "max 150%".
    busy = axis_for([93.0, 99.0, 97.0], floor=10.0, ceiling=100.0)
    assert busy.high == 100.0 and busy.low < 93.0
    assert axis_for([93.0, 99.0, 97.0], floor=10.0).high > 100.0  # without one it rounds up
    flat = axis_for([100.0] * 5, floor=10.0, ceiling=100.0)
    assert flat.low < flat.high == 100.0  # a pegged GPU is still a line under the top
    assert axis_for([40.0, 60.0], floor=10.0, ceiling=100.0) == axis_for([40.0, 60.0], floor=10.0)
    assert braille_rows([99.0] * 8, busy, 4)[0].strip()  # 99% lands on the top row
    faulty = axis_for([90.0, 104.0], floor=10.0, ceiling=100.0)
    assert faulty.high > 104.0  # a reading past the ceiling is drawn, not clipped away


def test_columns_average_carry_over_short_holes_and_leave_long_gaps() -> None:
    points = [(0.0, 10.0), (1.0, 20.0), (5.0, 30.0), (100.0, 40.0)]
    values = columns(points, 0.0, 120.0, 12, gap_s=30.0)
    assert values[0] == 20.0  # the mean of the three points in the first 10 s
    assert values[1] == 20.0 and values[3] == 20.0  # carried on for 30 s
    assert values[4] is None and values[9] is None  # 40 s without data: a gap
    assert values[10] == 40.0


def test_time_labels_and_marks_fall_on_their_columns() -> None:
    assert time_labels(0.0, 3600.0, 40, "now") == "-60m" + " " * 14 + "-30m" + " " * 15 + "now"
    assert mark_columns((0.0, 1800.0, 3600.0, 4000.0), 0.0, 3600.0, 40) == {0, 20, 39}


def test_the_chart_has_axes_markers_and_fits_a_panel() -> None:
    points = tuple((T0 - 3600 + 60 * i, 3000.0 + 10 * i) for i in range(61))
    data = ChartData(points, T0 - 3600, T0, floor=50.0, marks=RETUNE_MARKS)
    lines = [line.plain for line in chart_lines(data, 60, 6)]
    assert len(lines) == 6 and all(len(line) == 60 for line in lines)
    # 3000 -> 3600: the axis is scaled to the data (not from 0), with room above and below
    assert lines[0].startswith("3800 ") and lines[3].startswith("2800 ")
    assert lines[4].count("▲") == 2 and set(lines[4].strip()) == {"─", "▲"}
    assert lines[5].split() == ["-60m", "-30m", "now"]
    compact = [line.plain for line in chart_lines(data, 30, 2)]  # a panel's graph
    assert len(compact) == 2 and compact[0].startswith("3800") and compact[1].startswith("2800")


def test_chart_data_reads_the_range_and_keeps_the_marks_inside_it(tmp_path: object) -> None:
    store = HistoryStore(":memory:")
    for status in pipeline_history_statuses():
        store.write(pipeline_samples(status))
    hour = chart_data(store, RANGES[1], T0, (*RETUNE_MARKS, T0 - 7200))
    assert hour is not None and (hour.start, hour.end) == (T0 - 3600, T0)
    assert hour.marks == RETUNE_MARKS
    assert len([p for p in hour.points if p[0] >= hour.start]) == 61
    ten = chart_data(store, RANGES[0], T0, RETUNE_MARKS)
    assert ten is not None and ten.start == T0 - 600 and ten.marks == ()
    job = chart_data(store, RANGES[3], T0, ())
    assert job is not None and job.start == T0 - 3600
    assert chart_data(store, RANGES[1], T0 + 7200, ()) is None  # nothing in that hour


async def test_pane_shows_rates_progress_servers_and_the_chart_with_markers() -> None:
    app = make_app(status=pipeline_status(), marks=RETUNE_MARKS)
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(120, 45)) as pilot:
        await settle(pilot, app)
        recorded_hour(app)
        pane = app.screen.query_one(GenerationPane)
        pane.clock = lambda: T0
        await pilot.press("g")
        chart = pane.query_one(HistoryChart)
        await wait_for(pilot, lambda: chart.data is not None, "the chart")
        summary = str(pane.query_one("#pipeline-summary").render())
        assert "req/s 6.10 (1m) 5.90 (10m)" in summary
        assert "out tok/s 3,456 (1m) 3,300 (10m)" in summary
        assert "done 322,000 / 913,786" in summary and "ETA 1d 02h" in summary
        assert pane.query_one(ProgressBar).percentage == 322_000 / 913_786
        servers = str(pane.query_one("#pipeline-servers").render())
        assert "http://127.0.0.1:30002" in servers and "no work" in servers
        assert chart.data is not None and len(chart.data.points) == 61
        drawn = str(chart.render())
        assert drawn.count("▲") == 2 and "-60m" in drawn and "now" in drawn
        assert "1h" in str(pane.border_subtitle)


async def test_the_range_keys_change_what_the_chart_reads() -> None:
    app = make_app(status=pipeline_status(), marks=RETUNE_MARKS)
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(120, 45)) as pilot:
        await settle(pilot, app)
        recorded_hour(app)
        pane = app.screen.query_one(GenerationPane)
        pane.clock = lambda: T0
        await pilot.press("g")
        chart = pane.query_one(HistoryChart)
        await wait_for(pilot, lambda: chart.data is not None, "the chart")
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: chart.data is not None and chart.data.start == T0 - 600)
        assert pane.chart_range.label == "10m" and "-10m" in str(chart.render())
        await pilot.press("left_square_bracket")  # already the shortest
        assert pane.chart_range.label == "10m"
        for label, start in (("1h", T0 - 3600), ("6h", T0 - 6 * 3600), ("job", T0 - 3600)):
            await pilot.press("right_square_bracket")
            await wait_for(
                pilot, lambda s=start: chart.data is not None and chart.data.start == s, label
            )
            assert pane.chart_range.label == label
            assert f" {label} " in str(pane.border_subtitle)


async def test_the_history_survives_a_new_console() -> None:
    first = make_app(status=pipeline_status())
    assert isinstance(first, FleetApp)
    async with first.run_test(size=(100, 30)) as pilot:
        await settle(pilot, first)
        recorded_hour(first)
    again = make_app(status=pipeline_status())  # a re-attach: same state directory
    assert isinstance(again, FleetApp)
    async with again.run_test(size=(100, 30)) as pilot:
        await settle(pilot, again)
        pane = again.screen.query_one(GenerationPane)
        pane.clock = lambda: T0
        await pilot.press("g")
        chart = pane.query_one(HistoryChart)
        await wait_for(pilot, lambda: chart.data is not None, "the chart from the file")
        assert chart.data is not None and len(chart.data.points) >= 61


async def test_at_80x24_the_chart_is_on_screen() -> None:
    app = make_app(status=pipeline_status(), marks=RETUNE_MARKS)
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        recorded_hour(app)
        pane = app.screen.query_one(GenerationPane)
        pane.clock = lambda: T0
        await pilot.press("g")
        chart = pane.query_one(HistoryChart)
        await wait_for(pilot, lambda: chart.data is not None, "the chart")
        await pilot.pause()
        region = chart.region
        visible = pane.scrollable_content_region
        assert region.height == 6 and visible.contains_region(region), (region, visible)


async def test_pane_without_a_status_document_or_history_says_so() -> None:
    app = make_app(status=None)
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await pilot.press("g")
        summary = str(app.screen.query_one("#pipeline-summary").render())
        assert "no pipeline status document" in summary
        chart = app.screen.query_one(HistoryChart)
        await pilot.pause(0.1)
        assert "no history yet" in str(chart.render())


class FixedSource:
    """A chart source standing in for Prometheus (``--prometheus``): an hour at a fixed rate, or
    an error."""

    def __init__(self, error: str = "") -> None:
        self.error = error
        self.asked: list[float] = []

    def first_time(self, gpu: int | None, metric: str) -> float | None:
        return T0 - 3600

    def series(
        self, gpu: int | None, metric: str, since: float, until: float | None = None
    ) -> list[tuple[float, float]]:
        if self.error:
            raise HistoryError(self.error)
        self.asked.append(since)
        return [(t, 2000.0) for t in range(int(T0) - 3600, int(T0) + 1, 60)]


async def test_the_chart_reads_prometheus_when_given_and_says_why_it_cannot() -> None:
    app = make_app(status=pipeline_status())
    assert isinstance(app, FleetApp)
    source = FixedSource()
    app.chart_source = source
    async with app.run_test(size=(120, 45)) as pilot:
        await settle(pilot, app)
        recorded_hour(app)  # the console's own history holds other values: not read
        pane = app.screen.query_one(GenerationPane)
        pane.clock = lambda: T0
        await pilot.press("g")
        chart = pane.query_one(HistoryChart)
        await wait_for(pilot, lambda: chart.data is not None, "the chart from the source")
        assert chart.data is not None and {v for _, v in chart.data.points} == {2000.0}
        assert source.asked and source.asked[-1] < T0 - 3600  # the hour, and a bucket before
        source.error = "prometheus http://prom:9090: ConnectError: refused"
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: chart.data is None, "the error")
        assert "ConnectError" in str(chart.render())


async def test_the_panes_progress_bar_runs_no_timer_it_does_not_need() -> None:
    """Hidden (the default), the indeterminate bar must not refresh 15 times a second; shown
    without a document it animates; hidden again it stops; a known total never animates, and
    no ETA timer ever runs."""
    app = make_app(status=None)
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        bar = app.screen.query_one("#pipeline-progress #bar")
        await wait_for(pilot, lambda: bar.auto_refresh is None, "no animation while hidden")
        await pilot.press("g")
        await wait_for(pilot, lambda: bar.auto_refresh is not None, "the animation when shown")
        await pilot.press("g")
        await wait_for(pilot, lambda: bar.auto_refresh is None, "no animation once hidden")
    app = make_app(status=pipeline_status())
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await pilot.press("g")
        pane = app.screen.query_one(GenerationPane)
        progress = pane.query_one(ProgressBar)
        await wait_for(pilot, lambda: progress.percentage is not None, "the document's progress")
        assert pane.query_one("#pipeline-progress #bar").auto_refresh is None
        # Nor Textual's once-a-second ETA timer: the pane prints its own ETA (PaneProgressBar;
        # Textual's own bar has one); the bar still moves with each document.
        assert isinstance(progress, PaneProgressBar)
        assert list(progress._timers) == []
        textual_bar = ProgressBar(total=10)
        await app.screen.mount(textual_bar)
        await pilot.pause()
        assert len(list(textual_bar._timers)) == 1
        progress.update(total=200, progress=50)
        await wait_for(pilot, lambda: progress.percentage == 0.25, "a quarter done")
