"""Apply screen, relaunch picker, rollback confirm and journal screen through Pilot."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace as _replace
from operator import is_
from typing import Any

import pytest
from textual.widgets import DataTable, OptionList, Static
from ui_helpers import (
    APPLY_OOM_LINE,
    STARTUP_PHASES,
    T0,
    RecordingFleet,
    finish_actions,
    make_app,
    press_until,
    scripted_apply,
    scripted_rollback,
    settle,
    settled_app,
    wait_for,
)

from tui.ops.commands import Apply, Relaunch, Rollback
from tui.ops.entries import apply_entry
from tui.ops.journal import JournalEntry, JournalRead
from tui.retune.events import ApplyFinished, MeasureProgress, ThroughputComparison
from tui.state.fleet_state import GpuState
from tui.ui.app import FleetApp
from tui.ui.confirm import ConfirmScreen
from tui.ui.journal.journal_screen import JournalEntryScreen, JournalScreen
from tui.ui.main_screen import MainScreen
from tui.ui.messages import OperationRequested
from tui.ui.operation_strip import OperationStrip
from tui.ui.retune.apply_screen import ApplyScreen
from tui.ui.retune.profile_picker import ProfilePickerScreen
from tui.ui.rollout.rollback_dialog import RollbackScreen
from tui.ui.rollout.rollout_screen import RolloutScreen

ALL = (0, 1, 2, 3, 4, 5, 6)


def app_with(actions: RecordingFleet, **kwargs: Any) -> FleetApp:
    return make_app(actions=actions, **kwargs)


def text_of(screen: object, selector: str) -> str:
    assert isinstance(screen, ApplyScreen | JournalEntryScreen)
    return str(screen.query_one(selector, Static).render())


def states(table: str) -> list[str]:
    """The state column of the report table (it may hold 'in progress')."""
    return [
        " ".join(w for w in line.split()[1:3] if w in ("in", "progress", "ready", "failed"))
        for line in table.splitlines()[1:]
        if line[:1].isdigit()
    ]


def journal_with_failed_apply() -> JournalRead:
    events = scripted_apply(failing=(5,))("sim-aggressive", ALL)
    final = events[-1]
    assert isinstance(final, ApplyFinished)
    entry = apply_entry(final.result, "console")
    return JournalRead((entry, _replace(entry, type="rollout", lost_gpu_seconds=412.5)), 0)


async def test_apply_screen_shows_phases_live_then_reports_and_the_verdict() -> None:
    script = scripted_apply(failing=(5,))
    count = len(script("sim-aggressive", ALL))
    phases_done, measured = asyncio.Event(), asyncio.Event()
    gates = {len(STARTUP_PHASES) * 7: phases_done, count - 1: measured}
    actions = RecordingFleet(apply_script=script, gates=gates)
    journal = journal_with_failed_apply()
    async with settled_app(actions=actions, journal=journal, size=(160, 50)) as (app, pilot):
        app.main_screen.post_message(OperationRequested(Apply("sim-aggressive", ALL)))
        await wait_for(pilot, lambda: isinstance(app.screen, ApplyScreen), "the apply screen")
        screen = app.screen
        assert isinstance(screen, ApplyScreen)
        last = "capturing CUDA graphs"
        await wait_for(pilot, lambda: all(r.phase == last for r in screen.progress.rows), "phases")
        live = text_of(screen, "#apply-gpus")
        assert states(live) == ["in progress"] * 7
        # the phase timer ticks from the event's 25 s on
        assert len(re.findall(r"capturing CUDA graphs \(2[5-9]s\)", live)) == 7
        phases_done.set()
        await wait_for(pilot, lambda: screen.progress.measure is not None, "the measurement")
        live = text_of(screen, "#apply-gpus")  # every GPU settled before the measurement
        assert states(live) == ["ready"] * 5 + ["failed", "ready"]
        last_sample = MeasureProgress("after", 6, 30.0)
        await wait_for(pilot, lambda: screen.progress.measure == last_sample, "the last sample")
        assert APPLY_OOM_LINE in live
        assert "measuring after, 6 samples" in text_of(screen, "#apply-throughput")
        await pilot.press("escape")  # still running: the report hides, the apply goes on
        # is_(a, b), not "a is b": mypy would narrow screen to the declared type of the other side
        assert isinstance(app.screen, MainScreen) and is_(app.operation, screen)
        strip = app.main_screen.query_one(OperationStrip)
        strip.refresh_line()
        line = str(strip.render())
        assert line.startswith("apply sim-aggressive GPUs 0-6 · 6 ready, 1 failed; measuring")
        assert line.endswith("· w: report")
        await pilot.press("w")  # the same report, still running
        assert is_(app.screen, screen) and not screen.finished
        measured.set()
        await wait_for(pilot, lambda: screen.finished, "the end of the apply")
        await wait_for(pilot, lambda: "written" in screen.journal_note, "the journal check")
        report = text_of(screen, "#apply-gpus")
        assert "64 -> 40 CAPPED" in report and "798,080" in report and "11.0" in report
        assert "1m 01s" in report  # GPU 0's time to ready
        assert "GPU 5: OOM while allocating the Mamba cache" in report
        throughput = text_of(screen, "#apply-throughput")
        assert "verdict: better: +21.3% (95% CI +18.7% .. +24.0%, sure 100.0%)" in throughput
        summary = text_of(screen, "#apply-summary")
        assert "6 of 7 GPUs ready; failed: GPU 5 (oom)" in summary
        assert "journal: written to the journal" in summary
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
    assert actions.applied() == [("sim-aggressive", ALL)]


async def test_apply_screen_says_when_the_result_is_missing_from_the_journal() -> None:
    actions = RecordingFleet(apply_script=scripted_apply())
    app = app_with(actions)  # empty journal
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot, app)
        app.main_screen.post_message(OperationRequested(Apply("sim-aggressive", (1, 2))))
        await wait_for(pilot, lambda: isinstance(app.screen, ApplyScreen), "the apply screen")
        screen = app.screen
        assert isinstance(screen, ApplyScreen)
        await wait_for(pilot, lambda: "NOT" in screen.journal_note, "the journal check")
        assert "2 of 2 GPUs ready" in text_of(screen, "#apply-summary")


async def test_relaunch_picker_defaults_to_the_running_profile_and_offers_others() -> None:
    actions = RecordingFleet()
    async with settled_app(actions=actions) as (app, pilot):
        await press_until(pilot, ("2", "r"), ProfilePickerScreen)
        options = app.screen.query_one(OptionList)
        assert "sim-baseline  (running)" in str(options.get_option_at_index(1).prompt)
        assert options.highlighted == 1  # the running one: Enter keeps it
        await pilot.press("up", "enter")  # sim-aggressive
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert confirm.title_text == "Restart GPU 2 (1 server) with profile sim-aggressive?"
        assert "port 30002" in confirm.affected
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, ApplyScreen), "the apply screen")
        await wait_for(pilot, lambda: bool(actions.applied()), "the apply")
        assert actions.applied() == [("sim-aggressive", (2,))]
        assert Relaunch((2,)) not in actions.commands


async def test_rollback_confirm_names_the_previous_profile_and_the_gpus() -> None:
    baseline = {"name": "sim-baseline"}
    tuned = {"name": "sim-baseline-tuned"}
    running = {g: GpuState(g, current=tuned, previous=baseline) for g in ALL}
    actions = RecordingFleet()
    async with settled_app(actions=actions, running=running) as (app, pilot):
        await press_until(pilot, ("b",), ConfirmScreen)
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert confirm.title_text == "Roll back GPUs 0-6 to sim-baseline?"
        assert "GPU 0-6: sim-baseline-tuned -> sim-baseline" in confirm.affected
        assert actions.commands == []
        await pilot.press("y")
        await finish_actions(pilot, app)
        assert actions.commands == [Rollback()]


async def test_rollback_walks_one_gpu_at_a_time_and_ends_with_the_fleet_verdict() -> None:
    running = {
        g: GpuState(g, current={"name": "sim-baseline-tuned"}, previous={"name": "sim-baseline"})
        for g in ALL
    }
    actions = RecordingFleet(rollback_script=scripted_rollback(failing=3))
    async with settled_app(actions=actions, running=running, size=(150, 45)) as (app, pilot):
        await press_until(pilot, ("b",), RollbackScreen)
        keys = str(app.screen.query_one(".dialog-keys").render())  # the dialog's key line
        assert "a: All at once" in keys and "y: One GPU at a time" in keys
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutScreen), "the report")
        screen = app.screen
        assert isinstance(screen, RolloutScreen) and screen.rollback
        assert not screen.all_at_once
        await wait_for(pilot, lambda: screen.finished, "the rollback's end")
        title = str(screen.query_one("#rollout-title", Static).render())
        assert title.startswith("Roll back the fleet to sim-baseline, one GPU at a time")
        rows = str(screen.query_one("#rollout-gpus", Static).render())
        states = [line.split()[:2] for line in rows.splitlines()[1:8]]
        # in reverse GPU order, each verified before the next; GPU 3 failed: 0-2 never reached
        walked = [["6", "ready"], ["5", "ready"], ["4", "ready"], ["3", "failed"]]
        assert sorted(states[:4], reverse=True) == walked, rows
        assert states[4:] == [["2", "stayed"], ["1", "stayed"], ["0", "stayed"]], rows
        verdict = str(screen.query_one("#rollout-verdict", Static).render())
        assert verdict.startswith("fleet throughput 9,585 -> 11,935 tok/s: better: +24.4%")
        assert "(95% CI +23.5% .. +25.4%" in verdict
        summary = str(screen.query_one("#rollout-summary", Static).render())
        assert "STOPPED at GPU 3: OOM" in summary
        assert actions.commands == [Rollback()]
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_rollback_all_at_once_only_when_the_operator_chooses_it() -> None:
    running = {
        g: GpuState(g, current={"name": "sim-baseline-tuned"}, previous={"name": "sim-baseline"})
        for g in ALL
    }
    verdict = ThroughputComparison((0.0,) * 6, (5.0,) * 6, "not measured", note="no load before")
    actions = RecordingFleet(rollback_script=scripted_rollback(verdict=verdict))
    async with settled_app(actions=actions, running=running, size=(150, 45)) as (app, pilot):
        await press_until(pilot, ("b",), RollbackScreen)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutScreen), "the report")
        screen = app.screen
        assert isinstance(screen, RolloutScreen) and screen.all_at_once
        await wait_for(pilot, lambda: screen.finished, "the rollback's end")
        title = str(screen.query_one("#rollout-title", Static).render())
        assert title.startswith("Roll back the fleet to sim-baseline, all at once")
        said = str(screen.query_one("#rollout-verdict", Static).render()).splitlines()
        assert said[0] == "fleet throughput: not measured (no load before)"
        assert said[1] == "fleet output tok/s before 0 (6 samples), after 5 (6 samples)"
    assert actions.commands == [Rollback(all_at_once=True)]


async def test_journal_lists_entries_newest_first_and_enter_shows_the_detail() -> None:
    app = app_with(RecordingFleet(), journal=journal_with_failed_apply())
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("j",), JournalScreen)
        screen = app.screen
        assert isinstance(screen, JournalScreen)
        table = screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 2, "the journal rows")
        newest = [str(c) for c in table.get_row_at(0)]
        assert newest[1:] == [
            "rollout",
            "sim-baseline -> sim-aggressive",
            "0-6",
            "better",
            "5",
            "412",
        ]
        assert table.get_row_at(1)[1] == "apply"
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, JournalEntryScreen), "the detail")
        detail = text_of(app.screen, "#journal-entry")
        assert "server.max_mamba_cache_size: 80 -> 200" in detail
        assert APPLY_OOM_LINE in detail and "64 -> 40 CAPPED" in detail
        assert "verdict: better" in detail
        await pilot.press("escape", "escape")
        assert isinstance(app.screen, MainScreen)


@pytest.mark.parametrize(
    "detail",
    [
        {"reports": "not a list", "diff": 5, "throughput": "x"},
        {"reports": [{"gpu": "zero", "ok": "yes", "requested": 3}], "throughput": {"before": 7}},
        {"report": {"effective": [1, 2]}, "diff": [None, {"a": 1}]},
    ],
)
async def test_an_entry_with_a_damaged_detail_opens_and_says_so(detail: dict[str, object]) -> None:
    entry = JournalEntry("apply", T0, T0 + 30, False, (0, 1), "a", "b", "cli", "odd", detail=detail)
    app = app_with(RecordingFleet(), journal=JournalRead((entry,), 0))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("j",), JournalScreen)
        table = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 1, "the journal row")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, JournalEntryScreen), "the detail")
        text = text_of(app.screen, "#journal-entry")
        assert "apply: a -> b" in text and "odd" in text
        await pilot.press("escape", "escape")
        assert isinstance(app.screen, MainScreen) and app.is_running


async def test_an_empty_journal_says_so() -> None:
    app = app_with(RecordingFleet())
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("j",), JournalScreen)
        note = app.screen.query_one("#journal-note", Static)
        await wait_for(pilot, lambda: "empty" in str(note.render()), "the empty note")
        assert T0 > 0
