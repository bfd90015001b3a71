"""A real loopback HTTP/1.1 server the clients under test can't see into.

A few lines of asyncio: it counts connections, can answer chunked or large, can stall, and can
drop every open connection (what a relaunched SGLang server does to its idle keep-alive
clients). Shared by the keep-alive transport's and the batch fetcher's tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass
class Server:
    port: int = 0
    connections: int = 0
    requests: int = 0
    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    stall: asyncio.Event = field(default_factory=asyncio.Event)
    """While clear, /stall never answers."""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests += 1
                lines = head.decode().split("\r\n")
                path = lines[0].split()[1]
                length = next(
                    (int(x.split(":")[1]) for x in lines if x.lower().startswith("content-length")),
                    0,
                )
                body = await reader.readexactly(length) if length else b""
                writer.write(await self.answer(path, body))
                await writer.drain()
                if path in ("/close", "/half"):
                    break  # the answer is framed by the end of the connection (or cut short)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def answer(self, path: str, body: bytes) -> bytes:
        if path == "/chunked":
            parts = [b"alpha-", b"beta-", b"gamma"]
            chunks = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)
            return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
        if path == "/trailers":  # a chunk extension, a trailer, a 1 MB chunk
            big = b"y" * 1_000_000
            return (
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n"
                b"3;ext=1\r\nabc\r\n%x\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n" % (len(big), big)
            )
        if path == "/close":
            return b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end"
        if path == "/half":
            return b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"
        if path == "/empty":
            return b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
        if path == "/continue":
            return b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        if path == "/garbage":
            return b"SSH-2.0-OpenSSH\r\n\r\n"
        if path == "/stall":
            await self.stall.wait()
        payload = b"x" * 1_000_000 if path == "/large" else path.encode() + b"|" + body
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload)

    def drop_all(self) -> None:
        for writer in self.writers:
            writer.close()
        self.writers.clear()


@asynccontextmanager
async def listening(
    handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]], port: int = 0
) -> AsyncIterator[int]:
    """An asyncio server on loopback running ``handle`` per connection; yields its port."""
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


@asynccontextmanager
async def serve(port: int = 0) -> AsyncIterator[Server]:
    state = Server()
    async with listening(state.handle, port) as state.port:
        try:
            yield state
        finally:
            state.stall.set()
            state.drop_all()
