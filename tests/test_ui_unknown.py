"""The console with a server it does not know, and a Stop fleet that could not stop everything
(issue 31, part A): what the confirmations name, what reaches the backend, when it quits."""

from __future__ import annotations

from dataclasses import replace

from textual.screen import ModalScreen
from ui_helpers import (
    RecordingActions,
    finish_actions,
    make_app,
    press_until,
    ready_server,
    settle,
    seven_gpu_fleet,
    wait_for,
)

from tui.control.adopt import ConfirmedServer
from tui.fleet.snapshot import ServerState
from tui.ops.console import ConsoleBackend
from tui.ops.door import OperationError
from tui.ops.service import FleetOps
from tui.retune.events import EffectiveValues, GpuFailed, RequestedValues, VerifyReport
from tui.ui.app import FleetApp
from tui.ui.confirm import ConfirmScreen
from tui.ui.main_screen import MainScreen
from tui.ui.quit_screen import StopFailedScreen
from tui.ui.stop_screen import StopScreen

COMMAND = ("python", "-m", "tui", "sim", "--port", "30002")
UNKNOWN = ConfirmedServer(2, 4802, 777_001, " ".join(COMMAND))


def _fleet_with_an_unknown_server() -> object:
    fleet = seven_gpu_fleet()
    server = ready_server(
        2, state=ServerState.UNKNOWN, pid=4802, cmdline=COMMAND, start_ticks=777_001
    )
    panels = tuple(replace(p, server=server) if p.gpu_index == 2 else p for p in fleet.panels)
    return replace(fleet, panels=panels)


def _app(actions: RecordingActions) -> FleetApp:
    app = make_app(_fleet_with_an_unknown_server(), actions=actions, profile="aggressive")  # type: ignore[arg-type]
    assert isinstance(app, FleetApp)
    return app


def _label_text(screen: object, selector: str) -> str:
    assert isinstance(screen, ModalScreen)
    return str(screen.query_one(selector).render())


async def test_k_on_an_unknown_server_names_its_pid_and_command_and_sends_only_that() -> None:
    actions = RecordingActions()
    app = _app(actions)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("2", "k"), StopScreen)
        text = _label_text(app.screen, "#stop-affected")
        assert "pid 4802, UNKNOWN" in text and " ".join(COMMAND) in text
        assert "only this pid is signalled, never its group" in text
        await pilot.press("escape")  # cancelled: nothing reaches the backend
        await pilot.pause()
        assert actions.calls == []
        await press_until(pilot, ("k",), StopScreen)
        await pilot.press("t")
        await finish_actions(pilot, app)
    assert actions.calls == [("kill", ((2,), "terminate", (UNKNOWN,)))]


async def test_k_on_known_servers_confirms_no_pid_to_the_backend() -> None:
    actions = RecordingActions()
    app = _app(actions)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("3", "k"), StopScreen)
        await pilot.press("d")
        await finish_actions(pilot, app)
    assert actions.calls == [("kill", ((3,),))]


async def test_r_on_an_unknown_server_confirms_it_then_relaunches_with_it_named() -> None:
    actions = RecordingActions()
    app = _app(actions)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("2", "r", "enter"), ConfirmScreen)
        assert "pid 4802, UNKNOWN" in _label_text(app.screen, "#confirm-affected")
        await pilot.press("y")
        await finish_actions(pilot, app)
    assert actions.calls == [("relaunch", ((2,), (UNKNOWN,)))]


async def test_stop_fleet_that_left_servers_running_does_not_quit() -> None:
    """Stop fleet refused on a GPU: the console stays, says which and why, and offers retry,
    leave running and quit, or keep the console open."""
    why = "refused on GPU 0: refusing to signal pid 4200 (GPU 0, port 30000): it is not ours"
    actions = RecordingActions(stop_errors=[OperationError(why), OperationError(why)])
    app = make_app(actions=actions)
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await pilot.press("q", "s")
        await wait_for(pilot, lambda: isinstance(app.screen, StopFailedScreen), "the dialog")
        assert why in _label_text(app.screen, "#stopfail-why")
        assert app.is_running
        await pilot.press("escape")  # keep the console open
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), "the grid")
        assert app.is_running
        await pilot.press("q", "s")
        await wait_for(pilot, lambda: isinstance(app.screen, StopFailedScreen), "the dialog")
        await pilot.press("r")  # retry: this time the stop succeeds, and only then it quits
        await wait_for(pilot, lambda: not app.is_running, "the console to close")
    assert actions.calls == [("stop_fleet", ())] * 3


async def test_leave_running_quits_with_the_servers_left() -> None:
    actions = RecordingActions(stop_errors=[OperationError("failed on GPU 1: survivors")])
    app = make_app(actions=actions)
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await pilot.press("q", "s")
        await wait_for(pilot, lambda: isinstance(app.screen, StopFailedScreen), "the dialog")
        await pilot.press("l")
        await wait_for(pilot, lambda: not app.is_running, "the console to close")
    assert actions.calls == [("stop_fleet", ())]


def test_a_failed_step_withdraws_the_stopping_mark_whatever_failed() -> None:
    """A rollout step whose launch failed (its port held) left GPU 1 'stopping' for ever."""
    marks: list[tuple[int, bool]] = []

    class Marker:
        def mark_stopping(self, gpu: int, stopping: bool = True) -> None:
            marks.append((gpu, stopping))

    sink = ConsoleBackend(FleetOps(), Marker())._sink(None)
    report = VerifyReport(
        1,
        False,
        "p",
        RequestedValues(),
        EffectiveValues(),
        failure="launch failed: port held",
        error_reason="launch",
    )
    sink(GpuFailed(1, report))
    assert marks == [(1, False)]
