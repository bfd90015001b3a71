"""The monitor's keep-alive transport against a real loopback HTTP/1.1 server it can't see into.

The server is a few lines of asyncio: it counts connections, can answer chunked or large, can
stall, and can drop every open connection (what a relaunched SGLang server does to its idle
keep-alive clients).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import pytest

from tui.servers.keepalive import KeepAliveTransport


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
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def answer(self, path: str, body: bytes) -> bytes:
        if path == "/chunked":
            parts = [b"alpha-", b"beta-", b"gamma"]
            chunks = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)
            return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
        if path == "/stall":
            await self.stall.wait()
        payload = b"x" * 1_000_000 if path == "/large" else path.encode() + b"|" + body
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload)

    def drop_all(self) -> None:
        for writer in self.writers:
            writer.close()
        self.writers.clear()


@asynccontextmanager
async def serve(port: int = 0) -> AsyncIterator[Server]:
    state = Server()
    server = await asyncio.start_server(state.handle, "127.0.0.1", port)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        state.stall.set()
        state.drop_all()
        server.close()
        await server.wait_closed()


async def test_sequential_requests_share_one_connection() -> None:
    async with serve() as server, httpx.AsyncClient(transport=KeepAliveTransport()) as client:
        bodies = [(await client.get(f"http://127.0.0.1:{server.port}/n{i}")).text for i in range(5)]
    assert bodies == [f"/n{i}|" for i in range(5)]
    assert (server.connections, server.requests) == (1, 5)


async def test_post_body_chunked_and_large_answers_arrive_whole() -> None:
    async with serve() as server, httpx.AsyncClient(transport=KeepAliveTransport()) as client:
        base = f"http://127.0.0.1:{server.port}"
        posted = await client.post(f"{base}/echo", content=b"payload")
        chunked = await client.get(f"{base}/chunked")
        large = await client.get(f"{base}/large")
        after = await client.get(f"{base}/after")
    assert posted.text == "/echo|payload"
    assert chunked.text == "alpha-beta-gamma"
    assert len(large.content) == 1_000_000
    assert after.text == "/after|"
    assert server.connections == 1  # all on the one connection


async def test_connections_the_server_dropped_are_replaced_transparently() -> None:
    transport = KeepAliveTransport()
    async with serve() as server, httpx.AsyncClient(transport=transport) as client:
        url = f"http://127.0.0.1:{server.port}/a"
        assert (await client.get(url)).status_code == 200
        server.drop_all()  # e.g. the server restarted or timed out its idle keep-alive
        answer = await client.get(url)
    assert answer.text == "/a|"
    assert server.connections == 2


async def test_restart_on_the_same_port_refuses_then_recovers() -> None:
    transport = KeepAliveTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        async with serve() as first:
            port = first.port
            assert (await client.get(f"http://127.0.0.1:{port}/x")).status_code == 200
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/x")
        async with serve(port) as second:
            assert (await client.get(f"http://127.0.0.1:{port}/y")).text == "/y|"
        assert second.connections == 1


async def test_read_timeout_is_httpx_timeout_and_the_connection_is_not_reused() -> None:
    async with serve() as server, httpx.AsyncClient(transport=KeepAliveTransport()) as client:
        base = f"http://127.0.0.1:{server.port}"
        with pytest.raises(httpx.ReadTimeout):
            await client.get(f"{base}/stall", timeout=0.2)
        server.stall.set()
        # The stalled connection may still carry the late answer: it must not be reused.
        assert (await client.get(f"{base}/next")).text == "/next|"
    assert server.connections == 2


async def test_concurrent_requests_open_connections_and_keep_a_bounded_few() -> None:
    transport = KeepAliveTransport(max_idle_per_host=2)
    async with serve() as server, httpx.AsyncClient(transport=transport) as client:
        base = f"http://127.0.0.1:{server.port}"
        pending = [asyncio.ensure_future(client.get(f"{base}/stall")) for _ in range(6)]
        async with asyncio.timeout(10):
            while server.requests < 6:  # all six in flight, each on its own connection
                await asyncio.sleep(0.01)
        server.stall.set()
        answers = await asyncio.wait_for(asyncio.gather(*pending), timeout=10)
        assert all(a.status_code == 200 for a in answers)
        assert server.connections == 6
        assert sum(len(v) for v in transport._idle.values()) == 2
        await client.get(f"{base}/again")
    assert server.connections == 6


async def test_refused_and_https_are_clear_errors() -> None:
    async with serve() as server:
        port = server.port
    async with httpx.AsyncClient(transport=KeepAliveTransport()) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/")
        with pytest.raises(httpx.UnsupportedProtocol, match="http:// only"):
            await client.get("https://127.0.0.1:1/")
