"""The dispatcher's HTTP: a prompt's POST and a server's health probe, on the cheapest path.

Requests to a plain ``http://`` server (the fleet's, on loopback or the node's network) go
through one ``KeepAliveTransport`` (``tui.servers.keepalive``): a request head built once per
server and path, then the body, and the answer read with a few ``bytes`` operations, at about a
tenth of the CPU of httpx's client, pool and h11 (``python -m bench dispatch``: 1.1-1.4 ms of
CPU a request through httpx, 0.1-0.2 ms here). An ``https://`` server, or one that a proxy
variable in the environment routes, goes through small ``httpx.AsyncClient``s (8 connections
each, see ``ClientPool``), made only when some server needs them (each loads the CA bundle,
~70 ms). The request timeout bounds the whole answer on the first path and each read on the
second: a non-streamed answer arrives in one piece, so both bound the time to the answer.
"""

from __future__ import annotations

import urllib.request
from urllib.parse import urlsplit

import httpx

from tui import plain
from tui.pipeline.client_pool import ClientPool
from tui.servers.keepalive import Answer, lean_transport
from tui.servers.probe import HEALTH_TIMEOUT_S

Route = tuple[str, int, str]
"""(host, port, path prefix) of a server reached through the keep-alive transport."""

CONNECT_TIMEOUT_S = 5.0
"""How long a request or a probe waits for its connection."""
_HEADERS = {"content-type": "application/json"}


def lean_route(url: str) -> Route | None:
    """(host, port, path prefix) of a server the keep-alive transport can reach, else None.

    It speaks plain HTTP/1.1 straight to the server: an ``https://`` URL, or one that a proxy
    variable (``http_proxy``, ``all_proxy``, not bypassed by ``no_proxy``) sends through a proxy
    as httpx would, goes through httpx instead; so does every URL with
    ``GPUFLEET_PLAIN=keepalive`` (``tui.plain``).

    Args:
        url: the server's base URL.

    Returns:
        Its route, or None for httpx.
    """
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or plain.off("keepalive"):
        return None
    proxies = urllib.request.getproxies()
    if ("http" in proxies or "all" in proxies) and not urllib.request.proxy_bypass(parts.netloc):
        return None
    return parts.hostname, parts.port or 80, parts.path.rstrip("/")


class Sender:
    """Sends the dispatcher's requests; every method raises httpx's errors.

    Raises (every method):
        httpx.TimeoutException: no connection or no whole answer in time.
        httpx.TransportError: the connection failed or the answer broke HTTP/1.1.
    """

    def __init__(self, httpx_servers: int, per_server_inflight: int, request_timeout: float):
        """Args:
        httpx_servers: how many servers have no route (the httpx clients are sized for them).
        per_server_inflight: most requests in flight per server.
        request_timeout: seconds a request may wait for its answer.
        """
        self._request_timeout = request_timeout
        # Idle connections kept per server: as many as it may have requests in flight (None
        # where every server goes through httpx: ``lean_route``).
        self._lean = lean_transport(per_server_inflight)
        self._clients: ClientPool | None = None
        self._probe_client: httpx.AsyncClient | None = None
        if httpx_servers:
            timeout = httpx.Timeout(request_timeout, connect=CONNECT_TIMEOUT_S)
            self._clients = ClientPool(per_server_inflight * httpx_servers, timeout)
            health = httpx.Timeout(HEALTH_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
            self._probe_client = httpx.AsyncClient(timeout=health)

    async def post(
        self, url: str, route: Route | None, path: str, body: bytes
    ) -> tuple[int, bytes]:
        """POST a JSON body to a server.

        Args:
            url: the server's base URL.
            route: its route, or None (httpx).
            path: the endpoint's path.
            body: the JSON body.

        Returns:
            (status, body) of the answer.
        """
        if route is not None and self._lean is not None:
            answer = await self._send(route, "POST", path, body, self._request_timeout)
            return answer.status, answer.body
        assert self._clients is not None
        with self._clients.lease() as client:
            response = await client.post(url + path, content=body, headers=_HEADERS)
        return response.status_code, response.content

    async def health(self, url: str, route: Route | None) -> int:
        """The status of ``GET /health`` on a server (args as ``post``)."""
        if route is not None and self._lean is not None:
            return (await self._send(route, "GET", "/health", b"", HEALTH_TIMEOUT_S)).status
        assert self._probe_client is not None
        return (await self._probe_client.get(url + "/health")).status_code

    async def _send(
        self, route: Route, method: str, path: str, body: bytes, read_timeout: float
    ) -> Answer:
        """One request through the keep-alive transport, on its route."""
        assert self._lean is not None
        host, port, prefix = route
        return await self._lean.send(
            host,
            port,
            method,
            prefix + path,
            body,
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=read_timeout,
        )

    async def aclose(self) -> None:
        """Close every connection and client."""
        if self._lean is not None:
            await self._lean.aclose()
        if self._clients is not None:
            await self._clients.aclose()
        if self._probe_client is not None:
            await self._probe_client.aclose()
