"""The generation pane: its numbers, and the output-rate chart read back from the history
(ranges, retune markers, a scaled axis, visible at 80x24, the same after a re-attach)."""

from __future__ import annotations

import itertools
from dataclasses import replace

from textual.content import Content
from textual.pilot import Pilot
from textual.widgets import ProgressBar
from ui_helpers import (
    RETUNE_MARKS,
    T0,
    make_app,
    pipeline_history_statuses,
    pipeline_status,
    recorded_hour,
    settle,
    show_chart,
    wait_for,
)

from tui.agent.history import HistoryError
from tui.history import HistoryStore
from tui.history.samples import pipeline_samples
from tui.ops.marks import OperationMark
from tui.pipeline.status import PipelineStatus
from tui.ui.app import FleetApp
from tui.ui.history.blocks import block_rows
from tui.ui.history.chart import (
    JOB,
    RANGES,
    SHADE,
    ChartData,
    ChartRange,
    HistoryChart,
    chart_lines,
)
from tui.ui.history.plot import axis_for, columns
from tui.ui.history.ticks import TICK_ROOM, ago, place_labels, time_ticks, value_ticks
from tui.ui.pipeline.chart_read import chart_data
from tui.ui.pipeline.generation_pane import GenerationPane, PaneProgressBar


def test_a_percentage_axis_stops_at_its_ceiling() -> None:
    # (the panel graphs' axis) A GPU at 93-99% rounded up to a 50-step axis printed "max 150%".
    busy = axis_for([93.0, 99.0, 97.0], floor=10.0, ceiling=100.0)
    assert busy.high == 100.0 and busy.low < 93.0
    assert axis_for([93.0, 99.0, 97.0], floor=10.0).high > 100.0  # without one it rounds up
    flat = axis_for([100.0] * 5, floor=10.0, ceiling=100.0)
    assert flat.low < flat.high == 100.0  # a pegged GPU is still a line under the top
    assert axis_for([40.0, 60.0], floor=10.0, ceiling=100.0) == axis_for([40.0, 60.0], floor=10.0)
    faulty = axis_for([90.0, 104.0], floor=10.0, ceiling=100.0)
    assert faulty.high > 104.0  # a reading past the ceiling is drawn, not clipped away


def test_columns_average_carry_over_short_holes_and_leave_long_gaps() -> None:
    points = [(0.0, 10.0), (1.0, 20.0), (5.0, 30.0), (100.0, 40.0)]
    values = columns(points, 0.0, 120.0, 12, gap_s=30.0)
    assert values[0] == 20.0  # the mean of the three points in the first 10 s
    assert values[1] == 20.0 and values[3] == 20.0  # carried on for 30 s
    assert values[4] is None and values[9] is None  # 40 s without data: a gap
    assert values[10] == 40.0


def test_the_value_axis_is_round_from_zero_with_a_label_every_other_row_at_most() -> None:
    axis = value_ticks(3540.0, floor=50.0, rows=5)
    assert (axis.high, axis.ticks) == (4000.0, (0.0, 2000.0, 4000.0))  # 1-2-5 steps
    assert axis.labels(5) == {0: "4000", 2: "2000", 5: "0"}  # 0 on the axis line under the plot
    tall = value_ticks(3540.0, floor=50.0, rows=16)
    assert tall.ticks == (0.0, 500.0, 1000.0, 1500.0, 2000.0, 2500.0, 3000.0, 3500.0, 4000.0)
    assert len(tall.labels(16)) == 9  # more rows, finer ticks: one every other row
    assert value_ticks(0.0, floor=50.0, rows=5).high == 50.0  # idle: a scale, a line on 0
    assert value_ticks(12_345.0, floor=1.0, rows=12).ticks[-1] == 15_000.0


def test_time_ticks_are_round_steps_back_from_now_and_do_not_crowd() -> None:
    assert place_labels(time_ticks(T0 - 300, T0, 60), 60).split() == [
        "-5m", "-4m", "-3m", "-2m", "-1m", "now"
    ]  # fmt: skip
    hour = time_ticks(T0 - 3600, T0, 95)
    assert sorted(hour.values(), key=len)[0] == "now" and "-10m" in hour.values()
    spread = sorted(hour)
    assert min(b - a for a, b in itertools.pairwise(spread)) >= len("-10m") + TICK_ROOM - 1
    job = place_labels(time_ticks(T0 - 41 * 3600, T0, 180), 180).split()
    assert job[-1] == "now" and job[-2] == "-3h" and "-39h" in job  # a 41-hour job, in hours
    assert ago(90 * 60) == "-1h30" and ago(2 * 86400) == "-2d"


def test_blocks_fill_from_zero_and_a_recorded_zero_is_not_a_gap() -> None:
    rows = block_rows([4000.0, 2250.0, 1000.0, 0.0, None], high=4000.0, rows=2)
    assert rows == ["█▁   ", "██▄▁ "]  # 2250: a row and an eighth; 0: the floor; None: blank
    assert block_rows([4100.0], high=4000.0, rows=1) == ["█"]  # past the top: full, not wrapped


def test_the_chart_has_round_axes_named_markers_and_the_last_windows_shaded() -> None:
    points = tuple((T0 - 3600 + 60 * i, 3000.0 + 10 * i) for i in range(61))
    data = ChartData(points, T0 - 3600, T0, floor=50.0, marks=RETUNE_MARKS, gap_s=180.0)
    content = chart_lines(data, 100, 10)
    lines = [line.plain for line in content]
    assert len(lines) == 10 and all(len(line) == 100 for line in lines)
    assert lines[0].startswith("4000 ") and lines[7].startswith("   0 ")  # from 0, round
    assert lines[7].count("▲") == 2 and "┬" in lines[7]
    assert lines[8].split() == ["-1h", "-50m", "-40m", "-30m", "-20m", "-10m", "now"]
    assert "apply sim-aggressive GPUs 0-6" in lines[9]  # the newest is always named
    # the apply's before and after are shaded (its windows), nothing else is
    shaded = {x for line in content[:7] for x in shade_columns(line)}
    plot_x = lambda t: 5 + int((t - data.start) / 3600 * 95)  # noqa: E731
    assert shaded == set(range(plot_x(T0 - 1200), plot_x(T0 - 900) + 1)) | set(
        range(plot_x(T0 - 780), plot_x(T0 - 480) + 1)
    )
    assert "before" in lines[0]  # a window named over it, where the plot leaves room
    small = [line.plain for line in chart_lines(data, 60, 6)]  # little room: no names
    assert len(small) == 6 and "apply" not in "".join(small) and small[4].count("▲") == 2


def shade_columns(line: object) -> set[int]:
    """Cells of a chart line drawn over the shade."""
    assert isinstance(line, Content)
    return {
        x for span in line.spans if SHADE in str(span.style) for x in range(span.start, span.end)
    }


def test_chart_data_reads_the_range_and_keeps_the_marks_inside_it(tmp_path: object) -> None:
    store = HistoryStore(":memory:")
    for status in pipeline_history_statuses():
        store.write(pipeline_samples(status))
    old = OperationMark(T0 - 7200, "kill", "kill GPU 3", True)
    hour = chart_data(store, range_named("1h"), T0, (old, *RETUNE_MARKS))
    assert hour is not None and (hour.start, hour.end) == (T0 - 3600, T0)
    assert hour.marks == RETUNE_MARKS
    assert len([p for p in hour.points if p[0] >= hour.start]) == 61
    five = chart_data(store, range_named("5m"), T0, RETUNE_MARKS)
    assert five is not None and five.start == T0 - 300 and five.marks == ()
    whole = chart_data(store, JOB, T0, ())  # no status document: the whole history
    assert whole is not None and whole.start == T0 - 3600
    # the job's range is fitted to its age: a five-minute job fills the width
    young = chart_data(store, JOB, T0, RETUNE_MARKS, job_start=T0 - 300)
    assert young is not None and young.start == T0 - 300 and young.marks == ()
    infant = chart_data(store, JOB, T0, (), job_start=T0 - 5)
    assert infant is not None and infant.start == T0 - 60
    assert chart_data(store, range_named("1h"), T0 + 7200, ()) is None  # nothing in that hour


def range_named(label: str) -> ChartRange:
    return next(r for r in RANGES if r.label == label)


def hour_old_job() -> PipelineStatus:
    """The fixture's document, of a job started an hour ago (as old as the recorded history)."""
    return replace(pipeline_status(), started_at=T0 - 3600)


async def open_chart(pilot: Pilot[None], app: FleetApp) -> tuple[GenerationPane, HistoryChart]:
    """The recorded hour, the pane shown at ``T0``, its chart read."""
    await settle(pilot, app)
    return await show_chart(pilot, app)


async def test_pane_shows_rates_progress_servers_and_the_chart_with_markers() -> None:
    app = make_app(status=hour_old_job(), marks=RETUNE_MARKS)
    async with app.run_test(size=(120, 45)) as pilot:
        pane, chart = await open_chart(pilot, app)
        summary = str(pane.query_one("#pipeline-summary").render())
        assert "req/s 6.10 (1m) 5.90 (10m)" in summary
        assert "out tok/s 3,456 (1m) 3,300 (10m)" in summary
        assert "done 322,000 / 913,786" in summary and "ETA 1d 02h" in summary
        assert pane.query_one(ProgressBar).percentage == 322_000 / 913_786
        servers = str(pane.query_one("#pipeline-servers").render())
        assert "http://127.0.0.1:30002" in servers and "no work" in servers
        assert chart.data is not None and len(chart.data.points) == 61
        drawn = str(chart.render())
        assert drawn.count("▲") == 2 and "-1h" in drawn and "now" in drawn
        assert "apply sim-aggressive GPUs 0-6" in drawn
        assert "[b reverse] job [/" in str(pane.border_subtitle)  # the job's range at first


async def test_the_range_keys_step_through_the_ranges_by_length_the_jobs_among_them() -> None:
    app = make_app(status=pipeline_status(), marks=RETUNE_MARKS)  # a job three hours old
    async with app.run_test(size=(120, 45)) as pilot:
        pane, chart = await open_chart(pilot, app)
        assert pane.chart_range is JOB and chart.data is not None
        assert chart.data.start == T0 - 3 * 3600  # fitted to the job: since it started
        assert [r.label for r in pane.ordered_ranges()] == ["5m", "15m", "1h", "job", "6h", "2d"]
        steps = (
            ("left_square_bracket", "1h", T0 - 3600),
            ("left_square_bracket", "15m", T0 - 900),
            ("left_square_bracket", "5m", T0 - 300),
            ("left_square_bracket", "5m", T0 - 300),  # already the shortest
            ("right_square_bracket", "15m", T0 - 900),
            ("right_square_bracket", "1h", T0 - 3600),
            ("right_square_bracket", "job", T0 - 3 * 3600),
            ("right_square_bracket", "6h", T0 - 6 * 3600),
        )
        for key, label, start in steps:
            await pilot.press(key)

            def shown(start: float = start) -> bool:
                return chart.data is not None and chart.data.start == start

            await wait_for(pilot, shown, label)
            assert pane.chart_range.label == label
            assert f"[b reverse] {label} [/" in str(pane.border_subtitle)


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


async def test_at_80x24_the_chart_is_on_screen_with_room_for_its_axes() -> None:
    app = make_app(status=hour_old_job(), marks=RETUNE_MARKS)
    async with app.run_test(size=(80, 24)) as pilot:
        pane, chart = await open_chart(pilot, app)
        region = chart.region
        visible = pane.scrollable_content_region
        assert region.height == 8 and visible.contains_region(region), (region, visible)
        lines = str(chart.render()).splitlines()
        assert lines[0].startswith("4000 ") and "-1h" in lines[-2] and "now" in lines[-2]


async def test_at_200x50_the_chart_is_taller_and_the_servers_beside_it() -> None:
    app = make_app(status=hour_old_job(), marks=RETUNE_MARKS)
    async with app.run_test(size=(200, 50)) as pilot:
        pane, chart = await open_chart(pilot, app)
        servers = pane.query_one("#pipeline-servers")
        assert chart.region.height == 16 and pane.scrollable_content_region.contains_region(
            chart.region
        )
        assert servers.region.x > chart.region.right - 1 and servers.region.y == chart.region.y
        drawn = str(chart.render())
        assert "canary sim-aggressive GPU 2" in drawn and "apply sim-aggressive GPUs 0-6" in drawn


async def test_pane_without_a_status_document_or_history_says_so() -> None:
    app = make_app(status=None)
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
    no ETA timer ever runs. In a narrow pane (the done line says the share) it is not shown,
    and does not animate either."""
    app = make_app(status=None)
    async with app.run_test(size=(160, 40)) as pilot:  # wide: the pane shows its bar
        await settle(pilot, app)
        bar = app.screen.query_one("#pipeline-progress #bar")
        await wait_for(pilot, lambda: bar.auto_refresh is None, "no animation while hidden")
        await pilot.press("g")
        await wait_for(pilot, lambda: bar.auto_refresh is not None, "the animation when shown")
        await pilot.press("g")
        await wait_for(pilot, lambda: bar.auto_refresh is None, "no animation once hidden")
    app = make_app(status=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await pilot.press("g")
        progress = app.screen.query_one(GenerationPane).query_one(ProgressBar)
        await pilot.pause()
        assert not progress.display and progress.query_one("#bar").auto_refresh is None
    app = make_app(status=pipeline_status())
    async with app.run_test(size=(160, 40)) as pilot:
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
