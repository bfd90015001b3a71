"""A profile document through the agent's API is judged off the event loop and names at most
256 GPUs (issue 36): four preflights of a 10,000-GPU profile (59 KB, under the body limit)
held ``/metrics`` for 26.8 s when the check ran on the loop. The agent's app in-process, over
httpx's ASGI transport: the check is held on an event until ``/metrics`` has answered, so a
check on the loop would never let it answer."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tui.agent import requests
from tui.agent.app import build_app
from tui.agent.server import Agent, AgentConfig
from tui.fleet.monitor import FleetMonitor
from tui.gpu.simulated import SimulatedSource
from tui.ops.demo import spec_for_profile
from tui.ops.service import FleetOps
from tui.profiles import load_named, profile_to_dict
from tui.servers.tokens import AgentToken

pytestmark = [pytest.mark.timeout(60)]

TOKEN = "preflight-limits-token-0123456789"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture()
async def client() -> AsyncIterator[httpx.AsyncClient]:
    profile = load_named("sim-baseline")
    monitor = FleetMonitor(spec_for_profile(profile), SimulatedSource())
    agent = Agent(AgentConfig("n1", (AgentToken(TOKEN, "admin"),)), monitor, FleetOps(profile))
    transport = httpx.ASGITransport(app=build_app(agent))
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
        yield http
    await monitor.aclose()


def _document(gpus: int) -> dict[str, Any]:
    doc = profile_to_dict(load_named("sim-baseline"))
    doc["fleet"] = {**doc["fleet"], "gpus": list(range(gpus))}
    doc["fleet"].pop("ports", None)
    doc.pop("gpu", None)
    return doc


async def test_the_check_runs_off_the_loop(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = threading.Event(), threading.Event()
    released: list[bool] = []
    real = requests.profile_from_dict

    def held(*args: Any, **kwargs: Any) -> Any:
        started.set()
        released.append(release.wait(20))  # on the loop, /metrics could not answer meanwhile
        return real(*args, **kwargs)

    monkeypatch.setattr(requests, "profile_from_dict", held)
    body = {"profile": _document(2), "gpus": [0]}
    preflight = asyncio.ensure_future(client.post("/api/v1/preflight", json=body, headers=HEADERS))
    deadline = asyncio.get_running_loop().time() + 20
    while not started.is_set():
        assert asyncio.get_running_loop().time() < deadline, "the check never started"
        await asyncio.sleep(0.01)
    metrics = await client.get("/metrics", headers=HEADERS)
    assert metrics.status_code == 200
    release.set()
    answer = await preflight
    assert answer.status_code == 200, answer.text
    assert released == [True]


async def test_a_profile_of_more_gpus_than_the_api_takes_is_one_line(
    client: httpx.AsyncClient,
) -> None:
    body = {"profile": _document(10_000), "gpus": [0]}
    answer = await client.post("/api/v1/preflight", json=body, headers=HEADERS)
    assert answer.status_code == 400
    assert answer.json()["error"] == (
        "profile: fleet.gpus: 10000 entries; at most 256 through the agent"
    )
    doc = _document(2)
    doc["fleet"]["gpus"] = [0, 300]
    answer = await client.put("/api/v1/profiles/big", json={"profile": doc}, headers=HEADERS)
    assert answer.status_code == 400, answer.text
    assert "GPU 300 is not a GPU index (0-255)" in answer.json()["error"]
