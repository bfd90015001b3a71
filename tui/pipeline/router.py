"""The job through SGLang's own router (``sglang-router`` / ``smg``): the pipeline sends every
request to the router, and keeps the router's worker list equal to the fleet's ready servers.

Once a second (``WorkerSync.run``) the wanted workers are read from their source and the router
is told the difference through its own API (sglang-router 0.3.2: ``GET /workers`` lists them,
``POST /workers {"url": ...}`` queues a registration, ``DELETE /workers/{id}`` a removal). The
sources:

- the nodes' agents (``--agents``): every server an agent shows READY, at the agent's host and the
  server's port; a server being stopped (STOPPING) is removed before its drain ends, and a node
  whose agent does not answer keeps its workers as they are;
- else the ``--server`` URLs: those whose ``GET /health`` answers 200 and that no local cordon
  closes.

The pipeline's exactly-once bookkeeping (the done record by ``custom_id``) is unchanged: the
router spreads and retries requests, the pipeline still commits each id once.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from tui.servers.probe import HEALTH_TIMEOUT_S
from tui.state.cordons import CordonWatch, address_of

SYNC_INTERVAL_S = 1.0
"""Seconds between two reconciliations of the router's workers."""
CORDON_LOOK_S = 0.1
"""Between reconciliations, how often the cordon file is looked at (a stat)."""
REGISTER_WAIT_S = 15.0
"""A queued registration not listed after this long is asked for again."""


@dataclass(frozen=True, slots=True)
class Wanted:
    """What a source says the router should route to."""

    urls: frozenset[str]
    """Worker base URLs that should be registered."""
    unknown_hosts: frozenset[str] = frozenset()
    """Hosts whose state is unknown this time (their workers are left as they are)."""


Source = Callable[[], Awaitable[Wanted]]
"""Returns the workers the router should have now."""


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def agents_source(
    agents: Sequence[tuple[str, str]], token: str, client: httpx.AsyncClient
) -> Source:
    """Ready servers as the nodes' agents see them.

    Args:
        agents: (agent base URL, the host its servers are reached at) per node.
        token: The agents' bearer token.
        client: HTTP client.

    Returns:
        The source.
    """
    headers = {"authorization": f"Bearer {token}"}

    async def one(base: str, host: str) -> set[str] | None:
        try:
            response = await client.get(f"{base}/api/v1/snapshot", headers=headers, timeout=3.0)
            panels = response.json()["snapshot"]["panels"] if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return None
        if not isinstance(panels, list):
            return None
        ready = set()
        for panel in panels:
            server = panel.get("server") if isinstance(panel, dict) else None
            if isinstance(server, dict) and server.get("state") == "ready":
                ready.add(f"http://{host}:{int(server['port'])}")
        return ready

    async def wanted() -> Wanted:
        answers = await asyncio.gather(*(one(base, host) for base, host in agents))
        urls: set[str] = set()
        unknown: set[str] = set()
        for (_, host), answer in zip(agents, answers, strict=True):
            if answer is None:
                unknown.add(host.lower())
            else:
                urls |= answer
        return Wanted(frozenset(urls), frozenset(unknown))

    return wanted


def servers_source(urls: Sequence[str], client: httpx.AsyncClient) -> Source:
    """The given servers that answer ``/health`` with 200 and that no local cordon closes."""
    cordons = CordonWatch()

    async def healthy(url: str) -> bool:
        try:
            response = await client.get(f"{url}/health", timeout=HEALTH_TIMEOUT_S)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def wanted() -> Wanted:
        closed = cordons.current()
        answers = await asyncio.gather(*(healthy(u) for u in urls))
        ok = {u for u, up in zip(urls, answers, strict=True) if up and _cordon_key(u) not in closed}
        return Wanted(frozenset(ok))

    return wanted


def _cordon_key(url: str) -> str:
    parts = urlsplit(url)
    return address_of(parts.hostname or "", parts.port or 80)


@dataclass
class WorkerSync:
    """Keeps a router's workers equal to what ``source`` wants.

    Args:
        router: The router's base URL.
        source: Where the wanted workers come from.
        client: HTTP client.
        on_change: Called with the number of registered workers after each reconciliation.
    """

    router: str
    source: Source
    client: httpx.AsyncClient
    on_change: Callable[[int], None] = lambda count: None
    on_synced: Callable[[frozenset[str]], None] = lambda urls: None
    """Told, after each reconciliation, the workers the router has or is registering: every
    other server gets nothing new through it (the job's acknowledgement of a cordon)."""
    pending: dict[str, float] = field(default_factory=dict)
    """Worker URL -> when its registration was queued (the router adds it in the background)."""
    registered: dict[str, str] = field(default_factory=dict)
    """Worker URL -> the router's id for it, as of the last reconciliation."""
    last_error: str = ""
    """Why the last reconciliation failed ("" when it did not)."""

    async def workers(self) -> dict[str, str]:
        """The router's workers: URL -> id.

        Raises:
            httpx.HTTPError: the router cannot be reached or answered an error.
        """
        response = await self.client.get(f"{self.router}/workers", timeout=5.0)
        response.raise_for_status()
        listed: Any = response.json().get("workers", [])
        return {
            str(w["url"]).rstrip("/"): str(w["id"])
            for w in listed
            if isinstance(w, dict) and "url" in w and "id" in w
        }

    async def reconcile(self) -> None:
        """One reconciliation: register what is wanted and missing, remove what is not wanted."""
        wanted = await self.source()
        current = await self.workers()
        now = time.monotonic()
        for url in list(self.pending):
            if url in current or now - self.pending[url] > REGISTER_WAIT_S:
                del self.pending[url]
        for url in sorted(wanted.urls - set(current) - set(self.pending)):
            self.pending[url] = now
            response = await self.client.post(
                f"{self.router}/workers", json={"url": url}, timeout=5.0
            )
            response.raise_for_status()
        for url, worker_id in sorted(current.items()):
            if url in wanted.urls or _host(url) in wanted.unknown_hosts:
                continue
            response = await self.client.delete(f"{self.router}/workers/{worker_id}", timeout=5.0)
            if response.status_code != 404:  # already gone is fine
                response.raise_for_status()
        self.registered = await self.workers()
        self.on_change(len(self.registered))
        self.on_synced(frozenset(self.registered) | frozenset(self.pending))

    async def run(self, interval_s: float = SYNC_INTERVAL_S) -> None:
        """Reconcile every ``interval_s`` until cancelled, and at once when the cordons change
        (a stop waits for the cordoned worker to leave the router); a failed round is retried
        next time."""
        cordons = CordonWatch()
        while True:
            closed = cordons.current()  # before: a cordon written during the round is seen
            try:
                await self.reconcile()
                if self.last_error:
                    print("gpufleet generate: router workers in sync again", file=sys.stderr)
                self.last_error = ""
            except (httpx.HTTPError, ValueError) as error:
                reason = f"router {self.router}: {type(error).__name__}: {error}"
                if reason != self.last_error:
                    print(f"gpufleet generate: {reason}", file=sys.stderr, flush=True)
                self.last_error = reason
            due = time.monotonic() + interval_s
            try:
                # A poll of a file other processes write, a stat per look: not a stand-in for
                # an event (there is none to wait for across processes).
                while time.monotonic() < due and cordons.current() == closed:
                    await asyncio.sleep(CORDON_LOOK_S)
            except asyncio.CancelledError:
                return
