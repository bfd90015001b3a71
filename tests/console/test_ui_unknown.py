"""The console with a server it does not know, and a Stop fleet that could not stop everything
(issue 31, part A): what the confirmations name, what reaches the backend, when it quits."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

import pytest
from fleet_helpers import MarksOnly
from textual.pilot import Pilot
from textual.screen import ModalScreen
from ui_helpers import (
    RecordingFleet,
    finish_actions,
    make_app,
    press_until,
    ready_server,
    settle,
    settled_app,
    seven_gpu_fleet,
    wait_for,
)

from tui.control.adopt import ConfirmedServer
from tui.control.stop import StopResult
from tui.control.stop_release import StopReleased
from tui.fleet.snapshot import FleetSnapshot, ServerState
from tui.ops.commands import Kill, Relaunch, StopFleet
from tui.ops.door import OperationError
from tui.ops.local import LocalFleet
from tui.ops.service import FleetOps
from tui.retune.events import EffectiveValues, GpuFailed, RequestedValues, VerifyReport
from tui.ui.app import FleetApp
from tui.ui.confirm import ConfirmScreen
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.main_screen import MainScreen
from tui.ui.quit_screen import StopFailedScreen
from tui.ui.stop_screen import StopScreen

COMMAND = ("python", "-m", "tui", "sim", "--port", "30002")
UNKNOWN = ConfirmedServer(2, 4802, 777_001, " ".join(COMMAND))


def _fleet_with_an_unknown_server() -> FleetSnapshot:
    fleet = seven_gpu_fleet()
    server = ready_server(
        2, state=ServerState.UNKNOWN, pid=4802, cmdline=COMMAND, start_ticks=777_001
    )
    panels = tuple(replace(p, server=server) if p.gpu_index == 2 else p for p in fleet.panels)
    return replace(fleet, panels=panels)


def _app(actions: RecordingFleet) -> FleetApp:
    app = make_app(_fleet_with_an_unknown_server(), actions=actions, profile="aggressive")
    return app


SCRIPTED = ("/venv/bin/python", "-m", "sglang.launch_server", "--port", "30004")
STRANGER_4 = ConfirmedServer(4, 4804, 777_004, " ".join(SCRIPTED))


def _fleet_started_by_a_script() -> FleetSnapshot:
    """GPU 4 serves, ready, but the fleet state records nothing of it (issue 35: a profile's
    console on servers the operator's own script started)."""
    fleet = seven_gpu_fleet()
    server = ready_server(4, pid=4804, cmdline=SCRIPTED, start_ticks=777_004, stranger=True)
    panels = tuple(replace(p, server=server) if p.gpu_index == 4 else p for p in fleet.panels)
    return replace(fleet, panels=panels)


async def test_k_on_a_server_the_fleet_does_not_record_names_it_and_sends_only_it() -> None:
    """It was stopped as 'no server recorded', 'Done', while it kept serving: the
    confirmation now names it as not the fleet's, and only its confirmed pid reaches the
    backend."""
    actions = RecordingFleet()
    app = make_app(_fleet_started_by_a_script(), actions=actions, profile="aggressive")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("4", "k"), StopScreen)
        text = _label_text(app.screen, "#stop-affected")
        assert "pid 4804, ready, NOT THE FLEET'S" in text and " ".join(SCRIPTED) in text
        assert "gpufleet adopt takes it over" in text
        assert "only this pid is signalled, never its group" in text
        await pilot.press("d")
        await finish_actions(pilot, app)
    assert actions.commands == [Kill((4,), confirmed=(STRANGER_4,))]


def _toasts(app: FleetApp) -> list[tuple[str, str]]:
    return [(str(n.title), str(n.message)) for n in app._notifications]


_DRAINED = StopResult(3, 4203, "drained", (4203,), (), 2.0)
NOTHING_RAN = StopReleased(3, "done", "GPU 3: no server recorded; port 30003 is free")
STOPPED = StopReleased(3, "done", f"{_DRAINED.describe()}; GPU memory released", _DRAINED)


@pytest.mark.parametrize(
    ("outcome", "title"),
    [(NOTHING_RAN, "Nothing was running"), (STOPPED, "Stopped")],
    ids=["nothing-ran", "stopped"],
)
async def test_the_toast_says_what_each_stop_did_never_stopped_for_nothing(
    outcome: StopReleased, title: str
) -> None:
    """It said 'Done / stopped GPU 3 (drain)' whatever the stop did."""
    actions = RecordingFleet(kill_outcomes=[outcome])
    app = _app(actions)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("3", "k"), StopScreen)
        await pilot.press("d")
        await finish_actions(pilot, app)
        await wait_for(pilot, lambda: bool(_toasts(app)), "the toast")
        assert _toasts(app) == [(title, outcome.message)]


async def stop_fleet_fails(pilot: Pilot[None], app: FleetApp) -> None:
    """q then s (stop the fleet, quit), and wait for the dialog that says the stop failed."""
    await pilot.press("q", "s")
    await wait_for(pilot, lambda: isinstance(app.screen, StopFailedScreen), "the dialog")


def _label_text(screen: object, selector: str) -> str:
    assert isinstance(screen, ModalScreen)
    return str(screen.query_one(selector).render())


async def test_k_on_an_unknown_server_names_its_pid_and_command_and_sends_only_that() -> None:
    actions = RecordingFleet()
    app = _app(actions)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        panel = next(v for v in app.main_screen.query(GpuPanelView) if v.gpu_index == 2)
        assert panel.has_class("-failed")  # the error border: it needs the operator
        await press_until(pilot, ("2", "k"), StopScreen)
        text = _label_text(app.screen, "#stop-affected")
        assert "pid 4802, UNKNOWN" in text and " ".join(COMMAND) in text
        assert "only this pid is signalled, never its group" in text
        await pilot.press("escape")  # cancelled: nothing reaches the backend
        await pilot.pause()
        assert actions.commands == []
        await press_until(pilot, ("k",), StopScreen)
        await pilot.press("t")
        await finish_actions(pilot, app)
    assert actions.commands == [Kill((2,), "terminate", (UNKNOWN,))]


async def test_k_on_known_servers_confirms_no_pid_to_the_backend() -> None:
    actions = RecordingFleet()
    app = _app(actions)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("3", "k"), StopScreen)
        await pilot.press("d")
        await finish_actions(pilot, app)
    assert actions.commands == [Kill((3,))]


async def test_r_on_an_unknown_server_confirms_it_then_relaunches_with_it_named() -> None:
    actions = RecordingFleet()
    app = _app(actions)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("2", "r", "enter"), ConfirmScreen)
        assert "pid 4802, UNKNOWN" in _label_text(app.screen, "#confirm-affected")
        await pilot.press("y")
        await finish_actions(pilot, app)
    assert actions.commands == [Relaunch((2,), (UNKNOWN,))]


async def test_stop_fleet_that_left_servers_running_does_not_quit() -> None:
    """Stop fleet refused on a GPU: the console stays, says which and why, and offers retry,
    leave running and quit, or keep the console open."""
    why = "refused on GPU 0: refusing to signal pid 4200 (GPU 0, port 30000): it is not ours"
    actions = RecordingFleet(stop_errors=[OperationError(why), OperationError(why)])
    async with settled_app(actions=actions, size=(100, 30)) as (app, pilot):
        await stop_fleet_fails(pilot, app)
        assert why in _label_text(app.screen, "#stopfail-why")
        assert app.is_running
        await pilot.press("escape")  # keep the console open
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), "the grid")
        assert app.is_running
        await stop_fleet_fails(pilot, app)
        await pilot.press("r")  # retry: this time the stop succeeds, and only then it quits
        await wait_for(pilot, lambda: not app.is_running, "the console to close")
    assert actions.commands == [StopFleet()] * 3


async def test_leave_running_quits_with_the_servers_left() -> None:
    actions = RecordingFleet(stop_errors=[OperationError("failed on GPU 1: survivors")])
    async with settled_app(actions=actions, size=(100, 30)) as (app, pilot):
        await stop_fleet_fails(pilot, app)
        await pilot.press("l")
        await wait_for(pilot, lambda: not app.is_running, "the console to close")
    assert actions.commands == [StopFleet()]


def test_a_failed_step_withdraws_the_stopping_mark_whatever_failed() -> None:
    """A rollout step whose launch failed (its port held) left GPU 1 'stopping' for ever."""
    monitor = MarksOnly()
    sink = LocalFleet(FleetOps(), monitor).sink(None)
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
    assert monitor.seen == [(1, False)]


# --- the whole chain, real processes: monitor, confirmation, backend, the one signal ----------

STRANGER = (
    "import socket, subprocess, sys, threading\n"
    "s = socket.create_server(('127.0.0.1', int(sys.argv[1])))\n"
    "child = subprocess.Popen(['sleep', '2005'])  # in its group: must never be signalled\n"
    "print(child.pid, flush=True)\n"
    "threading.Event().wait()\n"
)


def test_the_console_stops_a_confirmed_unknown_server_by_its_pid_alone(tmp_path: Path) -> None:
    """A real fleet of one, its GPU's port then held by a stranger (a listener with a child in
    its own process group). The real monitor shows it unknown; k names its pid; terminate stops
    that pid and nothing else of its group; the journal says done."""
    import asyncio
    import os
    import subprocess
    import sys

    from control_helpers import running
    from rollout_helpers import sim_fleet

    from tui.control.stop_release import StopTimeouts
    from tui.fleet.monitor import FleetMonitor
    from tui.gpu.simulated import SimulatedSource
    from tui.ops.cli.status import fleet_spec
    from tui.ops.journal import read_journal
    from tui.ops.service import OpsOptions

    options = OpsOptions(stop=StopTimeouts(drain_s=5, kill_s=5, release_s=5))
    with sim_fleet(tmp_path, 1, 40.0) as fleet:
        ops = FleetOps(options=options, by="console")
        asyncio.run(ops.kill([0], mode="terminate"))
        env = {k: v for k, v in os.environ.items() if k != "GPUFLEET_LAUNCH_ID"}
        stranger = subprocess.Popen(
            [sys.executable, "-c", STRANGER, str(fleet.ports[0])],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            assert stranger.stdout is not None
            child = int(stranger.stdout.readline())

            async def drive() -> None:
                monitor = FleetMonitor(
                    fleet_spec(None, None), SimulatedSource(), discovery_interval=0
                )
                app = FleetApp(LocalFleet(ops, monitor))
                async with app.run_test(size=(100, 30)) as pilot:
                    await wait_for(
                        pilot,
                        lambda: any(
                            p.server is not None and p.server.state is ServerState.UNKNOWN
                            for p in app.fleet.panels
                        ),
                        "the stranger to show unknown",
                        timeout=20,
                    )
                    await press_until(pilot, ("0", "k"), StopScreen)
                    text = _label_text(app.screen, "#stop-affected")
                    assert f"pid {stranger.pid}, UNKNOWN" in text
                    await pilot.press("t")
                    await wait_for(pilot, lambda: stranger.poll() is not None, "its exit", 20)
                    await finish_actions(pilot, app)
                await monitor.aclose()

            asyncio.run(drive())
            assert running(child)  # its group was never signalled
            entry = read_journal().entries[-1]
            assert entry.type == "kill" and entry.ok, entry.summary
            assert "its pid only, never its group" in entry.summary
        finally:
            stranger.kill()
            stranger.wait(timeout=10)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(stranger.pid, 9)
