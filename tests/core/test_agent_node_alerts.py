"""The agent's snapshot carries the node's firing alerts and the job's energy ledger (issue 38):
through its codec, typed, to the many-node console's client; an agent before them sends neither,
and its answer still reads (no alerts, no ledger). The agent's app in-process over httpx's ASGI
transport; the views a console merges name each alert's node (``alerts_of``) and take the job's
node's ledger (``energy_of``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from ui_helpers import pipeline_status

from core.test_ops_status_observed import snapshot
from tui.agent.app import build_app
from tui.agent.client import AgentAddress, AgentClient, AgentError, NodeView
from tui.agent.metrics import AgentView
from tui.agent.node_views import alerts_of, energy_of
from tui.agent.server import Agent, AgentConfig
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import NODE_STRIDE, FleetSnapshot
from tui.gpu.simulated import SimulatedSource
from tui.ops.alerts.engine import AlertFired
from tui.ops.demo import spec_for_profile
from tui.ops.service import FleetOps
from tui.pipeline.energy import JobEnergy
from tui.profiles import load_named
from tui.servers.tokens import AgentToken

pytestmark = [pytest.mark.timeout(60)]

TOKEN = "node-alerts-token-0123456789abcdef"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
CRASH = AlertFired(
    "crashed", "GPU 1", 1, "GPU 1 server on :30001 crashed: killed by SIGKILL", 1000.5, 1000.0
)
STALLED = AlertFired("job_stalled", "job", None, "job stalled: 5/9 done", 990.0, 900.0)
LEDGER = JobEnergy(1, "job-7", 7.2e6, 9_000_000, 2, 2, False, 6300.0, 1001.0)


@pytest.fixture()
async def agent() -> AsyncIterator[Agent]:
    profile = load_named("sim-baseline")
    monitor = FleetMonitor(spec_for_profile(profile), SimulatedSource())
    node = Agent(AgentConfig("n2", (AgentToken(TOKEN, "read"),)), monitor, FleetOps(profile))
    yield node
    await monitor.aclose()


def _client(transport: httpx.AsyncBaseTransport) -> tuple[AgentClient, httpx.AsyncClient]:
    http = httpx.AsyncClient(transport=transport)
    return AgentClient(AgentAddress("agent", 9400), TOKEN, http), http


async def test_the_alerts_and_the_ledger_cross_typed_and_an_old_agents_answer_reads(
    agent: Agent,
) -> None:
    agent.view = AgentView("n2", snapshot(), alerts=(STALLED, CRASH), job_energy=LEDGER, polls=1)
    client, http = _client(httpx.ASGITransport(app=build_app(agent)))
    async with http:
        view = await client.snapshot()
        raw = (await http.get("http://agent:9400/api/v1/snapshot", headers=HEADERS)).json()
    assert view.alerts == (STALLED, CRASH)
    assert view.job_energy == LEDGER
    assert [a["_t"] for a in raw["alerts"]] == ["AlertFired", "AlertFired"]

    # An agent before issue 38: the same answer without the two keys.
    old = {k: v for k, v in raw.items() if k not in ("alerts", "job_energy")}
    client, http = _client(httpx.MockTransport(lambda _: httpx.Response(200, json=old)))
    async with http:
        view = await client.snapshot()
    assert view.alerts == () and view.job_energy is None and view.node == "n2"


async def test_an_alert_that_does_not_fit_is_named(agent: Agent) -> None:
    agent.view = AgentView("n2", snapshot(), polls=1)
    client, http = _client(httpx.ASGITransport(app=build_app(agent)))
    async with http:
        raw = (await http.get("http://agent:9400/api/v1/snapshot", headers=HEADERS)).json()
    raw["alerts"] = [{"_t": "AlertFired", "rule": "crashed", "subject": "GPU 1"}]
    body = json.dumps(raw).encode()
    client, http = _client(httpx.MockTransport(lambda _: httpx.Response(200, content=body)))
    async with http:
        with pytest.raises(AgentError, match=r"does not fit \(alerts\[0\]\.gpu: missing\)$"):
            await client.snapshot()


def test_the_console_names_each_alerts_node_and_takes_the_jobs_nodes_ledger() -> None:
    other = JobEnergy(1, "old-job", 1.0, 1, 1, 1, True, None, 1.0)
    views: list[NodeView | None] = [
        NodeView(
            "n1",
            False,
            FleetSnapshot(),
            alerts=(STALLED,),
            job_energy=other,
            pipeline=pipeline_status(updated_at=10.0),
        ),
        None,  # never answered
        NodeView(
            "n3",
            False,
            FleetSnapshot(),
            alerts=(CRASH,),
            job_energy=LEDGER,
            pipeline=pipeline_status(updated_at=20.0),
        ),
    ]
    crash, stalled = alerts_of(views)[1], alerts_of(views)[0]
    assert crash.subject == "n3 GPU 1" and crash.gpu == 2 * NODE_STRIDE + 1
    assert crash.message == "n3 GPU 1 server on :30001 crashed: killed by SIGKILL"
    assert (crash.since, crash.at) == (CRASH.since, CRASH.at)
    assert stalled.subject == "n1 job" and stalled.gpu is None
    assert stalled.message == "n1 job stalled: 5/9 done"
    assert energy_of(views) is LEDGER  # n3's status document is the newer: its job
    assert energy_of([views[0], None]) is other
    assert energy_of([NodeView("n1", False, FleetSnapshot(), job_energy=LEDGER)]) is None
