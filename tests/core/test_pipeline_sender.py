"""The dispatcher's HTTP (``tui.pipeline.sender``) against a real loopback HTTP/1.1 server.

The server records every request's raw bytes, so the tests see exactly what the lean path puts
on the wire, and that httpx (the path for https and proxied servers) reads the same answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import pytest
from wire_server import listening

from tui.pipeline.sender import Sender, lean_route


@dataclass
class Recorder:
    port: int = 0
    raw: list[bytes] = field(default_factory=list)
    connections: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)
    """While clear, /v1/stall never answers."""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                length = next(
                    (int(x.split(":")[1]) for x in lines if x.lower().startswith("content-length")),
                    0,
                )
                body = await reader.readexactly(length) if length else b""
                self.raw.append(head + body)
                path = lines[0].split()[1]
                if path.endswith("/stall"):
                    await self.release.wait()
                status = b"500 Internal Server Error" if path.endswith("/fail") else b"200 OK"
                payload = b'{"path": "%s", "got": %d}' % (path.encode(), len(body))
                writer.write(
                    b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                    % (status, len(payload), payload)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def recorder() -> AsyncIterator[Recorder]:
    state = Recorder()
    async with listening(state.handle) as state.port:
        try:
            yield state
        finally:
            state.release.set()


def test_plain_http_takes_the_lean_path_https_and_proxied_servers_httpx(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert lean_route("http://127.0.0.1:30001") == ("127.0.0.1", 30001, "")
    assert lean_route("http://node7:80/sglang/") == ("node7", 80, "/sglang")
    assert lean_route("http://node7") == ("node7", 80, "")
    assert lean_route("https://node7:30001") is None
    monkeypatch.setenv("http_proxy", "http://proxy.invalid:3128")
    assert lean_route("http://node7:30001") is None  # httpx would send it through the proxy
    monkeypatch.setenv("no_proxy", "node7")
    assert lean_route("http://node7:30001") == ("node7", 30001, "")
    assert lean_route("http://node8:30001") is None


async def test_the_lean_path_sends_one_minimal_post_and_a_bodiless_health_get() -> None:
    sender = Sender(0, 8, 5.0)
    try:
        async with recorder() as server:
            route = ("127.0.0.1", server.port, "/prefix")
            url = f"http://127.0.0.1:{server.port}/prefix"
            body = b'{"messages": []}'
            answers = [
                await sender.post(url, route, "/v1/chat/completions", body) for _ in range(2)
            ]
            health = await sender.health(url, route)
            assert server.connections == 1  # all three on one kept connection
    finally:
        await sender.aclose()
    assert answers == [(200, b'{"path": "/prefix/v1/chat/completions", "got": 16}')] * 2
    assert health == 200
    host = b"Host: 127.0.0.1:%d\r\n" % server.port
    common = host + b"Accept: */*\r\nUser-Agent: gpufleet\r\n"
    post = (
        b"POST /prefix/v1/chat/completions HTTP/1.1\r\n" + common
        + b"Content-Type: application/json\r\nContent-Length: 16\r\n\r\n" + body
    )  # fmt: skip
    assert server.raw == [post, post, b"GET /prefix/health HTTP/1.1\r\n" + common + b"\r\n"]


async def test_httpx_and_the_lean_path_read_the_same_answers() -> None:
    sender = Sender(1, 8, 5.0)
    try:
        async with recorder() as server:
            url = f"http://127.0.0.1:{server.port}"
            route = ("127.0.0.1", server.port, "")
            for path in ("/v1/chat/completions", "/v1/fail"):
                lean = await sender.post(url, route, path, b"{}")
                through_httpx = await sender.post(url, None, path, b"{}")
                assert lean == through_httpx
                assert lean[0] == (500 if path == "/v1/fail" else 200)
            assert await sender.health(url, None) == await sender.health(url, route) == 200
    finally:
        await sender.aclose()


async def test_a_silent_server_times_out_and_a_gone_one_refuses_as_httpx_errors() -> None:
    sender = Sender(0, 8, 0.3)
    try:
        async with recorder() as server:
            port = server.port
            route = ("127.0.0.1", port, "")
            with pytest.raises(httpx.ReadTimeout):
                await sender.post(f"http://127.0.0.1:{port}", route, "/v1/stall", b"{}")
        with pytest.raises(httpx.ConnectError):
            await sender.post(f"http://127.0.0.1:{port}", route, "/v1/x", b"{}")
    finally:
        await sender.aclose()
