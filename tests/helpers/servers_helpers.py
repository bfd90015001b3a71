"""A canned SGLang-shaped HTTP server on loopback, for the probe and monitor tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import repo_paths

from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import ServerSnapshot, ServerState

FIXTURES = repo_paths.FIXTURES / "servers"

Reply = tuple[int, str, str]
"""(status, content type, body)."""
OK: Reply = (200, "text/plain", "")
UNAVAILABLE: Reply = (503, "text/plain", "")
Route = Reply | list[Reply] | Callable[[], Reply]
"""A reply, replies served in turn (the last one repeats), or a function that gives one."""
REMOTE = "127.0.0.2"
"""Loopback, but not an address the monitor treats as local (no process discovery)."""


class FakeClock:
    """The monitor's clock, moved by the test (``clock.now += 30``) instead of waited for."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def polled_state(monitor: FleetMonitor) -> ServerState:
    """The first server's state after one poll."""
    snap = await monitor.poll()
    server = snap.panels[0].server
    assert server is not None
    return server.state


@dataclass
class CannedServer:
    """Routes path -> reply, or path -> list of replies served in turn (the last one repeats)."""

    port: int = 0
    routes: dict[str, Route] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)
    release: threading.Event = field(default_factory=threading.Event)
    """Set to let every handler blocked in a slow route finish (done at teardown)."""

    def reply(self, path: str) -> Reply:
        self.hits[path] = self.hits.get(path, 0) + 1
        route = self.routes.get(path)
        if route is None:
            return 404, "text/plain", "Not Found"
        if callable(route):
            return route()
        if isinstance(route, list):
            return route[0] if len(route) == 1 else route.pop(0)
        return route

    def slow(self, reply: Reply) -> Callable[[], Reply]:
        """A route that answers only when ``release`` is set (bounded by 30 s)."""

        def handler() -> Reply:
            self.release.wait(timeout=30)
            return reply

        return handler


def json_reply(body: str, status: int = 200) -> Reply:
    return status, "application/json", body


def metrics_reply() -> Reply:
    return 200, "text/plain; version=0.0.4", (FIXTURES / "metrics.txt").read_text()


def idle_metrics_reply() -> Reply:
    """A server with nothing to do (a frozen busy reply would rightly read as stuck)."""
    text = "sglang:num_running_reqs 0\nsglang:num_queue_reqs 0\nsglang:gen_throughput 0\n"
    return 200, "text/plain; version=0.0.4", text


@contextmanager
def canned_server(
    routes: dict[str, Route],
    host: str = "127.0.0.1",
) -> Iterator[CannedServer]:
    """Serve ``routes`` on ``host`` (a loopback address) at a free port until the block exits.

    A loopback address other than 127.0.0.1 (e.g. 127.0.0.2) makes the monitor treat the server
    as remote, so no process discovery is involved.
    """
    canned = CannedServer(routes=routes)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn does

        def do_GET(self) -> None:
            status, ctype, body = canned.reply(self.path.split("?")[0])
            data = body.encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer((host, 0), Handler)
    httpd.daemon_threads = True
    canned.port = httpd.server_address[1]
    # A short poll interval keeps shutdown() (and so each test) fast.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield canned
    finally:
        canned.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


async def five_polls_of_a_loaded_server() -> tuple[ServerSnapshot, dict[str, int]]:
    """A monitor of its own (its own client and wire) polls one ready server under load five
    times, a second apart: the server's reading after them (running 14, queued 34, asked for
    64) and what the server was asked (path -> hits)."""
    from tui.fleet.spec import FleetSpec, ServerSpec
    from tui.gpu.source import NoGpuSource

    routes: dict[str, Route] = {
        "/ready": OK,
        "/metrics": metrics_reply(),
        "/server_info": json_reply('{"max_running_requests": 64}'),
    }
    clock = FakeClock()
    with canned_server(routes, host=REMOTE) as server:
        spec = FleetSpec((ServerSpec(0, server.port, host=REMOTE),))
        monitor = FleetMonitor(spec, NoGpuSource("none"), probe_timeout=2.0, clock=clock)
        try:
            for _ in range(5):
                snap = await monitor.poll()
                clock.now += 1.0
        finally:
            await monitor.aclose()
    served = snap.panels[0].server
    assert served is not None
    return served, dict(server.hits)
