"""The blocking batch of steady reads (``tui.servers.batch_fetch``) against real loopback servers
(``wire_server``), and its parser at every cut of every framing."""

from __future__ import annotations

import asyncio
import socket
import time

import httpx
import pytest
from wire_server import serve

from tui.servers.batch_fetch import BatchFetcher, parse_answer
from tui.servers.keepalive import Answer

FRAMINGS = {
    "length": (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", b"hello", True),
    "chunked": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n",
        b"abcde",
        True,
    ),
    "interim": (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"ok",
        True,
    ),
    "no body": (b"HTTP/1.1 204 No Content\r\n\r\n", b"", True),
    "http/1.0": (b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", b"x", False),
    "close": (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", b"x", False),
}


@pytest.mark.parametrize("name", sorted(FRAMINGS))
def test_every_framing_is_incomplete_until_its_last_byte(name: str) -> None:
    raw, body, keep = FRAMINGS[name]
    for cut in range(len(raw)):
        assert parse_answer(raw[:cut], closed=False) is None, cut
    found = parse_answer(raw + b"HTTP/1.1 next", closed=False)  # a pipelined rest stays
    assert found is not None
    answer, kept, used = found
    assert (answer.body, kept, used) == (body, keep, len(raw))


def test_a_body_framed_by_the_end_of_the_connection_needs_the_end() -> None:
    raw = b"HTTP/1.1 200 OK\r\n\r\nuntil the end"
    assert parse_answer(raw, closed=False) is None
    found = parse_answer(raw, closed=True)
    assert found is not None and found[0].body == b"until the end" and not found[1]


@pytest.mark.parametrize(
    "raw",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc",
    ],
)
def test_what_is_not_http_is_a_protocol_error(raw: bytes) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        parse_answer(raw, closed=False)


def test_a_head_without_end_is_refused_past_its_bound() -> None:
    with pytest.raises(httpx.RemoteProtocolError, match="no end of head"):
        parse_answer(b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000, closed=False)


@pytest.mark.parametrize(
    "body",
    [b"1" * 70_000, b"0\r\nX-Trailer: " + b"y" * 70_000],
    ids=["size line", "trailer line"],
)
def test_a_chunk_line_without_end_is_refused_past_its_bound(body: bytes) -> None:
    # the async transport reads chunked bodies through the same parser (keepalive.chunked_body)
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert parse_answer(head + body[:60_000], closed=False) is None
    with pytest.raises(httpx.RemoteProtocolError, match="no end of line"):
        parse_answer(head + body, closed=False)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_one_batch_reads_many_servers_and_keeps_their_connections() -> None:
    """Three servers, every framing among them, read in one batch; the next batches reuse the
    kept connections (one connect each), except after a body framed by the connection's end."""
    batch = BatchFetcher()
    try:
        async with serve() as a, serve() as b, serve() as c:
            targets = [
                ("127.0.0.1", a.port, "/metrics"),
                ("127.0.0.1", b.port, "/trailers"),
                ("127.0.0.1", c.port, "/close"),
            ]
            first = await asyncio.to_thread(batch.fetch_all, targets, 5.0)
            second = await asyncio.to_thread(batch.fetch_all, targets, 5.0)
            connections = (a.connections, b.connections, c.connections)
    finally:
        batch.close()
    for outcome in (*first, *second):
        assert isinstance(outcome, Answer) and outcome.status == 200
    assert [o.body for o in second if isinstance(o, Answer)] == [
        b"/metrics|",
        b"abc" + b"y" * 1_000_000,
        b"until the end",
    ]
    assert connections == (1, 1, 2)
    assert batch.connects == 4


async def test_failures_are_httpx_errors_and_cost_no_more_than_the_timeout() -> None:
    """A refusal, a stall, a body cut short and a non-HTTP answer, beside a server that answers:
    each gets its error, the good one its answer, and the batch ends at the timeout."""
    batch = BatchFetcher()
    try:
        async with serve() as server:
            host, port = "127.0.0.1", server.port
            async with serve() as stalled, serve() as cut, serve() as garbage:
                targets = [
                    (host, _closed_port(), "/metrics"),
                    (host, stalled.port, "/stall"),
                    (host, cut.port, "/half"),
                    (host, garbage.port, "/garbage"),
                    (host, port, "/metrics"),
                ]
                start = time.monotonic()
                refused, stall, half, junk, good = await asyncio.to_thread(
                    batch.fetch_all, targets, 0.5
                )
                took = time.monotonic() - start
    finally:
        batch.close()
    assert isinstance(refused, httpx.ConnectError)
    assert isinstance(stall, httpx.ReadTimeout)
    assert isinstance(half, httpx.RemoteProtocolError)
    assert isinstance(junk, httpx.RemoteProtocolError)
    assert isinstance(good, Answer) and good.body == b"/metrics|"
    assert 0.5 <= took < 3.0


async def test_a_kept_connection_the_server_dropped_is_replaced_in_the_same_batch() -> None:
    """A relaunched server closes its idle keep-alive connections: the next read goes out on a
    new connection within the same call, not as an error."""
    batch = BatchFetcher()
    try:
        async with serve() as server:
            target = [("127.0.0.1", server.port, "/metrics")]
            assert isinstance((await asyncio.to_thread(batch.fetch_all, target, 2.0))[0], Answer)
            server.drop_all()
            await asyncio.sleep(0.05)  # let the close reach the client's socket
            again = (await asyncio.to_thread(batch.fetch_all, target, 2.0))[0]
            connections = server.connections
    finally:
        batch.close()
    assert isinstance(again, Answer) and again.body == b"/metrics|"
    assert connections == 2


async def test_a_connection_past_its_age_is_closed_not_reused() -> None:
    """Why the age: a draining uvicorn waits for its open connections to close (see
    ``keepalive.MAX_CONNECTION_AGE_S``); a batch must not hold one forever."""
    batch = BatchFetcher(max_age_s=0.0)
    try:
        async with serve() as server:
            target = [("127.0.0.1", server.port, "/metrics")]
            for _ in range(3):
                assert isinstance(
                    (await asyncio.to_thread(batch.fetch_all, target, 2.0))[0], Answer
                )
            connections = server.connections
    finally:
        batch.close()
    assert connections == 3
