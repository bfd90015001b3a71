"""The monitor's keep-alive transport against a real loopback HTTP/1.1 server it can't see into
(``wire_server``)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from wire_server import serve

from tui.servers.keepalive import KeepAliveTransport


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


async def test_a_connection_past_its_age_is_closed_not_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A connection accepted as uvicorn's shutdown began is never closed by it, and the shutdown
    waits for it: a kept connection is replaced once MAX_CONNECTION_AGE_S old, so a probe every
    second cannot hold a stopping server up for long (here the age is 0: none is reused)."""
    monkeypatch.setattr("tui.servers.keepalive.MAX_CONNECTION_AGE_S", 0.0)
    async with serve() as server, httpx.AsyncClient(transport=KeepAliveTransport()) as client:
        url = f"http://127.0.0.1:{server.port}/aged"
        bodies = [(await client.get(url)).text for _ in range(3)]
        assert bodies == ["/aged|"] * 3
        assert (server.connections, server.requests) == (3, 3)
        async with asyncio.timeout(5):  # and the old ones were closed, not leaked
            while not all(w.is_closing() for w in server.writers[:2]):
                await asyncio.sleep(0.01)


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


async def test_fetch_reads_every_framing_and_keeps_the_connection_where_it_may() -> None:
    """The probes' path (``fetch``): Content-Length, chunked with extensions, trailers and a
    large chunk, 1xx before the answer, a bodiless 204, and a body framed by the connection's
    end (that connection is not reused)."""
    transport = KeepAliveTransport()
    try:
        async with serve() as server:
            host, port = "127.0.0.1", server.port
            first = await transport.fetch(host, port, "/a", 2.0)
            trailers = await transport.fetch(host, port, "/trailers", 2.0)
            interim = await transport.fetch(host, port, "/continue", 2.0)
            empty = await transport.fetch(host, port, "/empty", 2.0)
            assert server.connections == 1  # all of these on the one kept connection
            closed = await transport.fetch(host, port, "/close", 2.0)
            after = await transport.fetch(host, port, "/b", 2.0)
            assert server.connections == 2  # the close-framed one was not reused
    finally:
        await transport.aclose()
    assert (first.status, first.body) == (200, b"/a|")
    assert trailers.body == b"abc" + b"y" * 1_000_000
    assert (interim.status, interim.body) == (200, b"ok")
    assert (empty.status, empty.body) == (204, b"")
    assert closed.body == b"until the end"
    assert after.body == b"/b|"
    assert server.requests == 6


async def test_fetch_sends_one_minimal_request_per_call() -> None:
    """One GET line, Host and two short headers: nothing for the server to parse beyond that."""
    heads: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                heads.append(await reader.readuntil(b"\r\n\r\n"))
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = KeepAliveTransport()
    try:
        for _ in range(3):
            assert (await transport.fetch("127.0.0.1", port, "/metrics", 2.0)).body == b"x"
    finally:
        await transport.aclose()
        server.close()
        await server.wait_closed()
    assert (
        heads
        == [
            b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: */*\r\n"
            b"User-Agent: gpufleet\r\n\r\n" % port
        ]
        * 3
    )


async def test_fetch_failures_are_httpx_errors() -> None:
    """A body cut short, a non-HTTP answer, a stall and a refusal raise what the probes map to
    ERROR, TIMEOUT and REFUSED; the transport keeps working after each."""
    transport = KeepAliveTransport()
    try:
        async with serve() as server:
            host, port = "127.0.0.1", server.port
            with pytest.raises(httpx.RemoteProtocolError):
                await transport.fetch(host, port, "/half", 2.0)
            with pytest.raises(httpx.RemoteProtocolError, match="status line"):
                await transport.fetch(host, port, "/garbage", 2.0)
            with pytest.raises(httpx.ReadTimeout):
                await transport.fetch(host, port, "/stall", 0.2)
            assert (await transport.fetch(host, port, "/ok", 2.0)).body == b"/ok|"
        with pytest.raises(httpx.ConnectError):
            await transport.fetch(host, port, "/ok", 2.0)
    finally:
        await transport.aclose()


async def test_fetch_and_the_httpx_interface_read_the_same_answers() -> None:
    transport = KeepAliveTransport()
    async with serve() as server, httpx.AsyncClient(transport=transport) as client:
        for path in ("/chunked", "/trailers", "/continue", "/x"):
            fetched = await transport.fetch("127.0.0.1", server.port, path, 2.0)
            through = await client.get(f"http://127.0.0.1:{server.port}{path}")
            assert (fetched.status, fetched.body) == (through.status_code, through.content)
