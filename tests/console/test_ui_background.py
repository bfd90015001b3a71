"""Operations in the background: the report hides while the operation goes on, the status
strip shows it in one line, `w` opens it again, one operation at a time (refused with a
notification), a failed apply offers `b`, a rollback with no history says so in one line, and
the phase timer ticks between events."""

from __future__ import annotations

import asyncio
from operator import is_
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Static
from ui_helpers import (
    RecordingFleet,
    make_app,
    pipeline_status,
    press_until,
    scripted_apply,
    settle,
    wait_for,
)

from tui.ops.commands import Apply, Op, Rollback
from tui.ops.events import EventSink, OpEvent
from tui.ops.service import OperationError
from tui.retune.events import ApplyFinished, ApplyRefused, ApplyResult, ThroughputComparison
from tui.state.fleet_state import GpuState
from tui.ui.app import FleetApp
from tui.ui.background import PhaseClock
from tui.ui.confirm import ConfirmScreen
from tui.ui.detail.detail_screen import DetailScreen
from tui.ui.main_screen import MainScreen
from tui.ui.messages import OperationRequested
from tui.ui.operation_strip import OperationStrip
from tui.ui.retune.apply_screen import ApplyScreen
from tui.ui.retune.progress import ApplyProgress, GpuRow
from tui.ui.rollout.rollout_screen import RolloutScreen

ALL = (0, 1, 2, 3, 4, 5, 6)


def _app(actions: RecordingFleet, **kwargs: Any) -> FleetApp:
    app = make_app(actions=actions, status=pipeline_status(), **kwargs)
    app.animation_level = "none"
    return app


def _text(screen: object, selector: str) -> str:
    assert isinstance(screen, ApplyScreen | RolloutScreen)
    return str(screen.query_one(selector, Static).render())


def _notes(app: FleetApp) -> list[str]:
    return [n.message for n in app._notifications]


def _ticking(strip: OperationStrip) -> bool:
    """Whether the strip's once-a-second look runs (Textual's Timer keeps it in ``_active``)."""
    return strip._ticks is not None and strip._ticks._active.is_set()


async def _held_apply(pilot: Pilot[None], app: FleetApp) -> ApplyScreen:
    await settle(pilot, app)
    app.main_screen.post_message(OperationRequested(Apply("sim-aggressive", (3, 5))))
    await wait_for(pilot, lambda: isinstance(app.screen, ApplyScreen), "the apply screen")
    screen = app.screen
    assert isinstance(screen, ApplyScreen)
    await wait_for(pilot, lambda: screen.progress.rows[0].phase != "waiting", "a phase")
    return screen


async def test_the_grid_and_details_stay_usable_while_an_apply_runs() -> None:
    held = asyncio.Event()
    actions = RecordingFleet(apply_script=scripted_apply(), gates={3: held})
    app = _app(actions)
    async with app.run_test(size=(120, 40)) as pilot:
        strip = app.main_screen.query_one(OperationStrip)
        assert not strip.display and not _ticking(strip)  # hidden: its tick paused
        screen = await _held_apply(pilot, app)
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen) and app.operation is screen
        assert any("goes on in the background" in n for n in _notes(app))
        # the start woke the strip: shown and ticking, nobody asked it to look
        assert strip.display and _ticking(strip)
        assert str(strip.render()).startswith("apply sim-aggressive GPUs 3,5")
        await pilot.press("1", "enter")  # another GPU's detail (and its log) while it runs
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), "the detail")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), "the grid")
        await pilot.press("t")  # a second operation: refused at once, named, not queued
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        busy = [n for n in _notes(app) if "one operation at a time" in n]
        assert busy == [
            "apply sim-aggressive GPUs 3,5 is running: one operation at a time (w opens its report)"
        ]
        held.set()
        await wait_for(pilot, lambda: screen.finished, "the end")
        strip.refresh_line()
        line = str(strip.render())
        assert line.startswith("apply sim-aggressive GPUs 3,5 done: · 2 ready; better: +21.3%")
        await pilot.press("w")
        assert app.screen is screen
        await pilot.press("escape")  # ended: closes for good, the strip forgets it
        await wait_for(pilot, lambda: app.operation is None, "the operation forgotten")
        strip.refresh_line()
        assert not strip.display and not _ticking(strip)
        assert not app.is_screen_installed(screen)
        await pilot.press("w")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
    assert actions.commands == [Apply("sim-aggressive", (3, 5))]


async def test_a_failed_apply_offers_rollback() -> None:
    running = {
        g: GpuState(g, current={"name": "sim-aggressive"}, previous={"name": "sim-baseline"})
        for g in ALL
    }
    actions = RecordingFleet(apply_script=scripted_apply(failing=(5,)))
    app = _app(actions, running=running)
    async with app.run_test(size=(150, 45)) as pilot:
        screen = await _held_apply(pilot, app)
        await wait_for(pilot, lambda: screen.finished, "the end")
        assert screen.check_action("rollback", ()) is True
        assert "b: roll back  Escape: close" in _text(screen, "#apply-summary")
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert "Roll back" in confirm.title_text
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, RolloutScreen) and app.screen.rollback,
            "the rollback's report",
        )
        rollback = app.screen
        assert isinstance(rollback, RolloutScreen)
        await wait_for(pilot, lambda: rollback.finished, "the rollback's end")
    assert [type(c) for c in actions.commands] == [Apply, Rollback]


async def test_an_apply_that_went_well_offers_no_rollback() -> None:
    app = _app(RecordingFleet(apply_script=scripted_apply()))
    async with app.run_test(size=(150, 45)) as pilot:
        screen = await _held_apply(pilot, app)
        await wait_for(pilot, lambda: screen.finished, "the end")
        assert screen.check_action("rollback", ()) is False
        await pilot.press("b")
        await pilot.pause()
        assert app.screen is screen


class NoHistory(RecordingFleet):
    async def run(self, command: Op[Any], sink: EventSink | None = None) -> Any:
        if isinstance(command, Rollback):
            self.commands.append(command)
            raise OperationError("rollback: no GPU has a previous profile recorded")
        return await super().run(command, sink)


async def test_rollback_with_no_history_says_nothing_to_roll_back_in_one_line() -> None:
    running = {g: GpuState(g, current={"name": "sim-baseline"}) for g in ALL}
    actions = NoHistory()
    app = _app(actions, running=running)
    async with app.run_test(size=(150, 45)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("b",), ConfirmScreen)
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutScreen), "the report")
        screen = app.screen
        assert isinstance(screen, RolloutScreen)
        await wait_for(pilot, lambda: screen.finished, "the end")
        summary = _text(screen, "#rollout-summary")
        assert summary == "nothing to roll back: no GPU has a previous profile recorded"
        assert "OperationError" not in summary + _text(screen, "#rollout-gpus")
    assert actions.commands == [Rollback()]


def test_the_phase_timer_ticks_between_events_and_stops_at_the_end() -> None:
    now = [100.0]
    clock = PhaseClock(clock=lambda: now[0])
    progress = ApplyProgress("p", (GpuRow(3, "loading weights", 12.0), GpuRow(5)))
    clock.saw(progress)
    now[0] = 130.0
    assert clock.phase_s(progress.rows[0]) == 42.0  # "waiting (0s)" for 30 s no more
    assert clock.elapsed() == 30.0
    clock.saw(progress)  # the same event again: still counted from its arrival
    assert clock.phase_s(progress.rows[0]) == 42.0
    clock.end()
    now[0] = 200.0
    assert clock.phase_s(progress.rows[0]) == 42.0 and clock.elapsed() == 30.0


def test_status_strip_snapshot_80x24(snap_compare: Any) -> None:
    held = asyncio.Event()
    app = _app(RecordingFleet(apply_script=scripted_apply(failing=(5,)), gates={7: held}))

    async def run(pilot: Pilot[None]) -> None:
        screen = await _held_apply(pilot, app)
        await wait_for(pilot, lambda: screen.progress.rows[1].phase != "waiting", "GPU 5")
        screen.clock = PhaseClock(clock=lambda: 0.0)  # a fixed clock: a fixed picture
        await pilot.press("escape")
        strip = app.main_screen.query_one(OperationStrip)
        strip.refresh_line()
        app.clear_notifications()
        await pilot.pause()
        assert len(str(strip.render())) <= 78  # one line at 80 columns (padding 1 each side)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run)


async def test_a_new_operation_starts_while_the_last_report_is_under_another_screen() -> None:
    actions = RecordingFleet(apply_script=scripted_apply())
    app = _app(actions)
    async with app.run_test(size=(120, 40)) as pilot:
        first = await _held_apply(pilot, app)
        await wait_for(pilot, lambda: first.finished, "the first apply's end")
        await app.push_screen(ConfirmScreen("Something else?", "over the report"))
        app.main_screen.post_message(OperationRequested(Apply("sim-baseline", (1,))))
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, ApplyScreen) and app.screen is not first,
            "the second apply's report",
        )
        second = app.screen
        assert isinstance(second, ApplyScreen)
        # is_(a, b), not "a is b": mypy would narrow second to the declared type of the other side
        assert is_(app.operation, second)
        await wait_for(pilot, lambda: second.finished, "the second apply's end")
    assert actions.commands == [Apply("sim-aggressive", (3, 5)), Apply("sim-baseline", (1,))]


async def test_a_refused_apply_offers_no_rollback() -> None:
    """Issue 35: an apply on ports held by servers gpufleet did not launch is refused before
    anything stops; its report says so and offers no `b: roll back` (nothing changed)."""
    why = (
        "GPU 3: port 30003 is held by pid 5120 (python -m sglang.launch_server --port 30003), "
        "a server gpufleet did not launch and has not adopted: nothing was stopped"
    )

    def refused(name: str, gpus: tuple[int, ...]) -> list[OpEvent]:
        nothing = ThroughputComparison((), (), "not measured")
        result = ApplyResult(name, {}, gpus, (), nothing, 0.0, 0.0, refused=(why,))
        return [ApplyRefused((why,)), ApplyFinished(result)]

    running = {
        g: GpuState(g, current={"name": "sim-aggressive"}, previous={"name": "sim-baseline"})
        for g in ALL
    }
    actions = RecordingFleet(apply_script=refused)
    app = _app(actions, running=running)
    async with app.run_test(size=(150, 45)) as pilot:
        await settle(pilot, app)
        app.main_screen.post_message(OperationRequested(Apply("sim-aggressive", (3, 5))))
        await wait_for(pilot, lambda: isinstance(app.screen, ApplyScreen), "the apply screen")
        screen = app.screen
        assert isinstance(screen, ApplyScreen)
        await wait_for(pilot, lambda: screen.finished, "the end")
        assert screen.check_action("rollback", ()) is False
        summary = _text(screen, "#apply-summary")
        assert "roll back" not in summary
        shown = " ".join(_text(screen, f"#{part}") for part in ApplyScreen.PARTS)
        assert "refused" in shown and "nothing was stopped" in " ".join(shown.split())
