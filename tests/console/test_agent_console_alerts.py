"""The console over many nodes shows the alerts their agents fire and the job's energy (issue
38): a simulated server SIGKILLed on node 2 under two real agents on loopback: the console
counts the crash in its header, rings once and lists it under ``!`` naming the node, while it
journals and posts nothing itself (node 2's agent does); the generation pane's job energy line
from the ledger beside the job's node's status document. And, on fixed data, the bell off
(``[console] bell = false``) and an alert that clears on its node listed as resolved."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest
from node_helpers import Node, nodes, server_pid
from ui_helpers import (
    RecordingFleet,
    count_bells,
    pipeline_status,
    settle,
    wait_for,
    write_settings,
)

from tui import paths
from tui.agent.client import parse_agents
from tui.agent.nodes import Nodes
from tui.ops.alerts.engine import AlertFired
from tui.ops.journal import read_journal
from tui.pipeline.energy import JobEnergy, ledger_path, write_ledger
from tui.pipeline.status import write_status
from tui.ui.alerts.alerts_screen import AlertsScreen
from tui.ui.alerts.host import FEED_EVERY_S
from tui.ui.app import FleetApp
from tui.ui.pipeline.energy_line import JobEnergyLine

pytestmark = [pytest.mark.timeout(240)]

POLL_S = 0.5
"""The console's poll (the agents build a view every 0.5 s: ``node_helpers``)."""


def _kill_server(node: Node, gpu: int) -> None:
    """SIGKILL the simulated server's process group, once its pid is verified as this node's
    server on its port (the fleet state's record, the process's command line)."""
    pid = server_pid(node, gpu)
    cmdline = psutil.Process(pid).cmdline()
    assert "sim" in cmdline and str(node.ports[gpu]) in cmdline, cmdline
    assert os.getpgid(pid) == pid  # its own session: the group is the server and its children
    os.killpg(pid, signal.SIGKILL)


def _list_text(app: FleetApp) -> str:
    return str(app.screen.query_one("#alerts-list").render())


async def test_a_server_killed_on_node_2_is_counted_rung_and_listed_naming_its_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_settings("[alerts.crashed]\nfor_s = 0\nclear_s = 0\n")
    with nodes(tmp_path, count=2, gpus=1, speed=20.0, startup_s=1.0) as (n1, n2):
        token = n1.token_file.read_text().strip()
        backend = Nodes(parse_agents(f"{n1.agent_address},{n2.agent_address}"), token)
        app = FleetApp(backend, node_groups=True, poll_interval_s=POLL_S)
        rung = count_bells(app, monkeypatch)
        try:
            async with app.run_test(size=(160, 50)) as pilot:
                await wait_for(pilot, lambda: len(app.fleet.panels) == 2, "both nodes' panels", 60)
                await pilot.pause(FEED_EVERY_S + 2 * POLL_S)  # fed at least once: nothing fires
                assert "alert" not in app.title and not app.alerts_active and not rung
                _kill_server(n2, 0)
                killed = time.monotonic()
                await wait_for(pilot, lambda: bool(app.alerts_active), "the crash alert", 60)
                took = time.monotonic() - killed
                (alert,) = app.alerts_active
                assert alert.rule == "crashed" and alert.subject == "n2 GPU 0"
                assert alert.message.startswith(f"n2 GPU 0 server on :{n2.ports[0]} crashed")
                assert alert.gpu == 100  # the console's number of n2's GPU 0
                assert app.title.endswith("· 1 alert (!)")
                assert len(rung) == 1
                await pilot.press("exclamation_mark")
                await wait_for(pilot, lambda: isinstance(app.screen, AlertsScreen), "the list")
                await pilot.pause()
                text = _list_text(app)
                assert f"crashed: n2 GPU 0 server on :{n2.ports[0]} crashed" in text
                assert "FIRING" in text and "the nodes' agents run these alerts" in text
                await pilot.pause(FEED_EVERY_S + 2 * POLL_S)
                assert len(rung) == 1  # rung when it fired, not at every feed
        finally:
            await backend.aclose()
        # within the rule's time (0 s) plus the polls: the monitor's reading of the exit, the
        # agent's view, the console's poll and feed; generous, the cores are busy
        assert took < FEED_EVERY_S + 30, took
        # Node 2's agent journalled it; the console took no lock and journalled nothing.
        n2_journal = read_journal(n2.root / "state" / "alerts.jsonl").entries
        assert [(e.detail["rule"], e.by) for e in n2_journal] == [("crashed", "agent")]
        assert not paths.alerts_journal_file().exists()
        assert not paths.alerts_lock_file().exists()


async def test_the_job_energy_line_on_a_many_node_console_is_the_jobs_nodes_ledger(
    tmp_path: Path,
) -> None:
    with nodes(tmp_path, count=2, gpus=1, agents=False) as (n1, n2):
        status = n2.root / "job" / "status.json"
        status.parent.mkdir()
        job = pipeline_status(updated_at=time.time())
        write_status(status, job)
        ledger = JobEnergy(1, "job-1", 7.2e6, 9_000_000, 2, 2, True, 600.0, time.time())
        write_ledger(ledger_path(status), ledger)
        n1.start_agent("--no-alerts")
        n2.start_agent("--no-alerts", "--status", str(status))
        token = n1.token_file.read_text().strip()
        backend = Nodes(parse_agents(f"{n1.agent_address},{n2.agent_address}"), token)
        app = FleetApp(backend, node_groups=True, poll_interval_s=POLL_S)
        try:
            async with app.run_test(size=(160, 50)) as pilot:
                screen = app.main_screen
                await wait_for(
                    pilot, lambda: screen.pipeline_status is not None, "n2's job in the pane", 60
                )
                await pilot.press("g")

                def energy() -> str:
                    return str(screen.query_one(JobEnergyLine).render())

                await wait_for(pilot, lambda: "job energy" in energy(), "the job's energy", 60)
                assert energy().startswith("job energy: 2.00 kWh for 9,000,000 tokens, 1.25 tok/J")
                assert "(2 runs)" in energy()
        finally:
            await backend.aclose()


def _firing(at: float) -> AlertFired:
    return AlertFired(
        "crashed", "n2 GPU 0", 100, "n2 GPU 0 server on :30000 crashed: exit code 1", at, at
    )


async def test_the_bell_setting_is_honoured_and_a_cleared_alert_is_listed_resolved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_settings("[console]\nbell = false\n")
    port = RecordingFleet(nodes_firing=())
    app = FleetApp(port, poll_interval_s=0.2)
    app.alerts_on = True  # as a local console's command sets it: still no rules run here
    rung = count_bells(app, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert app.alerts_from_nodes and app.alert_runner is None
        port.nodes_firing = (_firing(time.time()),)
        await wait_for(pilot, lambda: bool(app.alerts_active), "the node's alert", 20)
        assert app.title.endswith("· 1 alert (!)")
        await pilot.press("exclamation_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, AlertsScreen), "the list")
        port.nodes_firing = ()
        await wait_for(pilot, lambda: "resolved 20" in _list_text(app), "resolved", 20)
        text = _list_text(app)
        assert "crashed: n2 GPU 0 server on :30000 crashed: exit code 1" in text
        assert "nothing fires" in text and "alert" not in app.title
    assert not rung  # [console] bell = false
    assert app.alert_runner is None and not paths.alerts_journal_file().exists()
