"""The agent's counters carry each server's running and queued requests beside its tokens (a
canary judged across nodes reads the load as one node's canary does); an older agent's two
values still read, without the load; any other shape is one line naming the node."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tui.agent.client import AgentClient, AgentError, parse_agents
from tui.rollout.sampling import Load, load_of


def client_answering(counters: dict[str, Any]) -> AgentClient:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/counters"
        return httpx.Response(200, json={"node": "n1", "counters": counters})

    (address,) = parse_agents("127.0.0.1:9")
    return AgentClient(address, "t", httpx.AsyncClient(transport=httpx.MockTransport(answer)))


async def test_counters_with_and_without_the_load() -> None:
    now = await client_answering({"0": [100, 2, 16, 32], "1": [50, 1], "2": None}).counters(
        [0, 1, 2]
    )
    assert now == {0: (100.0, 2.0, 16.0, 32.0), 1: (50.0, 1.0), 2: None}
    assert load_of(now[0]) == Load(16.0, 32.0)
    assert load_of(now[1]) is None and load_of(now[2]) is None


async def test_counters_of_another_shape_do_not_fit() -> None:
    with pytest.raises(AgentError, match=r"node 127.0.0.1:9: its counters do not fit \(3 values"):
        await client_answering({"0": [100, 2, 16]}).counters([0])
