"""``gpufleet serve`` without a browser: the token gate on real loopback HTTP, the token's
sources, the options, and the console started from an argv list (never through a shell)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bench.simfleet import free_ports
from tui.ui.serve import cli as serve_cli
from tui.ui.serve.auth import (
    CSP,
    MIN_TOKEN_CHARS,
    TOKEN_ENV,
    TokenError,
    cookie_name,
    load_token,
    token_gate,
    token_matches,
)
from tui.ui.serve.server import ConsoleServer, console_argv

TOKEN = "s3cret-token-for-the-tests-0123"
COOKIE = cookie_name(8000)


async def hello(request: web.Request) -> web.Response:
    return web.Response(text="the page")


@pytest.fixture()
async def client() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    app = web.Application(middlewares=[token_gate(TOKEN, COOKIE)])
    app.router.add_get("/", hello)
    app.router.add_get("/static/x.js", hello)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


async def test_no_token_is_401_and_a_wrong_one_403(client: TestClient) -> None:
    assert (await client.get("/")).status == 401
    assert (await client.get("/static/x.js")).status == 401
    assert (await client.get("/", params={"token": "wrong" * 5})).status == 403
    client.session.cookie_jar.update_cookies({COOKIE: "wrong" * 5})
    assert (await client.get("/")).status == 403


async def test_the_token_moves_into_a_cookie_then_every_request_passes(client: TestClient) -> None:
    first = await client.get("/", params={"token": TOKEN, "fontsize": "20"}, allow_redirects=False)
    assert first.status == 303
    assert first.headers["Location"] == "/?fontsize=20"  # the token leaves the address bar
    cookie = first.cookies[COOKIE]
    assert cookie.value == TOKEN and cookie["httponly"] and cookie["samesite"] == "Strict"
    page = await client.get("/?fontsize=20")  # the client kept the cookie
    assert page.status == 200 and await page.text() == "the page"
    assert page.headers["Content-Security-Policy"] == CSP
    assert (await client.get("/static/x.js")).status == 200


async def test_another_origin_is_refused_even_with_the_token(client: TestClient) -> None:
    client.session.cookie_jar.update_cookies({COOKIE: TOKEN})
    assert (await client.get("/")).status == 200
    own = f"http://{client.host}:{client.port}"
    assert (await client.get("/", headers={"Origin": own})).status == 200
    assert (await client.get("/", headers={"Origin": "http://evil.example"})).status == 403


def test_tokens_compare_whole() -> None:
    assert token_matches(TOKEN, TOKEN)
    assert not token_matches(TOKEN, TOKEN[:-1]) and not token_matches(TOKEN, TOKEN + "x")
    assert not token_matches(TOKEN, "")


def test_token_sources(tmp_path: Path) -> None:
    made = load_token(None, {})
    assert made.generated and len(made.value) >= 32 and made.value != load_token(None, {}).value
    from_env = load_token(None, {TOKEN_ENV: f" {TOKEN}\n"})
    assert (from_env.value, from_env.generated) == (TOKEN, False)
    path = tmp_path / "token"
    path.write_text(f"{TOKEN}\nignored second line\n")
    from_file = load_token(path, {TOKEN_ENV: "the-file-wins-over-this-one"})
    assert from_file.value == TOKEN and TOKEN not in from_file.source


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("short", f"at least {MIN_TOKEN_CHARS} characters"),
        ("has a space in the middle", "without spaces"),
        (None, "cannot be read"),
    ],
)
def test_a_bad_token_file_is_named(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(TokenError, match="--token-file") as error:
        load_token(path, {})
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--port", "70000"], "--port: 70000 is outside 1-65535"),
        (["--profile", "no-such-profile"], "--profile: no-such-profile: profile = "),
        (["--token-file", "/nonexistent/token"], "--token-file: '/nonexistent/token'"),
    ],
)
def test_bad_options_are_refused_before_anything_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert serve_cli.main(argv) == 2
    first, *rest = capsys.readouterr().err.strip().splitlines()
    assert first.startswith("gpufleet serve: ") and message in first
    # A profile's problems follow, one a line, as every command prints them.
    assert all(line.startswith("  profile = ") for line in rest)


def test_an_unknown_console_option_is_refused_by_the_consoles_parser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        serve_cli.main(["--no-such-option"])
    assert exit_.value.code == 2
    assert "--no-such-option" in capsys.readouterr().err


def test_the_console_is_read_only_unless_writable() -> None:
    assert console_argv(["--profile", "x"], True)[-4:] == [
        "console",
        "--profile",
        "x",
        "--readonly",
    ]
    assert console_argv([], False)[-1] == "--no-readonly"  # beats a readonly setting: asked for
    assert console_argv([], True)[:3] == [sys.executable, "-m", "tui"]
    parse = serve_cli.build_parser().parse_known_args
    assert parse([])[0].writable is False
    assert parse(["--readonly"])[0].writable is False
    assert parse(["--writable", "--profile", "p"])[0].writable is True
    assert parse(["--writable", "--profile", "p"])[1] == ["--profile", "p"]
    assert parse([])[0].host == "127.0.0.1"


FAKE_CONSOLE = """
import json, sys
with open(sys.argv[1], "w") as out:
    json.dump(sys.argv[2:], out)
sys.stdout.write("__GANGLION__\\n")
sys.stdout.flush()
sys.stdin.buffer.read(1)  # the server's first packet is its 'quit' when the browser leaves
"""
"""Stands in for the console: records its argv, speaks the first line of the web protocol."""


async def test_a_session_runs_the_console_from_an_argv_list_without_a_shell(
    tmp_path: Path,
) -> None:
    record = tmp_path / "argv.json"
    hostile = "a; touch " + str(tmp_path / "pwned") + " $(id) `id` | cat"
    argv = [sys.executable, "-c", FAKE_CONSOLE, str(record), hostile]
    from tui.ui.serve.auth import Token

    port = free_ports(1)[0]
    server = ConsoleServer(
        argv, host="127.0.0.1", port=port, token=Token(TOKEN, False, "test"), title="t"
    )
    runner = web.AppRunner(await server._make_app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{port}/ws"
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await session.ws_connect(url)
            assert refused.value.status == 401
            ws = await session.ws_connect(url, headers={"Cookie": f"{cookie_name(port)}={TOKEN}"})
            deadline = asyncio.get_running_loop().time() + 20
            while not record.exists():
                assert asyncio.get_running_loop().time() < deadline, "the console never started"
                await asyncio.sleep(0.05)
            assert len(server.services) == 1
            (service,) = server.services
            await ws.close()
            deadline = asyncio.get_running_loop().time() + 30
            while server.services:
                assert asyncio.get_running_loop().time() < deadline, "the console never ended"
                await asyncio.sleep(0.05)
            assert service.returncode is not None  # ended with its browser session
    finally:
        await runner.cleanup()
    assert json.loads(record.read_text()) == [hostile]  # one argument, as given
    assert not (tmp_path / "pwned").exists()


async def test_the_page_builds_its_urls_from_the_browsers_address() -> None:
    """Through ``ssh -L 9000:127.0.0.1:8000`` the browser asks for localhost:9000: the page's
    websocket and scripts must point there, and at nothing outside."""
    from tui.ui.serve.auth import Token

    server = ConsoleServer(
        ["true"], host="127.0.0.1", port=8000, token=Token(TOKEN, False, "test"), title="t"
    )
    async with TestClient(TestServer(await server._make_app(), host="127.0.0.1")) as client:
        headers = {"Host": "localhost:9000", "Cookie": f"{cookie_name(8000)}={TOKEN}"}
        page = await client.get("/", headers=headers)
        assert page.status == 200
        html = await page.text()
    assert 'data-session-websocket-url="ws://localhost:9000/ws"' in html
    assert 'src="http://localhost:9000/static/js/textual.js"' in html
    assert "googleapis" not in html and "https://" not in html
    assert page.headers["Content-Security-Policy"] == CSP


# --- what one client may hold (issue 36) --------------------------------------------------------

PARTIAL = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
"""A request whose headers never end."""


async def _listening(server: ConsoleServer) -> tuple[web.AppRunner, asyncio.Server]:
    return await server.listen()


async def test_stalled_connections_are_bounded_and_real_requests_answered() -> None:
    """1,100 connections that never finish their headers took serve offline for as long as
    they were held: the address holds at most its limit (the oldest stalled ones give way), a
    real request is answered meanwhile, and a stalled connection is closed by the server."""
    from tui.servers.connections import HEADER_TIMEOUT_S
    from tui.ui.serve.auth import Token

    port = free_ports(1)[0]
    server = ConsoleServer(
        ["true"], host="127.0.0.1", port=port, token=Token(TOKEN, False, "test"), title="t"
    )
    runner, listener = await _listening(server)
    writers: list[asyncio.StreamWriter] = []
    try:
        for _ in range(1100):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(PARTIAL)
            writers.append(writer)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as session:
            for _ in range(3):
                page = await session.get(
                    f"http://127.0.0.1:{port}/", headers={"Cookie": f"{cookie_name(port)}={TOKEN}"}
                )
                assert page.status == 200
        assert server.connections.count("127.0.0.1") <= server.connections.per_address
        assert server.connections.dropped >= 1100 - server.connections.per_address
        # One stalled connection alone is closed by the server, without an answer.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(PARTIAL)
        writers.append(writer)
        assert await asyncio.wait_for(reader.read(), HEADER_TIMEOUT_S + 30) == b""
    finally:
        for writer in writers:
            writer.close()
        listener.close()
        await runner.cleanup()


async def test_browser_sessions_past_the_limit_are_answered_503_in_one_line(
    tmp_path: Path,
) -> None:
    """12 websockets were 12 consoles (621 MiB): past --max-sessions the page and the websocket
    are refused in one line, and a session that ended frees its place."""
    from tui.ui.serve.auth import Token

    port = free_ports(1)[0]
    argv = [sys.executable, "-c", FAKE_CONSOLE, str(tmp_path / "argv.json")]
    server = ConsoleServer(
        argv,
        host="127.0.0.1",
        port=port,
        token=Token(TOKEN, False, "test"),
        title="t",
        max_sessions=2,
    )
    runner, listener = await _listening(server)
    cookie = {"Cookie": f"{cookie_name(port)}={TOKEN}"}
    try:
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{port}"
            first = await session.ws_connect(f"{url}/ws", headers=cookie)
            second = await session.ws_connect(f"{url}/ws", headers=cookie)
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await session.ws_connect(f"{url}/ws", headers=cookie)
            assert refused.value.status == 503
            page = await session.get(f"{url}/", headers=cookie)
            line = (await page.text()).strip()
            assert page.status == 503 and "\n" not in line
            assert line == (
                "gpufleet serve: 2 browser sessions run, the most this server allows "
                "(--max-sessions 2): close one to open another"
            )
            await first.close()
            deadline = asyncio.get_running_loop().time() + 30
            while (await session.get(f"{url}/", headers=cookie)).status != 200:
                assert asyncio.get_running_loop().time() < deadline, "the place was not freed"
                await asyncio.sleep(0.1)
            third = await session.ws_connect(f"{url}/ws", headers=cookie)
            await second.close()
            await third.close()
    finally:
        listener.close()
        await runner.cleanup()
    assert serve_cli.build_parser().parse_known_args([])[0].max_sessions == 4
