"""A lean HTTP/1.1 keep-alive client for the monitor's per-second probes (and an httpx transport).

Why: the console asks each of seven servers for ``/metrics`` every second, forever. httpx's
default transport (httpcore over anyio) spent about 1 ms of CPU per request; h11 under httpx's
``Response`` still 0.4-0.5 ms on the 2-core machine, a quarter of the console's CPU with seven
servers. A probe's exchange is the simplest HTTP/1.1 there is (a GET without a body, one answer
framed by ``Content-Length`` or chunked, on loopback), so :meth:`KeepAliveTransport.fetch` writes
a request built once per path on a kept connection and reads the answer with a few ``bytes``
operations in an ``asyncio.Protocol``: no event objects, no header normalisation, no response
object. :meth:`KeepAliveTransport.handle_async_request` serves httpx clients over the same wire
code (a body, any method), so the monitor and the tests share one path.

Scope: plain ``http://`` (the servers listen on loopback or the node's own network), HTTP/1.1
answers framed by ``Content-Length``, chunked, or the end of the connection; no proxies, no
compression (none is asked for). Anything else is refused with :class:`httpx.UnsupportedProtocol`
or :class:`httpx.RemoteProtocolError`.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import dataclass

import httpx

from tui import plain

MAX_CONNECTION_AGE_S = 5.0
"""A kept connection is closed instead of reused once this old. Why: uvicorn (SGLang's server)
shuts down by closing its listener and then each connection it knows; one accepted in that same
loop iteration is never told, and the shutdown waits for it to close, which a client asking every
second never lets happen (the server's 5 s keep-alive timeout never fires). A monitor whose
probe reconnected at that moment held a draining server up until the stop's deadline and its
SIGKILL. Recycled this often, it releases such a server within seconds, at one loopback connect
per server per 5 s."""
MAX_HEAD_BYTES = 64 * 1024
"""A response head larger than this is refused (a probe's head is a few hundred bytes)."""
NO_BODY_STATUS = frozenset({204, 304})
"""Statuses that never carry a body (RFC 9112 6.3)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP response, read whole."""

    status: int
    """The status code."""
    headers: tuple[tuple[bytes, bytes], ...]
    """Header names (lower case) and values, in order."""
    body: bytes
    """The body, de-chunked."""


class _Closed(Exception):
    """The peer closed the connection; ``started`` says whether any answer byte had arrived."""

    def __init__(self, started: bool) -> None:
        super().__init__("the server closed the connection")
        self.started = started


class _Wire(asyncio.Protocol):
    """One connection: bytes in a buffer, a waiter woken when more arrive or the peer closes."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.closed = False
        self.received = 0
        """Bytes received since the current request was written."""
        self.opened = time.monotonic()
        """When the connection was made (``MAX_CONNECTION_AGE_S``)."""
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.received += len(data)
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def more(self) -> None:
        """Wait for more bytes. Raises ``_Closed`` when the peer closed instead."""
        if self.closed:
            raise _Closed(self.received > 0)
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None
        if self.closed and not self.buffer:
            raise _Closed(self.received > 0)

    def reusable(self) -> bool:
        """Open, idle, younger than ``MAX_CONNECTION_AGE_S`` and with nothing unasked-for in
        the buffer."""
        transport = self.transport
        return (
            not self.closed
            and not self.buffer
            and transport is not None
            and not transport.is_closing()
            and time.monotonic() - self.opened < MAX_CONNECTION_AGE_S
        )

    def send(self, data: bytes) -> None:
        """Write a request (the answer's byte count starts over)."""
        assert self.transport is not None
        self.received = 0
        self.transport.write(data)

    def close(self) -> None:
        """Close the socket (idempotent; does not wait)."""
        self.closed = True
        if self.transport is not None:
            self.transport.close()


async def _until(wire: _Wire, marker: bytes, limit: int) -> int:
    """The index of ``marker`` in the buffer, reading more until it is there."""
    start = 0
    while True:
        found = wire.buffer.find(marker, start)
        if found >= 0:
            return found
        if len(wire.buffer) > limit:
            raise httpx.RemoteProtocolError(f"no {marker!r} within {limit} bytes")
        start = max(0, len(wire.buffer) - len(marker) + 1)
        await wire.more()


async def _exactly(wire: _Wire, count: int) -> bytes:
    """The next ``count`` bytes of the buffer, reading more until they are there."""
    while len(wire.buffer) < count:
        await wire.more()
    data = bytes(wire.buffer[:count])
    del wire.buffer[:count]
    return data


async def _chunked(wire: _Wire) -> bytes:
    """A chunked body (``chunked_body``), reading more until it is all there."""
    while (found := chunked_body(wire.buffer, 0)) is None:
        await wire.more()
    body, used = found
    del wire.buffer[:used]
    return body


def chunked_body(buffer: bytes | bytearray, start: int) -> tuple[bytes, int] | None:
    """A chunked body from ``start`` (RFC 9112 7.1; trailers dropped) and where it ends, or
    None while incomplete: the one reading of chunked framing, for the async transport here and
    the blocking batch (``tui.servers.batch_fetch``).

    Raises:
        httpx.RemoteProtocolError: a bad chunk size, a chunk not ended by CRLF, or a size or
            trailer line longer than ``MAX_HEAD_BYTES``.
    """
    # Where each chunk's data lies, joined once the body is complete: the async reader parses
    # again from the start as bytes arrive, which then costs a scan of the size lines, not a
    # copy of every chunk received so far.
    spans: list[tuple[int, int]] = []
    at = start
    while True:
        end = _line_end(buffer, at)
        if end < 0:
            return None
        size_field = bytes(buffer[at:end]).split(b";", 1)[0].strip()
        try:
            size = int(size_field, 16)
        except ValueError:
            raise httpx.RemoteProtocolError(f"bad chunk size {size_field[:20]!r}") from None
        at = end + 2
        if size == 0:
            while True:  # trailer lines, then the empty line
                end = _line_end(buffer, at)
                if end < 0:
                    return None
                if end == at:
                    return b"".join(buffer[a:b] for a, b in spans), end + 2
                at = end + 2
        if len(buffer) < at + size + 2:
            return None
        if buffer[at + size : at + size + 2] != b"\r\n":
            raise httpx.RemoteProtocolError("a chunk did not end with CRLF")
        spans.append((at, at + size))
        at += size + 2


def _line_end(buffer: bytes | bytearray, at: int) -> int:
    """Where the line at ``at`` ends (its CRLF), or -1 while it is incomplete."""
    end = buffer.find(b"\r\n", at)
    if end < 0 and len(buffer) - at > MAX_HEAD_BYTES:
        raise httpx.RemoteProtocolError(f"no end of line within {MAX_HEAD_BYTES} bytes")
    return end


def parse_head(raw: bytes) -> tuple[bytes, int, tuple[tuple[bytes, bytes], ...]]:
    """(HTTP version, status, headers) of a response head."""
    lines = raw.split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code = rest[:3]
    if not version.startswith(b"HTTP/1.") or not code.isdigit():
        raise httpx.RemoteProtocolError(f"not an HTTP/1.x status line: {lines[0][:60]!r}")
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise httpx.RemoteProtocolError(f"bad header line {line[:60]!r}")
        headers.append((name.lower(), value.strip()))
    return version, int(code), tuple(headers)


async def _answer(wire: _Wire, method: bytes) -> tuple[Answer, bool]:
    """Read one response; (it, whether the connection may carry another)."""
    while True:
        end = await _until(wire, b"\r\n\r\n", MAX_HEAD_BYTES)
        version, status, headers = parse_head(bytes(wire.buffer[:end]))
        del wire.buffer[: end + 4]
        if status >= 200 or status == 101:
            break  # 1xx interim answers (100 Continue) precede the real one
    fields = dict(headers)
    keep = version == b"HTTP/1.1" and b"close" not in fields.get(b"connection", b"").lower()
    if method == b"HEAD" or status in NO_BODY_STATUS or status < 200:
        return Answer(status, headers, b""), keep
    if b"chunked" in fields.get(b"transfer-encoding", b"").lower():
        return Answer(status, headers, await _chunked(wire)), keep
    length = fields.get(b"content-length")
    if length is not None:
        if not length.isdigit():
            raise httpx.RemoteProtocolError(f"bad Content-Length {length[:20]!r}")
        return Answer(status, headers, await _exactly(wire, int(length))), keep
    while not wire.closed:  # framed by the end of the connection
        try:
            await wire.more()
        except _Closed:
            break
    body = bytes(wire.buffer)
    wire.buffer.clear()
    return Answer(status, headers, body), False


def host_header(host: str, port: int) -> bytes:
    """The ``Host`` header's value for ``host:port`` (an IPv6 address in brackets)."""
    name = f"[{host}]" if ":" in host else host
    return f"{name}:{port}".encode("ascii")


class KeepAliveTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over asyncio with idle connections kept per host and port."""

    def __init__(self, max_idle_per_host: int = 2) -> None:
        """Args:
        max_idle_per_host: Idle connections kept per (host, port); more are closed on return.
        """
        self.max_idle_per_host = max_idle_per_host
        self._idle: defaultdict[tuple[str, int], list[_Wire]] = defaultdict(list)
        self._requests: dict[tuple[str, int, str], bytes] = {}
        self._closed = False

    async def fetch(self, host: str, port: int, target: str, timeout: float) -> Answer:
        """GET ``target`` from ``host:port`` on a kept connection (the probes' path).

        Args:
            host: The server's host.
            port: Its port.
            target: The path (and query) asked for.
            timeout: Seconds for the connection and, separately, for the whole answer.

        Returns:
            The answer.

        Raises:
            httpx.ConnectError: the connection was refused or failed.
            httpx.ConnectTimeout: no connection within ``timeout``.
            httpx.ReadTimeout: no complete answer within ``timeout``.
            httpx.RemoteProtocolError: the peer broke HTTP/1.1 or closed mid-answer.
        """
        return await self.send(
            host, port, "GET", target, connect_timeout=timeout, read_timeout=timeout
        )

    async def send(
        self,
        host: str,
        port: int,
        method: str,
        target: str,
        body: bytes = b"",
        *,
        content_type: str = "application/json",
        connect_timeout: float | None,
        read_timeout: float | None,
    ) -> Answer:
        """One request with an optional body on a kept connection (the pipeline's path).

        The head up to ``Content-Length`` is built once per (host, port, method, target, content
        type); a request without a body sends neither header.

        Args:
            host: The server's host.
            port: Its port.
            method: The HTTP method (``"POST"``, ``"GET"``).
            target: The path (and query).
            body: The request body (sent with ``content_type``), or empty.
            content_type: The body's media type.
            connect_timeout: Seconds for the connection (None: no limit).
            read_timeout: Seconds for the whole answer once the request is written (None: no
                limit).

        Returns:
            The answer.

        Raises:
            httpx.ConnectError: the connection was refused or failed.
            httpx.ConnectTimeout: no connection within ``connect_timeout``.
            httpx.ReadTimeout: no complete answer within ``read_timeout``.
            httpx.RemoteProtocolError: the peer broke HTTP/1.1 or closed mid-answer.
        """
        key = (host, port, f"{method} {target} {content_type if body else ''}")
        head = self._requests.get(key)
        if head is None:
            head = b"%s %s HTTP/1.1\r\nHost: %s\r\nAccept: */*\r\nUser-Agent: gpufleet\r\n" % (
                method.encode("ascii"),
                target.encode(),
                host_header(host, port),
            )
            if body:
                head += b"Content-Type: %s\r\nContent-Length: " % content_type.encode("ascii")
            self._requests[key] = head
        data = b"%s%d\r\n\r\n%s" % (head, len(body), body) if body else head + b"\r\n"
        wire_method = method.encode("ascii")
        return await self._send((host, port), wire_method, data, connect_timeout, read_timeout)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and read the whole response (httpx's transport interface).

        Raises:
            httpx.UnsupportedProtocol: not ``http://``.
            httpx.ConnectError: the connection was refused or failed.
            httpx.ConnectTimeout: no connection within the connect timeout.
            httpx.ReadTimeout: no complete response within the read timeout.
            httpx.RemoteProtocolError: the peer broke HTTP/1.1 or closed mid-response.
        """
        if request.url.scheme != "http":
            raise httpx.UnsupportedProtocol(
                f"KeepAliveTransport serves http:// only, not {request.url.scheme}://",
                request=request,
            )
        body = await request.aread()
        method = request.method.encode("ascii")
        lines = [b"%s %s HTTP/1.1" % (method, request.url.raw_path)]
        lines += [b"%s: %s" % (name, value) for name, value in request.headers.raw]
        if body and "chunked" in request.headers.get("transfer-encoding", "").lower():
            body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)  # a stream, read whole
        data = b"\r\n".join(lines) + b"\r\n\r\n" + body
        limits = request.extensions.get("timeout", {})
        key = (request.url.host, request.url.port or 80)
        try:
            answer = await self._send(key, method, data, limits.get("connect"), limits.get("read"))
        except httpx.TransportError as error:
            error.request = request
            raise
        return httpx.Response(
            answer.status,
            headers=list(answer.headers),
            stream=httpx.ByteStream(answer.body),
            extensions={"http_version": b"HTTP/1.1"},
            request=request,
        )

    async def _send(
        self,
        key: tuple[str, int],
        method: bytes,
        data: bytes,
        connect_timeout: float | None,
        read_timeout: float | None,
    ) -> Answer:
        if self._closed:
            raise RuntimeError("the transport is closed")
        idle = self._idle[key]
        while idle:
            wire = idle.pop()
            if not wire.reusable():
                wire.close()
                continue
            try:
                return await self._exchange(wire, key, method, data, read_timeout)
            except _Closed as closed:
                if closed.started:
                    raise httpx.RemoteProtocolError("the server closed mid-answer") from None
                continue  # the server closed it while idle (a restart): try the next
        wire = await self._connect(key, connect_timeout)
        try:
            return await self._exchange(wire, key, method, data, read_timeout)
        except _Closed:  # a fresh connection closed before a whole answer
            raise httpx.RemoteProtocolError("the server closed the connection") from None

    @staticmethod
    async def _connect(key: tuple[str, int], timeout: float | None) -> _Wire:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                _, wire = await loop.create_connection(_Wire, key[0], key[1])
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"no connection to {key[0]}:{key[1]} within {timeout}s"
            ) from None
        except OSError as error:
            raise httpx.ConnectError(str(error)) from None
        return wire

    async def _exchange(
        self,
        wire: _Wire,
        key: tuple[str, int],
        method: bytes,
        data: bytes,
        read_timeout: float | None,
    ) -> Answer:
        """One request and its answer on ``wire``, which goes back to the pool or is closed."""
        keep = False
        try:
            wire.send(data)
            try:
                async with asyncio.timeout(read_timeout):
                    answer, keep = await _answer(wire, method)
            except TimeoutError:
                raise httpx.ReadTimeout(f"no complete answer within {read_timeout}s") from None
            return answer
        finally:
            idle = self._idle[key]
            if keep and wire.reusable() and not self._closed and len(idle) < self.max_idle_per_host:
                idle.append(wire)
            else:
                wire.close()

    async def aclose(self) -> None:
        """Close every idle connection; the transport takes no requests after this."""
        self._closed = True
        for wires in self._idle.values():
            for wire in wires:
                wire.close()
        self._idle.clear()


def lean_transport(max_idle_per_host: int = 2) -> KeepAliveTransport | None:
    """The keep-alive transport for a caller that would otherwise use httpx's own; None with
    ``GPUFLEET_PLAIN=keepalive`` (``tui.plain``): the caller then sends through httpx's client
    and default transport, the code it would run if this module were deleted.

    Args:
        max_idle_per_host: As :class:`KeepAliveTransport`'s.
    """
    if plain.off("keepalive"):
        return None
    return KeepAliveTransport(max_idle_per_host)
