"""The agent's counters route, for a canary judged across nodes: each GPU's cumulative output
tokens and finished requests, read now from its server's ``/metrics`` (the counters a canary's
sampler reads on one node, ``tui.rollout.sampling``), so a many-node console samples every node
over the same seconds.

======================================  ========================================================
``GET /api/v1/counters?gpus=0,1``         ``{"node", "counters": {"0": [tokens, requests,
                                          running, queued] | null}}`` (null: the server did
                                          not answer; the last two only where its
                                          ``/metrics`` has the gauges)
======================================  ========================================================
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tui.agent.coalesce import Coalesced
from tui.agent.requests import MAX_GPU, BadRequest
from tui.rollout.sampling import Counts, MetricsProbe
from tui.state.fleet_state import read_fleet

READ_TIMEOUT_S = 2.0
"""Seconds one server's ``/metrics`` may take (a slower one reads as not answering)."""


def parse_gpus(raw: str | None) -> tuple[int, ...]:
    """``0,1,5`` as GPU indices.

    Raises:
        BadRequest: missing, empty, or an entry that is not a GPU index (naming ``gpus``).
    """
    if not raw:
        raise BadRequest(f"gpus: give GPU indices, e.g. gpus=0,1 (0-{MAX_GPU})")
    out: set[int] = set()
    for part in raw.split(","):
        text = part.strip()
        if not text.isdigit() or not 0 <= int(text) <= MAX_GPU:
            raise BadRequest(f"gpus: {text!r} is not a GPU index (0-{MAX_GPU})")
        out.add(int(text))
    return tuple(sorted(out))


async def read_counters(
    gpus: tuple[int, ...], client: httpx.AsyncClient
) -> dict[int, Counts | None]:
    """Every GPU's counters now, each from the server the fleet state records for it.

    Args:
        gpus: The node's GPUs.
        client: HTTP client for the servers.

    Returns:
        GPU -> (tokens, requests), or None where no server is recorded or none answered.
    """
    state = await asyncio.to_thread(read_fleet)
    hosts: dict[str, dict[int, int]] = {}
    for gpu in gpus:
        known = state.get(gpu)
        if known is not None and known.port is not None:
            hosts.setdefault(known.host, {})[gpu] = known.port
    out: dict[int, Counts | None] = dict.fromkeys(gpus)
    for host, ports in hosts.items():
        probe = MetricsProbe(ports, host, client, timeout=READ_TIMEOUT_S)
        out.update(await probe.read(sorted(ports)))
    return out


class CountersReader:
    """Every GPU's counters for the API, read by one shared client, once for all the callers
    that ask for the same GPUs at the same time (``Coalesced``: a caller that arrives while a
    read runs gets that read's counters, at most one read older than its own would have been).

    Memory is bounded by design: one HTTP client (its pool holds one keep-alive connection per
    server), one read in flight per distinct GPU set, nothing kept after it.
    """

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None
        self._reads: Coalesced[tuple[int, ...], dict[int, Counts | None]] = Coalesced(self._read)

    async def _read(self, gpus: tuple[int, ...]) -> dict[int, Counts | None]:
        if self._client is None:
            # Plain http to the node's own servers: no TLS context to build per client.
            self._client = httpx.AsyncClient(verify=False)
        return await read_counters(gpus, self._client)

    async def read(self, gpus: tuple[int, ...]) -> dict[int, Counts | None]:
        """GPU -> (tokens, requests), or None where no server answered."""
        return await self._reads.get(gpus)

    async def aclose(self) -> None:
        """Close the client (the agent is stopping)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def counters_routes(reader: CountersReader, node: str, guarded: Any) -> list[Route]:
    """The counters route, behind ``guarded`` (the token; a read, so read-only mode serves it).

    Args:
        reader: The agent's counters reader.
        node: The node's name (in the answer).
        guarded: The app's guard.

    Returns:
        The routes.
    """

    async def counters(request: Request) -> Response:
        gpus = parse_gpus(request.query_params.get("gpus"))
        values = await reader.read(gpus)
        body = {str(g): list(v) if v is not None else None for g, v in values.items()}
        return JSONResponse({"node": node, "counters": body})

    return [Route("/api/v1/counters", guarded(counters), methods=["GET"])]
