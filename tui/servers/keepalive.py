"""A lean HTTP/1.1 keep-alive transport for httpx: the monitor's per-second probes.

Why: the console asks each of seven servers for ``/metrics`` every second, forever. httpx's
default transport (httpcore over anyio) spends about 1 ms of CPU per request on pool
bookkeeping, anyio stream wrappers and per-request connection health checks; that was half of
the console's own CPU. This transport keeps httpx's client API (URLs, timeouts, exceptions,
``Response``) and does the wire work with h11 (httpcore's own HTTP/1.1 state machine) over one
asyncio stream per idle connection: about 3x less CPU per probe (``bench/bench_console.py``).

Scope: plain ``http://`` (the servers listen on loopback or the node's own network), HTTP/1.1,
no proxies. Anything else is refused with :class:`httpx.UnsupportedProtocol`.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field

import h11
import httpx

_READ_BYTES = 256 * 1024


@dataclass(eq=False)
class _Connection:
    """One open socket and its h11 state (mutable; owned by one request at a time)."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    state: h11.Connection = field(default_factory=lambda: h11.Connection(h11.CLIENT))

    def reusable(self) -> bool:
        """Both sides finished a keep-alive exchange and the peer has not closed since."""
        return (
            self.state.our_state is h11.DONE
            and self.state.their_state is h11.DONE
            and not self.reader.at_eof()
            and not self.writer.is_closing()
        )

    def close(self) -> None:
        """Close the socket (idempotent; does not wait)."""
        self.writer.close()


class _StaleConnection(Exception):
    """A reused connection the peer had closed before answering: retry on a fresh one."""


def _timeouts(request: httpx.Request) -> tuple[float | None, float | None]:
    """The request's connect and read timeouts (httpx puts them in its extensions)."""
    timeout = request.extensions.get("timeout", {})
    return timeout.get("connect"), timeout.get("read")


class KeepAliveTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over asyncio streams with idle connections kept per host and port."""

    def __init__(self, max_idle_per_host: int = 2) -> None:
        """Args:
        max_idle_per_host: Idle connections kept per (host, port); more are closed on return.
        """
        self.max_idle_per_host = max_idle_per_host
        self._idle: defaultdict[tuple[str, int], list[_Connection]] = defaultdict(list)
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and read the whole response (probe bodies are small).

        Raises:
            httpx.UnsupportedProtocol: not ``http://``.
            httpx.ConnectError: the connection was refused or failed.
            httpx.ConnectTimeout: no connection within the connect timeout.
            httpx.ReadTimeout: no complete response within the read timeout.
            httpx.RemoteProtocolError: the peer broke HTTP/1.1 or closed mid-response.
        """
        if self._closed:
            raise RuntimeError("the transport is closed")
        if request.url.scheme != "http":
            raise httpx.UnsupportedProtocol(
                f"KeepAliveTransport serves http:// only, not {request.url.scheme}://",
                request=request,
            )
        key = (request.url.host, request.url.port or 80)
        body = await request.aread()
        while self._idle[key]:
            conn = self._idle[key].pop()
            if not conn.reusable():
                conn.close()
                continue
            try:
                return await self._exchange(conn, key, request, body, reused=True)
            except _StaleConnection:
                continue  # the server closed it while idle (a restart): try the next
        conn = await self._connect(key, request)
        try:
            return await self._exchange(conn, key, request, body, reused=False)
        except _StaleConnection as error:  # a fresh connection closed at once
            raise httpx.RemoteProtocolError(str(error), request=request) from None

    async def _connect(self, key: tuple[str, int], request: httpx.Request) -> _Connection:
        connect_timeout, _ = _timeouts(request)
        try:
            async with asyncio.timeout(connect_timeout):
                reader, writer = await asyncio.open_connection(key[0], key[1], limit=_READ_BYTES)
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"no connection to {key[0]}:{key[1]} within {connect_timeout}s", request=request
            ) from None
        except OSError as error:
            raise httpx.ConnectError(str(error), request=request) from None
        return _Connection(reader, writer)

    async def _exchange(
        self,
        conn: _Connection,
        key: tuple[str, int],
        request: httpx.Request,
        body: bytes,
        *,
        reused: bool,
    ) -> httpx.Response:
        """One request/response on ``conn``; ``conn`` is returned to the pool or closed."""
        _, read_timeout = _timeouts(request)
        state = conn.state
        if reused:
            state.start_next_cycle()
        keep = False
        try:
            head = h11.Request(
                method=request.method,
                target=request.url.raw_path,
                headers=list(request.headers.raw),
            )
            data = state.send(head) or b""
            if body:
                data += state.send(h11.Data(data=body)) or b""
            data += state.send(h11.EndOfMessage()) or b""
            conn.writer.write(data)
            try:
                async with asyncio.timeout(read_timeout):
                    response = await self._read(conn, reused)
            except TimeoutError:
                raise httpx.ReadTimeout(
                    f"no complete answer within {read_timeout}s", request=request
                ) from None
            except OSError as error:
                if reused:
                    raise _StaleConnection(str(error)) from None
                raise httpx.ReadError(str(error), request=request) from None
            except h11.RemoteProtocolError as error:
                raise httpx.RemoteProtocolError(str(error), request=request) from None
            keep = conn.reusable()
            return response
        finally:
            if keep and not self._closed and len(self._idle[key]) < self.max_idle_per_host:
                self._idle[key].append(conn)
            else:
                conn.close()

    @staticmethod
    async def _read(conn: _Connection, reused: bool) -> httpx.Response:
        state = conn.state
        head: h11.Response | None = None
        chunks: list[bytes] = []
        while True:
            event = state.next_event()
            if event is h11.NEED_DATA:
                data = await conn.reader.read(_READ_BYTES)
                if not data and reused and head is None:
                    raise _StaleConnection("the server closed the idle connection")
                state.receive_data(data)
            elif isinstance(event, h11.Response):
                head = event
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise h11.RemoteProtocolError("connection closed before the response ended")
        assert head is not None  # h11 yields the head before any body or end
        return httpx.Response(
            head.status_code,
            headers=list(head.headers),
            stream=httpx.ByteStream(b"".join(chunks)),
            extensions={"http_version": b"HTTP/" + head.http_version},
        )

    async def aclose(self) -> None:
        """Close every idle connection; the transport takes no requests after this."""
        self._closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
