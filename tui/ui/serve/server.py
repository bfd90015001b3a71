"""textual-serve's server, run as gpufleet needs it.

Three changes to ``textual_serve.server.Server``, each for a reason:

- the console is started from an argv list (``asyncio.create_subprocess_exec``): textual-serve
  runs a shell command string, and nothing of gpufleet launches through a shell;
- every request passes the token gate (``tui.ui.serve.auth``);
- the page's URLs (websocket, scripts) are built from the address the browser used, so the page
  works through an SSH tunnel on any local port, and it links nothing outside this server.

One console process runs per browser session and ends with it; stopping the server ends them
all (each is our own child: no other process is ever signalled). At most ``max_sessions`` run at
once (``--max-sessions``, default 4): a page or websocket past it is answered 503 in one line.
No token is needed to hold a connection open, so each is bounded (``tui.ui.serve.limits``): its
request's headers within ``HEADER_TIMEOUT_S`` (aiohttp's ``keepalive_timeout``, also the idle
timeout), and ``per_address`` connections per client address.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shlex
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence

import aiohttp_jinja2
from aiohttp import web
from aiohttp.web_runner import GracefulExit
from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager
from textual_serve.server import Server, to_int

from tui.servers.connections import PER_ADDRESS, ConnectionTable, raise_open_file_limit
from tui.ui.serve.auth import Token, cookie_name, token_gate
from tui.ui.serve.limits import HEADER_TIMEOUT_S, MAX_SESSIONS, Busy, GuardedProtocol

log = logging.getLogger("gpufleet.serve")

CONSOLE_QUIT_S = 10.0
"""A console asked to quit (its browser left) is terminated after this long."""

EXTERNAL_LINK = re.compile(r"<link[^>]*?fonts\.googleapis\.com[^>]*>", re.DOTALL)
"""textual-serve's page links a web font from outside; the served page loads nothing external."""


class ConsoleService(AppService):
    """One browser session's console: started from ``argv``, stopped within a deadline.

    Args:
        argv: The console's command line.
        write_bytes: Sends the console's output to the browser.
        write_str: Sends a message to the browser.
        close: Closes the browser's websocket.
        download_manager: textual-serve's downloads (the console offers none).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        write_bytes: Callable[[bytes], Awaitable[None]],
        write_str: Callable[[str], Awaitable[None]],
        close: Callable[[], Awaitable[object]],
        download_manager: DownloadManager,
    ) -> None:
        super().__init__(
            shlex.join(argv),
            write_bytes=write_bytes,
            write_str=write_str,
            close=close,  # type: ignore[arg-type]  # aiohttp's close returns a bool
            download_manager=download_manager,
        )
        self.argv = tuple(argv)
        """The console's command line (the string form is for logs only)."""

    async def _open_app_process(
        self, width: int = 80, height: int = 24
    ) -> asyncio.subprocess.Process:
        """Start the console with the web driver's environment, without a shell."""
        environment = self._build_environment(width=width, height=height)
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environment,
        )
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    @property
    def pid(self) -> int | None:
        """The console's pid (None before it started)."""
        return None if self._process is None else self._process.pid

    @property
    def returncode(self) -> int | None:
        """The console's exit status (None while it runs)."""
        return None if self._process is None else self._process.returncode

    async def stop(self) -> None:
        """Ask the console to quit (its fleet keeps running); terminate it after the deadline."""
        try:
            await asyncio.wait_for(super().stop(), CONSOLE_QUIT_S)
        except (TimeoutError, ConnectionError):
            log.warning(
                "console %s did not quit in %.0f s; terminating it", self.pid, CONSOLE_QUIT_S
            )
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()  # our own child, by the handle that started it
            try:
                await asyncio.wait_for(process.wait(), CONSOLE_QUIT_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()


class ConsoleServer(Server):
    """Serves ``argv`` (a console command line) to browsers that present ``token``.

    Args:
        argv: The console's command line, run once per browser session.
        host: Address to listen on.
        port: Port to listen on.
        token: The secret every request must carry.
        title: The page's title.
        watching: The fleet the consoles watch, in words, for the startup line ("": not said).
        max_sessions: Browser sessions (consoles) at once.
        per_address: Connections one client address may hold open.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        host: str,
        port: int,
        token: Token,
        title: str,
        watching: str = "",
        max_sessions: int = MAX_SESSIONS,
        per_address: int = PER_ADDRESS,
    ) -> None:
        super().__init__(shlex.join(argv), host=host, port=port, title=title)
        self.argv = tuple(argv)
        """The console's command line."""
        self.token = token
        """The secret."""
        self.services: set[ConsoleService] = set()
        """The consoles running now, one per connected browser."""
        self.watching = watching
        """The fleet the consoles watch, in words, for the startup line."""
        self.max_sessions = max_sessions
        """Browser sessions at once."""
        self.connections = ConnectionTable(per_address)
        """The open connections of each client address."""
        self.busy = Busy()
        """The connections whose request is being answered (a session's, for its life)."""
        self._sessions = 0

    def serve(self, debug: bool = False) -> None:
        """Serve until SIGINT or SIGTERM; then end every console and return.

        As textual-serve's own, without its per-request access log (the first request's URL
        carries the token, and logs are kept where a token must not be), and with the limits
        of ``listen``.

        Raises:
            OSError: the address cannot be listened on.
        """
        self.debug = debug
        logging.basicConfig(level=logging.INFO, format="gpufleet serve: %(message)s")
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self.request_exit)  # raises GracefulExit
        raise_open_file_limit()
        runner, listener = loop.run_until_complete(self.listen())
        try:
            loop.run_forever()
        except (GracefulExit, KeyboardInterrupt):
            pass
        finally:
            listener.close()
            loop.run_until_complete(runner.cleanup())  # on_shutdown: every console ended
            loop.close()

    async def listen(self) -> tuple[web.AppRunner, asyncio.Server]:
        """Start the app and listen: aiohttp's runner behind ``GuardedProtocol`` (what
        ``web.run_app`` does, with each connection admitted by the address table first).

        Returns:
            The runner (``cleanup()`` ends it) and the listening server (``close()`` it first).

        Raises:
            OSError: the address cannot be listened on (nothing started).
        """
        runner = web.AppRunner(
            await self._make_app(),
            handle_signals=False,
            access_log=None,
            keepalive_timeout=HEADER_TIMEOUT_S,
        )

        def connection() -> GuardedProtocol:
            handlers = runner.server
            assert handlers is not None  # set up before the listener serves
            return GuardedProtocol(handlers(), self.connections, self.busy)

        # Bound before the app starts: its startup line says where to open it, which must be
        # true (a port in use is one line, and no URL printed).
        listener = await asyncio.get_running_loop().create_server(
            connection, self.host, self.port, reuse_address=True, start_serving=False
        )
        try:
            await runner.setup()
        except BaseException:
            listener.close()
            raise
        await listener.start_serving()
        return runner, listener

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self.busy.middleware())
        app.middlewares.append(token_gate(self.token.value, cookie_name(self.port)))
        return app

    def _full(self) -> web.Response | None:
        """503 with one line when ``max_sessions`` sessions run, else None."""
        if self._sessions < self.max_sessions:
            return None
        line = (
            f"gpufleet serve: {self._sessions} browser sessions run, the most this server "
            f"allows (--max-sessions {self.max_sessions}): close one to open another"
        )
        log.warning("refused a browser session: %s run (--max-sessions)", self._sessions)
        return web.Response(status=503, text=line + "\n")

    async def on_startup(self, app: web.Application) -> None:
        """Say once where the console is (with the token only when it was generated here)."""
        secret = self.token.value if self.token.generated else f"<{self.token.source}>"
        host = f"[{self.host}]" if ":" in self.host else self.host
        print(f"gpufleet serve: open http://{host}:{self.port}/?token={secret}", flush=True)
        print(f"gpufleet serve: each browser session runs: {self.command}", flush=True)
        if self.watching:
            print(f"gpufleet serve: and watches {self.watching}", flush=True)

    async def on_shutdown(self, app: web.Application) -> None:
        """End every console still running."""
        await asyncio.gather(*(service.stop() for service in list(self.services)))

    async def handle_index(self, request: web.Request) -> web.Response:  # type: ignore[override]
        """The page, its URLs relative to the address the browser used (503 when every session
        is taken: the page would open a websocket that is refused)."""
        full = self._full()
        if full is not None:
            return full
        base = f"{request.scheme}://{request.host}"
        websocket = ("wss:" if request.scheme == "https" else "ws:") + f"//{request.host}/ws"
        context = {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": websocket,
            "config": {"static": {"url": f"{base}/static/"}},
            "application": {"name": self.title},
        }
        page = aiohttp_jinja2.render_string("app_index.html", request, context)
        return web.Response(text=EXTERNAL_LINK.sub("", page), content_type="text/html")

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """Run one console for this browser session, as textual-serve does, from ``argv``;
        503 past ``max_sessions``."""
        full = self._full()
        if full is not None:
            return full  # type: ignore[return-value]  # a plain answer: no websocket opened
        self._sessions += 1  # taken before the first await: two at once cannot both pass
        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        service: ConsoleService | None = None
        try:
            await websocket.prepare(request)
            service = ConsoleService(
                self.argv,
                write_bytes=websocket.send_bytes,
                write_str=websocket.send_str,
                close=websocket.close,
                download_manager=self.download_manager,
            )
            self.services.add(service)
            await service.start(width, height)
            log.info("browser session: console pid %s", service.pid)
            await self._process_messages(websocket, service)
        except asyncio.CancelledError:
            await websocket.close()
        except Exception as error:  # one session's failure must not end the server
            log.exception(error)
        finally:
            try:
                if service is not None:
                    await service.stop()
                    self.services.discard(service)
                    log.info(
                        "browser session ended: console pid %s exit %s",
                        service.pid,
                        service.returncode,
                    )
            finally:
                self._sessions -= 1  # once its console has ended: the memory is what counts
        return websocket


def console_argv(console_args: Sequence[str], readonly: bool) -> list[str]:
    """The command line of the console each browser session runs.

    Args:
        console_args: ``gpufleet console`` options (``--profile NAME`` ...).
        readonly: ``--readonly``, else ``--no-readonly`` (the server's choice beats the settings).

    Returns:
        An argv list: this Python, ``-m tui console``, the options.
    """
    mode = "--readonly" if readonly else "--no-readonly"
    return [sys.executable, "-m", "tui", "console", *console_args, mode]
