"""The warmup: SGLang 0.5.23's ``_wait_and_warmup``, over real HTTP to the server itself.

``srt/entrypoints/http_server.py``: started from the app's lifespan, it polls ``GET /model_info``
once a second (after a first one-second sleep) for up to 120 tries; then it sends one request:
``POST /v1/chat/completions`` with an image for a model that understands images (Qwen3.6 does),
else ``POST /generate`` (``max_new_tokens`` 8). Its success sets the server Up; then
``POST /freeze_gc`` and ``The server is fired up and ready to roll!``. A failure logs
``Initialization failed. warmup error: <traceback>`` and kills the tree (exit 137). With
``--skip-server-warmup`` the server is Up at once. The one-second sleeps are part of the startup
and scale with it (``--sim-startup-seconds`` or ``--sim-speed``).
"""

from __future__ import annotations

import asyncio
import json
import traceback
from collections.abc import Callable

from tui.sim import logfmt
from tui.sim.state import ServerStatus, SimState

MODEL_INFO_TRIES = 120
"""``_execute_server_warmup``'s tries of ``/model_info``."""

_IMAGE = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"
    "z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


async def http_request(
    host: str, port: int, method: str, path: str, body: object = None, timeout: float = 5.0
) -> tuple[int, bytes]:
    """One HTTP/1.1 request to the server itself (``requests`` in SGLang; no client library here).

    Returns:
        (status, body).

    Raises:
        OSError: the connection failed; TimeoutError: no answer in time.
    """
    payload = b"" if body is None else json.dumps(body).encode()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    ).encode()

    async def exchange() -> tuple[int, bytes]:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(head + payload)
            await writer.drain()
            data = await reader.read()
        finally:
            writer.close()
        status_line, _, rest = data.partition(b"\r\n")
        _, _, content = rest.partition(b"\r\n\r\n")
        return int(status_line.split()[1]), content

    return await asyncio.wait_for(exchange(), timeout)


class Warmup:
    """The warmup of one server."""

    def __init__(
        self,
        state: SimState,
        host: str,
        port: int,
        second: float,
        first_request_s: float,
        skip: bool,
        kill_tree: Callable[[], None],
    ) -> None:
        """Args:
        state: the server.
        host, port: where it listens (a wildcard bind is reached on loopback).
        second: wall seconds of one of SGLang's one-second sleeps (the startup's scale).
        first_request_s: extra wall seconds the first request takes (JIT, allocator warm-up).
        skip: ``--skip-server-warmup``.
        kill_tree: ``kill_process_tree`` of this process, itself included.
        """
        self.state = state
        self.host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        self.port = port
        self.second = second
        self.first_request_s = first_request_s
        self.skip = skip
        self.kill_tree = kill_tree

    async def run(self) -> None:
        """Warm up, then print the ready line; or fail the way SGLang does."""
        state = self.state
        if self.skip:
            state.server_status = ServerStatus.UP
        else:
            try:
                await self._warm()
            except Exception:
                state.emit(
                    f"Initialization failed. warmup error: {traceback.format_exc()}", info=False
                )
                self.kill_tree()
                return
            state.server_status = ServerStatus.UP
        try:
            status, _ = await http_request(self.host, self.port, "POST", "/freeze_gc", timeout=10)
            if status >= 400:
                raise OSError(f"/freeze_gc answered {status}")
        except (OSError, TimeoutError) as error:
            state.emit(f"post-warmup freeze_gc failed: {error}", info=False)
        state.emit(logfmt.READY_LINE)

    async def _warm(self) -> None:
        info: dict[str, object] | None = None
        last: BaseException | None = None
        for _ in range(MODEL_INFO_TRIES):
            await asyncio.sleep(self.second)
            try:
                status, content = await http_request(self.host, self.port, "GET", "/model_info")
                if status == 200:
                    info = json.loads(content)
                    break
                last = AssertionError(f"res=<Response [{status}]>")
            except (OSError, TimeoutError, ValueError) as error:
                last = error
        if info is None:
            raise RuntimeError(f"/model_info never answered: {last!r}")
        await asyncio.sleep(self.first_request_s)
        body: dict[str, object]
        if info.get("has_image_understanding"):
            path = "/v1/chat/completions"
            body = {
                "model": self.state.served_model_name,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": _IMAGE}},
                            {"type": "text", "text": "Describe the image."},
                        ],
                    }
                ],
                "max_tokens": 8,
                "stream": False,
                "temperature": 0.0,
            }
        else:
            path = "/generate"
            body = {
                "text": "The capital city of France is",
                "sampling_params": {"temperature": 0, "max_new_tokens": 8},
            }
        status, content = await http_request(self.host, self.port, "POST", path, body, 600.0)
        if status != 200:
            raise AssertionError(content.decode(errors="replace"))
