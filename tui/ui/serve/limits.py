"""What ``gpufleet serve`` lets one client hold: connections per address, the time to send a
request's headers, and browser sessions.

aiohttp closes a connection that sends no complete request within its ``keepalive_timeout``
from the connection's start or its previous response (a request's headers unfinished count as
nothing sent): that setting, ``HEADER_TIMEOUT_S`` here, is both the header deadline and the
idle timeout. It has no limit per client address; ``GuardedProtocol`` wraps each connection's
aiohttp handler and holds the address to ``tui.servers.connections``'s table, a connection
counting as busy while a request of it is being answered (``busy_middleware``: a browser
session's websocket is, for the session's life).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tui.servers.connections import ConnectionTable

MAX_SESSIONS = 4
"""Default browser sessions at once: each runs a console (~50 MiB; 12 websockets were 12 consoles
and 621 MiB)."""
MAX_SESSIONS_RANGE = (1, 64)
"""What ``--max-sessions`` accepts."""
HEADER_TIMEOUT_S = 10.0
"""aiohttp's ``keepalive_timeout``: seconds a connection may take to send a whole request, from
its start or its previous response (its default is 75 s)."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Busy:
    """The transports whose request is being answered now (counted: a pipelined request
    may overlap its predecessor's end)."""

    def __init__(self) -> None:
        self._answering: dict[object, int] = {}

    def __contains__(self, transport: object) -> bool:
        return transport in self._answering

    def middleware(self) -> Any:
        """An aiohttp middleware that marks the request's transport busy while it is answered."""

        @web.middleware
        async def busy_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
            transport = request.transport
            self._answering[transport] = self._answering.get(transport, 0) + 1
            try:
                return await handler(request)
            finally:
                left = self._answering.pop(transport, 1) - 1
                if left:
                    self._answering[transport] = left

        return busy_middleware


class GuardedProtocol(asyncio.Protocol):
    """One connection: admitted by the table before aiohttp sees a byte of it.

    Args:
        inner: aiohttp's handler for the connection (``AppRunner.server()``).
        table: The connections of each client address.
        busy: Which transports are being answered.
    """

    def __init__(self, inner: asyncio.Protocol, table: ConnectionTable, busy: Busy) -> None:
        self._inner = inner
        self._table = table
        self._busy = busy
        self._transport: asyncio.BaseTransport | None = None
        self._address = ""
        self._admitted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Count the connection for its address (closing it when the address is full)."""
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self._address = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        if not self._table.admit(self._address, self):
            transport.close()
            return
        self._admitted = True
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget it; aiohttp ends its handler."""
        if self._admitted:
            self._table.release(self._address, self)
            self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """aiohttp parses it."""
        if self._admitted:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        """aiohttp decides."""
        return self._inner.eof_received() if self._admitted else None

    def pause_writing(self) -> None:
        """Flow control: aiohttp's."""
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        """Flow control: aiohttp's."""
        self._inner.resume_writing()

    def busy(self) -> bool:
        """A request of this connection is being answered."""
        return self._transport in self._busy

    def drop(self) -> None:
        """Close the connection (to make room for another of its address)."""
        if self._transport is not None:
            self._transport.close()
