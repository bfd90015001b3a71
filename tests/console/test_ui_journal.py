"""The journal screen: newest first by when an operation started; the profiles column says
what changed without a '?'."""

from __future__ import annotations

from ui_helpers import T0, make_app, press_until, settle, wait_for

from tui.ops.journal import JournalEntry, JournalRead
from tui.ui.journal.entry_view import profiles_text
from tui.ui.journal.journal_screen import JournalScreen


def entry(kind: str, start: float, source: str | None, target: str | None) -> JournalEntry:
    return JournalEntry(kind, start, start + 60, True, (0, 1), source, target)


def test_the_profiles_column_never_shows_a_question_mark() -> None:
    assert profiles_text(entry("apply", T0, "sim-baseline", "sim-aggressive")) == (
        "sim-baseline -> sim-aggressive"
    )
    assert profiles_text(entry("start", T0, None, "sim-baseline")) == "sim-baseline"
    assert profiles_text(entry("relaunch", T0, "sim-baseline", "sim-baseline")) == "sim-baseline"
    assert profiles_text(entry("pipeline-start", T0, None, None)) == "–"


async def test_entries_are_listed_newest_first_by_their_start() -> None:
    # written in the order they ended: the long apply ended after the short relaunch
    long_apply = entry("apply", T0, "sim-baseline", "sim-aggressive")
    short = entry("relaunch", T0 + 30, "sim-aggressive", "sim-aggressive")
    start = entry("start", T0 - 600, None, "sim-baseline")
    app = make_app(journal=JournalRead((start, short, long_apply), 0))
    async with app.run_test(size=(130, 30)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("j",), JournalScreen)
        screen = app.screen
        assert isinstance(screen, JournalScreen)
        await wait_for(pilot, lambda: len(screen.entries) == 3, "the entries")
        assert [e.type for e in screen.entries] == ["relaunch", "apply", "start"]
