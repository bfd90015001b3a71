"""A webhook on loopback for the alert tests: it keeps each POST's JSON body (the alerts'
tests of the core and the headless watcher's end-to-end test)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Hook(http.server.BaseHTTPRequestHandler):
    """A webhook on loopback: each POST's JSON kept; answers ``status`` (500s first if asked)."""

    bodies: list[dict[str, Any]]
    failures: list[int]
    received: threading.Event

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        data = json.loads(self.rfile.read(length))
        if self.failures:
            self.failures.pop()
            self.send_response(500)
        else:
            self.bodies.append(data)
            self.received.set()
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def webhook(failures: int = 0) -> Iterator[tuple[str, type[Hook]]]:
    """A ``Hook`` on a free loopback port, its first ``failures`` POSTs answered 500: yields
    its URL and its handler class (whose ``bodies`` are the POSTs it kept)."""
    handler = type("Handler", (Hook,), {"bodies": [], "failures": [500] * failures,
                                         "received": threading.Event()})  # fmt: skip
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler
    finally:
        server.shutdown()
        server.server_close()
