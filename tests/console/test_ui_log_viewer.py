"""The detail screen's log viewer through Pilot, on a real log file: follow and pause, the
scrollback, regex and exclude filters, wrap and sideways scroll, jumps, the search of every
rotation, the pager, and Escape closing the viewer's modes before the screen."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Input, Label
from ui_helpers import make_app, settle, seven_gpu_fleet, wait_for

from tui.fleet.snapshot import FleetSnapshot
from tui.logs.long_lines import tail_lines as tail_file
from tui.ui.app import FleetApp
from tui.ui.detail.detail_screen import DetailScreen
from tui.ui.detail.log_panel import LogPanel
from tui.ui.detail.log_view import LogView

from .test_log_viewer_core import DECODE, KV, OOM, write_rotated


def fleet_logging_to(path: Path) -> FleetSnapshot:
    """The fixed fleet, GPU 0's server writing ``path``."""
    fleet = seven_gpu_fleet()
    first = fleet.panels[0]
    assert first.server is not None
    panels = (replace(first, server=replace(first.server, log_path=str(path))),)
    return replace(fleet, panels=panels + fleet.panels[1:])


def numbered(count: int, start: int = 0) -> str:
    return "".join(f"{DECODE} n={i}\n" for i in range(start, start + count))


def viewer_app(log: Path) -> FleetApp:
    app = make_app(fleet=fleet_logging_to(log), log_tail=tail_file)
    return app


async def open_viewer(pilot: Pilot[None], app: FleetApp, lines: int) -> LogPanel:
    from textual.pilot import Pilot

    assert isinstance(pilot, Pilot)
    await settle(pilot, app)
    await pilot.press("0", "enter")
    await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), "the detail screen")
    screen = app.screen
    assert isinstance(screen, DetailScreen)
    panel = screen.log_panel
    panel.refresh_s = 0.05
    await wait_for(pilot, lambda: len(panel.live.buffer.lines) == lines, f"{lines} lines")
    await pilot.pause()
    return panel


def append(log: Path, text: str) -> None:
    with log.open("a") as handle:
        handle.write(text)


async def test_new_lines_are_appended_and_followed_and_a_pause_holds_the_view(
    tmp_path: Path,
) -> None:
    log = tmp_path / "sglang_gpu0.log"
    log.write_text(numbered(200))
    app = viewer_app(log)
    async with app.run_test(size=(140, 40)) as pilot:
        panel = await open_viewer(pilot, app, 200)
        view = panel.live
        assert view.following and view.scroll_y == view.max_scroll_y > 0
        append(log, numbered(30, 200))
        await wait_for(pilot, lambda: len(view.buffer.lines) == 230, "the new lines")
        await pilot.pause()
        assert view.scroll_y == view.max_scroll_y  # followed
        assert view.buffer.lines[0].endswith("n=0")  # appended, not rewritten
        await pilot.press("space")  # pause where it is
        assert not view.following
        at = view.scroll_y
        append(log, numbered(40, 230))
        await wait_for(pilot, lambda: len(view.buffer.lines) == 270, "lines while paused")
        await pilot.pause()
        assert view.scroll_y == at < view.max_scroll_y
        assert "PAUSED, 40 new below" in str(view.border_subtitle)
        await pilot.press("home")
        assert view.scroll_y == 0 and not view.following
        await pilot.press("space")  # follow again: to the end
        assert view.following and view.scroll_y == view.max_scroll_y
        await pilot.press("up")  # scrolling up pauses by itself
        assert not view.following
        await pilot.press("end")
        assert view.following


class OneLog(App[None]):
    """A LogView alone, with a small scrollback."""

    def compose(self) -> ComposeResult:
        yield LogView(max_lines=100, id="log")


async def test_the_scrollback_drops_old_lines_and_a_paused_view_stays_on_its_lines() -> None:
    app = OneLog()
    async with app.run_test(size=(80, 12)) as pilot:
        view = app.query_one(LogView)
        view.wrap = False
        view.append_lines([f"line {i}" for i in range(100)])
        await pilot.pause()
        view.following = False
        view.scroll_to(y=50, animate=False, immediate=True)
        top = view.buffer.line(view.buffer.shown[round(view.scroll_y)])
        assert top == "line 50"
        view.append_lines([f"line {i}" for i in range(100, 130)])  # the oldest 30 go
        await pilot.pause()
        assert view.buffer.first == 30
        assert view.buffer.line(view.buffer.shown[round(view.scroll_y)]) == "line 50"


async def test_regex_and_exclude_filters_and_a_bad_regex_is_a_line_not_a_crash(
    tmp_path: Path,
) -> None:
    log = tmp_path / "sglang_gpu0.log"
    log.write_text(numbered(20) + KV + "\n" + OOM + "\nPrefill batch, #new-seq: 2\n")
    app = viewer_app(log)
    async with app.run_test(size=(140, 40)) as pilot:
        panel = await open_viewer(pilot, app, 23)
        view = panel.live
        await pilot.press("slash", *"alloc|memory")
        assert view.shown_lines == [KV, OOM]
        assert "2 of 23 lines" in str(view.border_subtitle)
        await pilot.press("escape", "x", *"out of")  # exclude
        assert view.shown_lines == [KV]
        field = panel.query_one("#log-exclude", Input)
        field.value = "out of ("  # a bad pattern: said in one line, the last good filter stays
        await pilot.pause()
        error = panel.query_one("#log-error", Label)
        assert error.display and str(error.render()) == (
            "exclude /out of (/: missing ), unterminated subpattern at position 7"
        )
        assert field.has_class("-invalid") and view.shown_lines == [KV]
        field.value = ""
        await pilot.pause()
        assert not error.display and view.shown_lines == [KV, OOM]


async def test_wrap_shows_a_decode_line_whole_at_200_columns_and_w_scrolls_instead(
    tmp_path: Path,
) -> None:
    log = tmp_path / "sglang_gpu0.log"
    log.write_text(f"{DECODE}\n")
    assert len(DECODE) > 200
    app = viewer_app(log)
    async with app.run_test(size=(200, 50)) as pilot:
        panel = await open_viewer(pilot, app, 1)
        view = panel.live
        rows = [view.render_line(y).text.rstrip() for y in range(3)]
        assert rows[0].startswith("[2026-05-09") and rows[2] == ""  # two rows, whole words
        assert "gen throughput (token/s): 1402.31, #queue-req: 12" in " ".join(rows)
        assert view.scrollable_content_region.width == 200 - 4  # borders, scrollbar gutter
        assert all(len(r) <= 196 for r in rows)
        await pilot.press("w")
        assert not view.wrap
        row = view.render_line(0).text
        assert "gen throughput" not in row and row.startswith("[2026-05-09")
        for _ in range(len(DECODE) - 196 + 5):  # past the end: it stops at the last character
            await pilot.press("right")
        assert view.scroll_x == view.max_scroll_x > 0
        assert "1402.31, #queue-req: 12" in view.render_line(0).text
        await pilot.press("w")
        assert view.wrap and view.scroll_x == 0


async def test_jumps_mark_the_next_and_previous_error_and_allocation_lines(
    tmp_path: Path,
) -> None:
    log = tmp_path / "sglang_gpu0.log"
    log.write_text(numbered(50) + KV + "\n" + numbered(50, 50) + OOM + "\n" + numbered(50, 100))
    app = viewer_app(log)
    async with app.run_test(size=(140, 40)) as pilot:
        panel = await open_viewer(pilot, app, 152)
        view = panel.live
        await pilot.press("home", "e")
        assert view.marked is not None and view.buffer.line(view.marked) == OOM
        assert not view.following
        assert view.render_line(0).text.startswith(OOM[:40])  # brought to the top
        await pilot.press("a")  # no allocation line below the error
        assert view.buffer.line(view.marked) == OOM
        await pilot.press("A")
        assert view.buffer.line(view.marked) == KV
        await pilot.press("E")  # none above
        assert view.buffer.line(view.marked) == KV


async def test_s_searches_every_rotation_and_escape_closes_the_results(tmp_path: Path) -> None:
    log = tmp_path / "sglang_gpu0.log"
    write_rotated(log, [[OOM, DECODE], [DECODE] * 3, [DECODE, OOM]])
    app = viewer_app(log)
    async with app.run_test(size=(140, 40)) as pilot:
        panel = await open_viewer(pilot, app, 2)
        await pilot.press("s", *"CUDA out of", "enter")
        results = panel.query_one("#search-results", LogView)
        await wait_for(pilot, lambda: panel.results is not None, "the search")
        await pilot.pause()
        assert results.display and not panel.live.display
        assert results.shown_lines == [
            f"sglang_gpu0.log.2:1: {OOM}",
            f"sglang_gpu0.log:2: {OOM}",
        ]
        assert "2 hits in 3 files" in str(results.border_title)
        assert panel.pager_target() == (log.with_name("sglang_gpu0.log.2"), 1)
        await pilot.press("escape")
        assert not results.display and panel.live.display
        assert isinstance(app.screen, DetailScreen)
        await pilot.press("s", *"(", "enter")
        error = panel.query_one("#log-error", Label)
        assert "search /(/: missing ), unterminated subpattern" in str(error.render())


async def test_escape_closes_a_field_then_the_filter_then_the_screen(tmp_path: Path) -> None:
    log = tmp_path / "sglang_gpu0.log"
    log.write_text(numbered(5) + OOM + "\n")
    app = viewer_app(log)
    async with app.run_test(size=(140, 40)) as pilot:
        panel = await open_viewer(pilot, app, 6)
        await pilot.press("slash", *"memory")
        assert isinstance(app.focused, Input)
        await pilot.press("escape")  # leaves the field, keeps the filter
        assert app.focused is panel.live and panel.live.shown_lines == [OOM]
        await pilot.press("escape")  # clears the filter
        assert len(panel.live.shown_lines) == 6
        assert isinstance(app.screen, DetailScreen)
        await pilot.press("escape")  # and only now leaves the screen
        assert not isinstance(app.screen, DetailScreen)


@contextmanager
def no_suspend(app: FleetApp) -> Iterator[None]:
    """Run what the pager runs, without a terminal to hand over (headless Pilot)."""
    from contextlib import nullcontext

    original = app.suspend
    # a stand-in for the app's own method, for the test's length
    app.suspend = lambda: nullcontext()  # type: ignore[method-assign,assignment,return-value]
    try:
        yield
    finally:
        app.suspend = original  # type: ignore[method-assign]  # the app's own, back


async def test_p_opens_the_log_in_pager_with_an_argv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "sglang_gpu0.log"
    log.write_text(numbered(3))
    record = tmp_path / "pager-argv.txt"
    script = tmp_path / "pager.py"
    script.write_text(f"import sys\nopen({str(record)!r}, 'w').write('\\n'.join(sys.argv[1:]))\n")
    monkeypatch.setenv("PAGER", f"{sys.executable} {script} --flag")
    app = viewer_app(log)
    async with app.run_test(size=(140, 40)) as pilot:
        await open_viewer(pilot, app, 3)
        with no_suspend(app):
            await pilot.press("p")
        assert record.read_text().splitlines() == ["--flag", str(log)]
        monkeypatch.setenv("PAGER", "no-such-pager-anywhere")
        with no_suspend(app):
            await pilot.press("p")
        await pilot.pause()
        assert any("no-such-pager-anywhere" in str(n.message) for n in app._notifications)
        await pilot.press("p")  # headless: no terminal to hand over, said plainly
        await pilot.pause()
        assert any("cannot hand the screen" in str(n.message) for n in app._notifications)
