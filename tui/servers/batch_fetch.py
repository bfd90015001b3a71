"""Blocking GETs of one path from many servers at once: the monitor's steady ``/metrics`` reads.

Why: once a server is ready, the console asks it for ``/metrics`` every second and nothing else
(``tui.fleet.monitor``). On the event loop each of those reads was a task, a future, a timeout
handle, a connection callback and a few loop iterations: about 1.5 ms of the console's main
thread a second with seven servers, the largest single share of the loop after Textual's own
compositor (H200 and 2-core profiles, issue 20). The poll already hops to a worker thread once a
second for the logs and the GPU sample; these reads ride along: every request is written first,
then the answers are read as they arrive through one selector, on plain non-blocking sockets,
so seven servers cost about what the slowest one takes and a hung one no more than the timeout.
``poll(2)`` rather than a selector: registering with a ``select.poll`` object is no system call
(an epoll selector's was two per exchange, a third of the batch's CPU in a profile), and a
request of a hundred bytes on a kept connection is written at once, not when told writable.

Same wire rules as :class:`tui.servers.keepalive.KeepAliveTransport` (HTTP/1.1, a kept
connection per server, closed after ``MAX_CONNECTION_AGE_S`` so a draining uvicorn is never held
up, answers framed by ``Content-Length``, chunked, or the end of the connection) and the same
errors (httpx's), so the caller classifies a failure as it does on the async path.

Not thread-safe: one batch at a time (the monitor's polls never overlap).
"""

from __future__ import annotations

import errno
import select
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx

from tui.servers.keepalive import (
    MAX_CONNECTION_AGE_S,
    MAX_HEAD_BYTES,
    NO_BODY_STATUS,
    Answer,
    chunked_body,
    host_header,
)

READ_SIZE = 256 * 1024
"""Bytes asked of a socket per read (a busy SGLang server's /metrics is tens of KiB)."""

Outcome = Answer | httpx.HTTPError
"""What one target gave: its answer, or the error that stood in its way."""


def _framing(head: bytes) -> tuple[int, bool, bytes | None, bool]:
    """(status, HTTP/1.1 without ``Connection: close``, Content-Length, chunked) of a head.

    Why not ``keepalive.parse_head``: the batch needs four facts, not every header split,
    stripped and lowered (that was half of a batch's CPU); the answer carries no headers.
    """
    line_end = head.find(b"\r\n")
    line = head if line_end < 0 else head[:line_end]
    version, _, rest = line.partition(b" ")
    code = rest[:3]
    if not version.startswith(b"HTTP/1.") or not code.isdigit():
        raise httpx.RemoteProtocolError(f"not an HTTP/1.x status line: {line[:60]!r}")
    fields = head[len(line) :].lower()
    length = _value(fields, b"content-length")
    chunked = b"chunked" in (_value(fields, b"transfer-encoding") or b"")
    close = b"close" in (_value(fields, b"connection") or b"")
    return int(code), version == b"HTTP/1.1" and not close, length, chunked


def _value(fields: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` in lowered header lines (each after a CRLF), or None."""
    at = fields.find(b"\r\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 3
    end = fields.find(b"\r\n", start)
    return fields[start : None if end < 0 else end].strip()


def parse_answer(buffer: bytes | bytearray, closed: bool) -> tuple[Answer, bool, int] | None:
    """One complete GET response at the start of ``buffer``, if it is all there (its
    ``Answer.headers`` empty: the steady reads use the status and the body).

    Args:
        buffer: The bytes received so far on a connection.
        closed: Whether the peer has closed (ends a body framed by the connection's end).

    Returns:
        (the answer, whether the connection may carry another, bytes used), or None while
        incomplete.

    Raises:
        httpx.RemoteProtocolError: the bytes are not an HTTP/1.x answer.
    """
    start = 0
    while True:
        end = buffer.find(b"\r\n\r\n", start)
        if end < 0:
            if len(buffer) - start > MAX_HEAD_BYTES:
                raise httpx.RemoteProtocolError(f"no end of head within {MAX_HEAD_BYTES} bytes")
            return None
        status, keep, length, chunked = _framing(bytes(buffer[start:end]))
        start = end + 4
        if status >= 200 or status == 101:
            break  # 1xx interim answers precede the real one
    headers: tuple[tuple[bytes, bytes], ...] = ()
    if status in NO_BODY_STATUS or status < 200:
        return Answer(status, headers, b""), keep, start
    if chunked:
        found = chunked_body(buffer, start)
        if found is None:
            return None
        body, used = found
        return Answer(status, headers, body), keep, used
    if length is not None:
        if not length.isdigit():
            raise httpx.RemoteProtocolError(f"bad Content-Length {length[:20]!r}")
        stop = start + int(length)
        if len(buffer) < stop:
            return None
        return Answer(status, headers, bytes(buffer[start:stop])), keep, stop
    if not closed:
        return None  # framed by the end of the connection
    return Answer(status, headers, bytes(buffer[start:])), False, len(buffer)


@dataclass(eq=False)
class _Exchange:
    """One target's request in flight: its socket, what is left to write, what was read."""

    index: int
    key: tuple[str, int]
    request: bytes
    sock: socket.socket
    opened: float
    reused: bool
    connecting: bool
    pending: bytes = b""
    buffer: bytearray = field(default_factory=bytearray)


class BatchFetcher:
    """Kept connections per (host, port), and :meth:`fetch_all` over them."""

    def __init__(self, max_age_s: float = MAX_CONNECTION_AGE_S) -> None:
        """Args:
        max_age_s: A kept connection older than this is closed instead of reused.
        """
        self.max_age_s = max_age_s
        self._idle: dict[tuple[str, int], tuple[socket.socket, float]] = {}
        self._requests: dict[tuple[str, int, str], bytes] = {}
        self.connects = 0
        """Connections opened so far (tests count them)."""

    def fetch_all(self, targets: Sequence[tuple[str, int, str]], timeout: float) -> list[Outcome]:
        """GET each (host, port, path) at once; wait ``timeout`` seconds at most for them all.

        Args:
            targets: What to ask, one (host, port, path) per server (a server at most once).
            timeout: Seconds for the whole batch: connecting, writing and reading.

        Returns:
            One outcome per target, in order: an :class:`Answer`, or ``httpx.ConnectError``
            (refused), ``httpx.ConnectTimeout``, ``httpx.ReadTimeout``,
            ``httpx.RemoteProtocolError`` (the peer broke HTTP/1.1 or closed mid-answer).
        """
        deadline = time.monotonic() + timeout
        outcomes: list[Outcome | None] = [None] * len(targets)
        poller = select.poll()
        waiting: dict[int, _Exchange] = {}

        def watch(exchange: _Exchange) -> None:
            fd = exchange.sock.fileno()
            waiting[fd] = exchange
            poller.register(fd, select.POLLOUT if exchange.pending else select.POLLIN)

        for index, (host, port, path) in enumerate(targets):
            started = self._start(index, host, port, path)
            if isinstance(started, _Exchange):
                watch(started)
            else:
                outcomes[index] = started
        while waiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for fd, _ in poller.poll(remaining * 1000):
                exchange = waiting[fd]
                was_writing = bool(exchange.pending)
                outcome = self._step(exchange)
                if outcome is None:
                    if was_writing and not exchange.pending:
                        poller.modify(fd, select.POLLIN)
                    continue
                poller.unregister(fd)
                del waiting[fd]
                if isinstance(outcome, _Exchange):
                    watch(outcome)  # a new connection instead of a dropped kept one
                else:
                    outcomes[exchange.index] = outcome
        for exchange in waiting.values():  # past the deadline
            exchange.sock.close()
            outcomes[exchange.index] = (
                httpx.ConnectTimeout(f"no connection within {timeout}s")
                if exchange.connecting
                else httpx.ReadTimeout(f"no complete answer within {timeout}s")
            )
        # Every exchange ended above or timed out; the fallback only keeps the list aligned.
        return [o or httpx.ReadTimeout(f"no answer within {timeout}s") for o in outcomes]

    def close(self) -> None:
        """Close every kept connection."""
        for sock, _ in self._idle.values():
            sock.close()
        self._idle.clear()

    # --- one exchange ---------------------------------------------------------------------

    def _request(self, host: str, port: int, path: str) -> bytes:
        key = (host, port, path)
        request = self._requests.get(key)
        if request is None:
            request = (
                b"GET %s HTTP/1.1\r\nHost: %s\r\nAccept: */*\r\nUser-Agent: gpufleet\r\n\r\n"
                % (
                    path.encode(),
                    host_header(host, port),
                )
            )
            self._requests[key] = request
        return request

    def _start(self, index: int, host: str, port: int, path: str) -> _Exchange | httpx.HTTPError:
        """The exchange on a kept connection, else on a new one (connecting)."""
        key = (host, port)
        request = self._request(host, port, path)
        kept = self._idle.pop(key, None)
        if kept is not None:
            sock, opened = kept
            if time.monotonic() - opened < self.max_age_s:
                exchange = _Exchange(index, key, request, sock, opened, True, False, request)
                self._write(exchange)
                return exchange
            sock.close()
        return self._connect(index, key, request)

    def _connect(
        self, index: int, key: tuple[str, int], request: bytes
    ) -> _Exchange | httpx.HTTPError:
        try:
            infos = socket.getaddrinfo(key[0], key[1], type=socket.SOCK_STREAM)
        except OSError as error:
            return httpx.ConnectError(str(error))
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connects += 1
        code = sock.connect_ex(address)
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            return httpx.ConnectError(f"[Errno {code}] {errno.errorcode.get(code, '')}: {key}")
        return _Exchange(index, key, request, sock, time.monotonic(), False, True, request)

    @staticmethod
    def _write(exchange: _Exchange) -> None:
        """Write what the socket takes of the request now (all of it, but for a full buffer;
        an error shows when the answer is read)."""
        try:
            sent = exchange.sock.send(exchange.pending)
        except OSError:
            return
        exchange.pending = exchange.pending[sent:]

    def _step(self, exchange: _Exchange) -> _Exchange | Outcome | None:
        """Advance ``exchange``: None to wait for more, a new exchange to watch instead (a kept
        connection the server had closed), or the outcome."""
        sock = exchange.sock
        if exchange.connecting:
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                sock.close()
                return httpx.ConnectError(f"[Errno {code}] {errno.errorcode.get(code, '')}")
            exchange.connecting = False
        if exchange.pending:
            try:
                sent = sock.send(exchange.pending)
            except BlockingIOError:
                return None
            except OSError as error:
                return self._lost(exchange, error)
            exchange.pending = exchange.pending[sent:]
            return None
        try:
            data = sock.recv(READ_SIZE)
        except BlockingIOError:
            return None
        except OSError as error:
            return self._lost(exchange, error)
        if data:
            exchange.buffer += data
        try:
            found = parse_answer(exchange.buffer, closed=not data)
        except httpx.RemoteProtocolError as error:
            sock.close()
            return error
        if found is None:
            return self._lost(exchange, None) if not data else None
        answer, keep, used = found
        if keep and data and used == len(exchange.buffer):
            self._keep(exchange)
        else:
            sock.close()
        return answer

    def _lost(self, exchange: _Exchange, error: OSError | None) -> _Exchange | Outcome:
        """The peer closed or reset before a whole answer. A kept connection that got nothing
        back was closed while idle (a restart, the server's keep-alive timeout): ask again on
        a new one, as the async transport does."""
        exchange.sock.close()
        if exchange.reused and not exchange.buffer:
            return self._connect(exchange.index, exchange.key, exchange.request)
        why = f": {error}" if error is not None else ""
        return httpx.RemoteProtocolError(f"the server closed the connection mid-answer{why}")

    def _keep(self, exchange: _Exchange) -> None:
        old = self._idle.pop(exchange.key, None)
        if old is not None:
            old[0].close()
        self._idle[exchange.key] = (exchange.sock, exchange.opened)
