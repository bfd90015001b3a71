"""The kill dialog's drain deadline, and the toast of a drain that timed out (Pilot).

A deadline that is not seconds in (0, 10^6] is one line in the dialog and stops nothing; a typed
one reaches the backend with the kill. A stop whose drain timed out (a client kept sending) says
so, with what it lost, never "Done"."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.widgets import Input, Label, Static
from ui_helpers import (
    RecordingFleet,
    finish_actions,
    press_until,
    scripted_apply,
    settled_app,
    wait_for,
)

from tui.control.drain_watch import DrainAccount
from tui.control.stop import StopResult
from tui.control.stop_release import StopReleased
from tui.ops.commands import Kill
from tui.ops.events import OpEvent
from tui.retune.events import ApplyResult, ThroughputComparison, VerifyReport
from tui.ui.stop_screen import StopScreen


def text_of(screen: Screen[Any], selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


def _timed_out(gpu: int) -> StopReleased:
    result = StopResult(gpu, 4242, "terminated", (4242,), (), 65.3, "drain", "", True)
    drain = DrainAccount(True, 60.0, 864, lost_in_flight=16, in_flight_at_deadline=16)
    return StopReleased(gpu, "done", f"GPU {gpu} (pid 4242): ...", result, drain=drain)


def _relaunched(report: VerifyReport) -> ApplyResult:
    """A relaunch of the report's GPU on sim-baseline, measuring nothing."""
    gpu = report.gpu
    unmeasured = ThroughputComparison((), (), "not measured")
    return ApplyResult("sim-baseline", {gpu: "sim-baseline"}, (gpu,), (report,), unmeasured, 0, 1)


async def test_a_bad_deadline_is_named_and_stops_nothing_a_good_one_reaches_the_kill() -> None:
    actions = RecordingFleet()
    async with settled_app(actions=actions) as (app, pilot):
        await press_until(pilot, ("1", "k"), StopScreen)
        stop = app.screen
        field = stop.query_one("#stop-drain-s", Input)
        field.focus()
        await pilot.press("0", "enter")
        error = stop.query_one("#stop-deadline-error", Label)
        assert error.display
        assert "drain deadline '0': must be seconds in (0, 1000000]" in str(error.render())
        assert app.screen is stop and actions.commands == []  # nothing stopped
        await pilot.press("backspace", "9", "0", "enter")  # Enter in the field drains with it
        await wait_for(pilot, lambda: not isinstance(app.screen, StopScreen), "closed")
        await finish_actions(pilot, app)
    assert actions.commands == [Kill((1,), drain_s=90.0)]


async def test_a_drain_that_timed_out_is_a_loss_in_the_toast_never_done() -> None:
    actions = RecordingFleet(kill_outcomes=(_timed_out(1),))
    async with settled_app(actions=actions) as (app, pilot):
        await press_until(pilot, ("1", "k"), StopScreen)
        await pilot.press("d")
        await finish_actions(pilot, app)
        await wait_for(pilot, lambda: bool(app._notifications), "a toast")
        toasts = list(app._notifications)
    assert [t.title for t in toasts] == ["Stopped: the drain timed out, requests lost"]
    assert toasts[0].severity == "error"
    text = str(toasts[0].message)
    assert "GPU 1: drain timed out after 60 s: 16 requests running, 864 arrived" in text
    assert "stopped by SIGTERM to its process group: 16 in-flight requests lost" in text
    assert "Done" not in text


async def test_the_apply_report_says_what_a_timed_out_drain_lost() -> None:
    """GPU 1's old server drained past its deadline: its report, the summary and the strip say
    what it lost; the apply itself (every GPU ready) is not 'done' in green."""
    from dataclasses import replace

    from tui.ops.commands import Apply
    from tui.retune.events import ApplyFinished, GpuReady
    from tui.ui.messages import OperationRequested
    from tui.ui.operation_strip import OperationStrip
    from tui.ui.retune.apply_screen import ApplyScreen

    note = (
        "drain timed out after 60 s: 16 requests running, 864 arrived during the drain; "
        "stopped by SIGTERM to its process group: 16 in-flight requests lost"
    )
    plain = scripted_apply()

    def lossy(name: str, gpus: tuple[int, ...]) -> list[OpEvent]:
        def mark(report: VerifyReport) -> VerifyReport:
            if report.gpu != 1:
                return replace(report, stop_s=2.0, lost_in_flight=0)
            return replace(
                report, stop_s=65.3, drain_timed_out=True, lost_in_flight=16, drain_note=note
            )

        events: list[OpEvent] = []
        for event in plain(name, gpus):
            if isinstance(event, GpuReady):
                event = GpuReady(event.gpu, mark(event.report))
            elif isinstance(event, ApplyFinished):
                reports = tuple(mark(r) for r in event.result.reports)
                event = ApplyFinished(replace(event.result, reports=reports))
            events.append(event)
        return events

    actions = RecordingFleet(apply_script=lossy)
    async with settled_app(actions=actions, size=(200, 50)) as (app, pilot):
        app.main_screen.post_message(OperationRequested(Apply("sim-aggressive", (0, 1))))
        await wait_for(pilot, lambda: isinstance(app.screen, ApplyScreen), "the apply screen")
        screen = app.screen
        assert isinstance(screen, ApplyScreen)
        await wait_for(pilot, lambda: screen.finished, "the end of the apply")
        assert f"GPU 1: old server: {note}" in text_of(screen, "#apply-gpus")
        summary = text_of(screen, "#apply-summary")
        assert "2 of 2 GPUs ready; drain timed out on GPU 1: 16 in-flight requests lost" in (
            summary
        )
        strip = app.main_screen.query_one(OperationStrip)
        strip.refresh_line()
        assert "drain timed out on GPU 1: 16 in-flight requests lost" in str(strip.render())


async def test_a_relaunch_whose_drain_timed_out_is_a_loss_in_the_toast() -> None:
    from dataclasses import replace

    from ui_helpers import verify_report

    from tui.ui.confirm import ConfirmScreen
    from tui.ui.retune.profile_picker import ProfilePickerScreen

    note = (
        "drain timed out after 60 s: 3 requests running; "
        "killed with SIGKILL: 3 in-flight requests lost"
    )
    report = replace(
        verify_report(2, "sim-baseline"), drain_timed_out=True, lost_in_flight=3, drain_note=note
    )
    actions = RecordingFleet(relaunch_results=(_relaunched(report),))
    async with settled_app(actions=actions) as (app, pilot):
        await press_until(pilot, ("2", "r"), ProfilePickerScreen)
        await pilot.press("enter")  # the running profile: a relaunch
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
        await pilot.press("y")
        await finish_actions(pilot, app)
        await wait_for(pilot, lambda: bool(app._notifications), "a toast")
        toasts = list(app._notifications)
    assert [t.severity for t in toasts] == ["error"]
    assert "a drain timed out: requests lost" in str(toasts[0].title)
    assert f"GPU 2: {note}" in str(toasts[0].message)


def test_a_drain_that_ended_while_a_client_still_sent_is_an_error_toast_never_done() -> None:
    """Stopped by its own drain, yet a client was sending as it exited: never "Done"."""
    from dataclasses import replace

    from ui_helpers import verify_report

    from tui.ui.loss_toasts import after_kill, after_relaunch

    result = StopResult(1, 4242, "drained", (4242,), (), 3.2, "drain", "", True)
    drain = DrainAccount(arrived=40, still_sending=True)
    stopped = StopReleased(1, "done", "GPU 1 (pid 4242): ...", result, drain=drain)
    toast = after_kill("stop GPU 1 (drain)", [stopped])
    assert toast.severity == "error" and "Done" not in toast.title + toast.message
    assert toast.title == "Stopped, but a client was still sending: requests may be lost"
    assert toast.message == (
        "GPU 1: drain ended while a client was still sending (40 arrived during the drain): "
        "requests sent in its last moment may have been lost"
    )
    report = replace(
        verify_report(1, "sim-baseline"),
        client_still_sending=True,
        arrived_during_drain=40,
        drain_note=stopped.drain_note,
    )
    toast = after_relaunch("relaunched GPU 1", [_relaunched(report)])
    assert toast.severity == "error"
    assert toast.title == "relaunched GPU 1, but a client was still sending: requests may be lost"
