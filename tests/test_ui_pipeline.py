"""The generation pane: history kept across status documents, retune markers, the numbers."""

from __future__ import annotations

from textual.widgets import ProgressBar, Sparkline
from ui_helpers import (
    RETUNE_MARKS,
    T0,
    make_app,
    pipeline_history_statuses,
    pipeline_status,
    settle,
)

from tui.ui.app import FleetApp
from tui.ui.pipeline.generation_pane import GenerationPane, RetuneMarkers
from tui.ui.pipeline.throughput_history import (
    HISTORY_WINDOW_S,
    append_sample,
    marker_columns,
    resample,
    window,
)


def test_history_keeps_one_hour_and_ignores_repeated_documents() -> None:
    history: tuple[tuple[float, float], ...] = ()
    for minute in range(90):
        history = append_sample(history, pipeline_status(updated_at=T0 + 60 * minute))
    again = append_sample(history, pipeline_status(updated_at=T0 + 60 * 89))
    assert again is history
    assert history[-1][0] - history[0][0] <= HISTORY_WINDOW_S
    assert len(history) == 61


def test_resample_gives_one_value_per_column_and_markers_land_on_their_time() -> None:
    history: tuple[tuple[float, float], ...] = ()
    for status in pipeline_history_statuses():
        history = append_sample(history, status)
    values = resample(history, 61)
    assert len(values) == 61
    start, end = window(history)
    assert (start, end) == (T0 - 3600, T0)
    columns = marker_columns(RETUNE_MARKS, history, 61)
    assert columns == {20, 45}
    assert values[20] < values[19] and values[45] < values[44]  # the dips sit under the markers
    assert marker_columns((T0 - 7200,), history, 61) == set()  # older than the chart


async def test_pane_shows_rates_progress_servers_and_markers() -> None:
    app = make_app(status=pipeline_status(updated_at=T0 - 3660), marks=RETUNE_MARKS)
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(120, 45)) as pilot:
        await settle(pilot, app)
        await pilot.press("g")
        while app.main_screen.pipeline_status is None:
            await pilot.pause(0.01)
        statuses = pipeline_history_statuses()
        for status in statuses:
            app.main_screen.record_pipeline(status, RETUNE_MARKS)
        await pilot.pause()
        newest = statuses[-1].rate_1m.output_tokens_per_s
        pane = app.screen.query_one(GenerationPane)
        summary = str(pane.query_one("#pipeline-summary").render())
        assert "req/s 6.10 (1m) 5.90 (10m)" in summary
        assert f"out tok/s {newest:,.0f} (1m) 3,300 (10m)" in summary
        assert "done 322,000 / 913,786" in summary and "ETA 1d 02h" in summary
        assert pane.query_one(ProgressBar).percentage == 322_000 / 913_786
        servers = str(pane.query_one("#pipeline-servers").render())
        assert "http://127.0.0.1:30002" in servers and "no work" in servers
        sparkline = pane.query_one(Sparkline)
        assert len(list(sparkline.data or [])) == pane.content_size.width
        markers = pane.query_one(RetuneMarkers)
        assert str(markers.render()).count("▲") == 2
        assert len(app.main_screen.pipeline_history) == 61


async def test_pane_without_a_status_document_says_so() -> None:
    app = make_app(status=None)
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await pilot.press("g")
        summary = str(app.screen.query_one("#pipeline-summary").render())
        assert "no pipeline status document" in summary
