"""An OpenAI-compatible endpoint that answers at once: raw asyncio HTTP/1.1 with keep-alive.

``python bench/peers/instant_openai.py PORT`` serves a fixed chat completion for every POST and
200 for every GET (``/health``). It parses only what it must (the header block and
Content-Length), so on one core it answers far faster than any client under test can ask.
"""

from __future__ import annotations

import asyncio
import json
import sys

_BODY = json.dumps(
    {
        "id": "cmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "default",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "A short story."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16},
    }
).encode()
_POST = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
    + str(len(_BODY)).encode()
    + b"\r\n\r\n"
    + _BODY
)
_GET = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"


class _Conn(asyncio.Protocol):
    def __init__(self) -> None:
        self._buf = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buf += data
        out = []
        while True:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                break
            head = self._buf[:end].lower()
            length = 0
            at = head.find(b"content-length:")
            if at >= 0:
                length = int(head[at + 15 :].split(b"\r\n", 1)[0])
            if len(self._buf) < end + 4 + length:
                break
            self._buf = self._buf[end + 4 + length :]
            out.append(_POST if head.startswith(b"post") else _GET)
        if out and self._transport is not None:
            self._transport.write(b"".join(out))


async def _main(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Conn, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_main(int(sys.argv[1])))
