"""The dispatcher's httpx clients (https and proxied servers): several small ones, not one pool."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx

CONNECTIONS_PER_CLIENT = 8
"""Connections per httpx client. httpx's pool costs CPU per request in proportion to the requests
it holds (encode/httpx#3215): 48 in flight through one client ran 385 req/s on one core here,
through six clients of 8 connections 1,247 req/s, for the same server and requests."""


class ClientPool:
    """Several small httpx clients; each request leases the least busy one."""

    def __init__(self, concurrency: int, timeout: httpx.Timeout) -> None:
        """Enough clients of CONNECTIONS_PER_CLIENT connections for ``concurrency`` requests."""
        count = max(1, -(-concurrency // CONNECTIONS_PER_CLIENT))
        limits = httpx.Limits(
            max_connections=CONNECTIONS_PER_CLIENT,
            max_keepalive_connections=CONNECTIONS_PER_CLIENT,
        )
        self.clients = [httpx.AsyncClient(limits=limits, timeout=timeout) for _ in range(count)]
        """The clients."""
        self._active = [0] * count

    @contextlib.contextmanager
    def lease(self) -> Iterator[httpx.AsyncClient]:
        """The least busy client, held for one request."""
        slot = min(range(len(self._active)), key=self._active.__getitem__)
        self._active[slot] += 1
        try:
            yield self.clients[slot]
        finally:
            self._active[slot] -= 1

    async def aclose(self) -> None:
        """Close every client."""
        for client in self.clients:
            await client.aclose()
