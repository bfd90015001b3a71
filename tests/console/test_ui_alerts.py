"""The console runs the node's alerts (issue 38 point 6): a simulated server killed under the
console fires its crash alert within the rule's time; the header counts it, the bell rings once,
``!`` lists it; with another process holding the alerts' lock the console shows and posts
nothing."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from sim_helpers import running_sim
from ui_helpers import count_bells, make_app, settle, wait_for, write_settings

from tui import paths
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import ServerState
from tui.fleet.spec import FleetSpec
from tui.gpu.simulated import SimulatedSource
from tui.ops.alerts.rules import default_config
from tui.ops.alerts.runner import AlertRunner
from tui.ops.journal import read_journal
from tui.ops.local import LocalFleet
from tui.ops.service import FleetOps
from tui.ui.alerts.alerts_screen import AlertsScreen
from tui.ui.alerts.host import FEED_EVERY_S
from tui.ui.app import FleetApp

FOR_S = 0.0
"""The crash rule's ``for_s`` here: it fires at the first poll that sees the crash."""
POLL_S = 0.3


async def test_a_server_killed_under_the_console_is_counted_rung_and_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_settings(f"[alerts.crashed]\nfor_s = {FOR_S}\nclear_s = 0\n")
    args = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics"]
    with running_sim(args, tmp_path) as sim:
        monitor = FleetMonitor(FleetSpec.from_ports((sim.port,), (0,)), SimulatedSource())
        app = FleetApp(
            LocalFleet(FleetOps(), monitor, watching=True, status_path=tmp_path / "none.json"),
            poll_interval_s=POLL_S,
        )
        app.alerts_on = True
        rung = count_bells(app, monkeypatch)
        try:
            async with app.run_test(size=(120, 40)) as pilot:

                def ready() -> bool:
                    panels = app.fleet.panels
                    return (
                        bool(panels)
                        and panels[0].server is not None
                        and (panels[0].server.state is ServerState.READY)
                    )

                await wait_for(pilot, ready, "the server ready on the grid", timeout=30)
                await wait_for(pilot, lambda: app.alert_runner is not None, "the runner")
                assert app.alert_runner is not None and app.alert_runner.publishing
                assert "alert" not in app.title and not rung
                os.killpg(sim.proc.pid, signal.SIGKILL)
                killed = asyncio.get_running_loop().time()
                await wait_for(pilot, lambda: bool(app.alerts_active), "the crash alert", 20)
                took = asyncio.get_running_loop().time() - killed
                (alert,) = app.alerts_active
                assert alert.rule == "crashed" and alert.gpu == 0
                # within the rule's time: for_s, a poll, the monitor's own reading of the exit
                assert took < FOR_S + FEED_EVERY_S + 10 * POLL_S + 5, took
                assert app.title.endswith("· 1 alert (!)")
                assert len(rung) == 1
                await pilot.press("exclamation_mark")
                await wait_for(pilot, lambda: isinstance(app.screen, AlertsScreen), "the list")
                await pilot.pause()
                text = str(app.screen.query_one("#alerts-list").render())
                assert f"crashed: {alert.message}" in text and "FIRING" in text
                assert "this console journals and posts them" in text
                await pilot.pause(3 * POLL_S)
                assert len(rung) == 1  # rung when it fired, not at every poll
        finally:
            await monitor.aclose()
    entries = read_journal(paths.alerts_journal_file()).entries
    assert [(e.detail["rule"], e.verdict, e.by) for e in entries] == [
        ("crashed", "firing", "console")
    ]


async def test_when_another_process_publishes_the_console_shows_and_posts_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_settings("[console]\nbell = false\n[alerts.crashed]\nfor_s = 0\n")
    agent = AlertRunner(default_config(), by="agent")  # holds the node's alerts' lock
    assert agent.publishing
    try:
        app = make_app(poll_interval_s=POLL_S)  # GPU 2's server failed with an OOM
        app.alerts_on = True
        rung = count_bells(app, monkeypatch)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app)
            await wait_for(pilot, lambda: bool(app.alerts_active), "the failed server's alert")
            assert [a.rule for a in app.alerts_active] == ["crashed"]
            assert not app.alerts_publishing and "1 alert (!)" in app.title
            await pilot.press("exclamation_mark")
            await wait_for(pilot, lambda: isinstance(app.screen, AlertsScreen), "the list")
            await pilot.pause()
            text = str(app.screen.query_one("#alerts-list").render())
            assert "posts nothing" in text and "FIRING" in text
        assert not rung  # [console] bell = false
    finally:
        agent.close()
    assert read_journal(paths.alerts_journal_file()).entries == ()  # the console posted nothing


async def test_bad_alert_settings_are_one_line_and_the_header_says_alerts_are_off() -> None:
    write_settings("[alerts.crashed]\nfor_s = -1\n")
    app = make_app(poll_interval_s=POLL_S)
    app.alerts_on = True
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await wait_for(pilot, lambda: bool(app.alerts_problem), "the settings' problem")
        assert "alerts.crashed.for_s = -1" in app.alerts_problem
        assert app.title.endswith("alerts off (settings)")
