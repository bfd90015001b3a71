"""SVG snapshots of every screen with fixed data, a fixed size, no blink, no animation."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input
from ui_helpers import (
    RETUNE_MARKS,
    make_app,
    pipeline_status,
    settle,
    show_chart,
)

from tui.ui.app import FleetApp
from tui.ui.detail.log_view import LogView


def still_app(**kwargs: Any) -> FleetApp:
    app = make_app(**kwargs)
    app.animation_level = "none"
    return app


async def ready(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, FleetApp)
    await settle(pilot, app)
    while app.main_screen.pipeline_status is None:
        await pilot.pause(0.01)
    for screen in app.screen_stack:
        for field in screen.query(Input):
            field.cursor_blink = False
    await pilot.pause()


def test_grid_80x24(snap_compare: Any) -> None:
    assert snap_compare(
        still_app(status=pipeline_status()), terminal_size=(80, 24), run_before=ready
    )


def test_grid_200x50(snap_compare: Any) -> None:
    assert snap_compare(
        still_app(status=pipeline_status()), terminal_size=(200, 50), run_before=ready
    )


def test_detail_screen(snap_compare: Any) -> None:
    async def open_detail(pilot: Pilot[None]) -> None:
        await ready(pilot)
        await pilot.press("0", "enter")
        app = pilot.app
        for _ in range(500):  # the log tail arrives from a thread worker
            if app.screen.query(LogView) and app.screen.query_one(LogView).buffer.lines:
                break
            await pilot.pause(0.01)
        await ready(pilot)

    assert snap_compare(
        still_app(status=pipeline_status()), terminal_size=(140, 40), run_before=open_detail
    )


def test_log_viewer_80x24_filtered_and_paused(snap_compare: Any) -> None:
    async def open_detail(pilot: Pilot[None]) -> None:
        await ready(pilot)
        await pilot.press("0", "enter")
        app = pilot.app
        for _ in range(500):  # the log arrives from a thread worker
            if app.screen.query(LogView) and app.screen.query_one(LogView).buffer.lines:
                break
            await pilot.pause(0.01)
        await pilot.press("slash", *"decode|ready", "escape", "space")
        await ready(pilot)

    assert snap_compare(
        still_app(status=pipeline_status()), terminal_size=(80, 24), run_before=open_detail
    )


def test_help_screen(snap_compare: Any) -> None:
    async def open_help(pilot: Pilot[None]) -> None:
        await ready(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(
        still_app(status=pipeline_status()), terminal_size=(100, 50), run_before=open_help
    )


async def show_generation(pilot: Pilot[None]) -> None:
    """The pane over an hour of history (two retunes), its chart read back from the file."""
    await ready(pilot)
    app = pilot.app
    assert isinstance(app, FleetApp)
    await show_chart(pilot, app)


def test_generation_pane(snap_compare: Any) -> None:
    assert snap_compare(
        still_app(status=pipeline_status(), marks=RETUNE_MARKS),
        terminal_size=(120, 45),
        run_before=show_generation,
    )


def test_generation_pane_80x24(snap_compare: Any) -> None:
    assert snap_compare(
        still_app(status=pipeline_status(), marks=RETUNE_MARKS),
        terminal_size=(80, 24),
        run_before=show_generation,
    )


def test_quit_screen(snap_compare: Any) -> None:
    async def ask_quit(pilot: Pilot[None]) -> None:
        await ready(pilot)
        await pilot.press("q")
        await pilot.pause()

    assert snap_compare(
        still_app(status=pipeline_status()), terminal_size=(80, 24), run_before=ask_quit
    )


def _focus_free(pilot: Pilot[None]) -> None:
    for screen in pilot.app.screen_stack:
        for field in screen.query(Input):
            field.cursor_blink = False


async def _open_form(pilot: Pilot[None], mamba: str | None = None) -> None:
    from ui_helpers import press_until, wait_for

    from tui.ui.tuning.form_screen import TuningFormScreen

    await ready(pilot)
    await press_until(pilot, ("T",), TuningFormScreen)
    form = pilot.app.screen
    assert isinstance(form, TuningFormScreen)
    form.debounce_s = 0.0
    if mamba is not None:
        form.query_one("#knob-max_mamba_cache_size", Input).value = mamba
        form.query_one("#knob-max_running_requests", Input).value = "64"
    await wait_for(pilot, lambda: form.preflight is not None, "the preflight")
    form.set_focus(None)
    _focus_free(pilot)
    await pilot.pause()


def test_tuning_form_with_preflight(snap_compare: Any) -> None:
    async def run(pilot: Pilot[None]) -> None:
        await _open_form(pilot, "200")

    assert snap_compare(
        still_app(status=pipeline_status()), terminal_size=(150, 45), run_before=run
    )


def test_tuning_form_does_not_fit(snap_compare: Any) -> None:
    async def run(pilot: Pilot[None]) -> None:
        await _open_form(pilot, "5000")

    assert snap_compare(
        still_app(status=pipeline_status()), terminal_size=(150, 45), run_before=run
    )


def test_tuning_form_errors_wrap_at_80x24(snap_compare: Any) -> None:
    async def run(pilot: Pilot[None]) -> None:
        from ui_helpers import press_until, wait_for

        from tui.ui.tuning.form_screen import TuningFormScreen

        await ready(pilot)
        await press_until(pilot, ("T",), TuningFormScreen)
        form = pilot.app.screen
        assert isinstance(form, TuningFormScreen)
        form.query_one("#knob-mem_fraction_static", Input).value = "1.5"
        await wait_for(pilot, lambda: "mem_fraction_static" in form.candidate.problems, "error")
        form.set_focus(None)
        _focus_free(pilot)
        await pilot.pause()

    assert snap_compare(still_app(status=pipeline_status()), terminal_size=(80, 24), run_before=run)


def test_apply_screen_with_verify_report_and_verdict(snap_compare: Any) -> None:
    from ui_helpers import RecordingFleet, scripted_apply, wait_for

    from tui.ops.commands import Apply
    from tui.ui.messages import OperationRequested
    from tui.ui.retune.apply_screen import ApplyScreen

    async def run(pilot: Pilot[None]) -> None:
        await ready(pilot)
        app = pilot.app
        assert isinstance(app, FleetApp)
        app.main_screen.post_message(OperationRequested(Apply("sim-aggressive", tuple(range(7)))))
        await wait_for(pilot, lambda: isinstance(app.screen, ApplyScreen), "the apply screen")
        screen = app.screen
        assert isinstance(screen, ApplyScreen)
        await wait_for(pilot, lambda: bool(screen.journal_note.startswith("NOT")), "the end")
        await pilot.pause()

    actions = RecordingFleet(apply_script=scripted_apply(failing=(5,)))
    app = still_app(actions=actions, status=pipeline_status())
    assert snap_compare(app, terminal_size=(150, 50), run_before=run)


def test_journal_screen(snap_compare: Any, monkeypatch: Any) -> None:
    import time

    from ui_helpers import press_until, wait_for

    from tui.ui.journal.journal_screen import JournalScreen

    from .test_ui_retune import journal_with_failed_apply

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()

    async def run(pilot: Pilot[None]) -> None:
        await ready(pilot)
        await press_until(pilot, ("j",), JournalScreen)
        screen = pilot.app.screen
        assert isinstance(screen, JournalScreen)
        await wait_for(pilot, lambda: len(screen.entries) == 2, "the entries")
        await pilot.pause()

    try:
        assert snap_compare(
            still_app(journal=journal_with_failed_apply(), status=pipeline_status()),
            terminal_size=(130, 30),
            run_before=run,
        )
    finally:
        monkeypatch.undo()
        time.tzset()
