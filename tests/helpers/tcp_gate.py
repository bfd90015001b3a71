"""A TCP relay on a loopback port: the face of a server that a test can take away and bring back.

``python tests/helpers/tcp_gate.py LISTEN_PORT TARGET_PORT`` copies bytes both ways between each
client of LISTEN_PORT and a new connection to TARGET_PORT. Killing the relay is an outage
(connections drop, new ones are refused) while the server behind it keeps its state: S3 loses no
bucket when the network goes away, whereas a restarted moto starts empty and answers "no such
bucket" to whoever asks before its recording is replayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()


async def _serve(listen: int, target: int) -> None:
    async def relay(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pipe(client_r, server_w), _pipe(server_r, client_w))

    server = await asyncio.start_server(relay, "127.0.0.1", listen, reuse_address=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1]), int(sys.argv[2])))
