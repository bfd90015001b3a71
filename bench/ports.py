"""Free loopback ports for the servers a test or a benchmark starts (the one door for them).

Why not the kernel's ``bind(port 0)``: that hands out a port from the ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 by default), the same range every
outgoing connection's local port comes from. Between choosing a port and a server binding it, a
client anywhere on the machine (the console's probes, the pipeline, the other test worker's
fleet) may connect from that very port, and the server dies with ``[Errno 98] address already
in use``; a fresh clone's run lost a simulated GPU that way (its warmup then found no
``/model_info``). Ports below the ephemeral range are never handed to a connection, and each
pytest-xdist worker chooses in its own slice of them, so two workers never choose the same one.
A port is offered only when it binds right now (held while choosing, so a run of them is free
together); the start is random, so a port a previous test's server may still hold is unlikely
to be offered again soon.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
from pathlib import Path

_LOW = 10_000
"""The pool's floor: clear of the well-known and registered ports services commonly take."""

_SLICES = 8
"""Slices of the pool: one per pytest-xdist worker (gw0..gw7; more wrap around)."""


def _ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def pool() -> range:
    """The ports this process may choose from: its worker's slice below the ephemeral range."""
    top = max(min(_ephemeral_floor(), 32_768), _LOW + 2_000)
    width = (top - _LOW) // _SLICES
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) % _SLICES if worker[2:].isdigit() else 0
    return range(_LOW + index * width, _LOW + (index + 1) * width)


def _bindable(sock: socket.socket, port: int) -> bool:
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True


def free_ports(count: int, *, consecutive: bool = False) -> list[int]:
    """``count`` distinct loopback ports nothing holds now, outside the ephemeral range.

    Args:
        count: How many.
        consecutive: Ports ``p, p+1, ...`` (a profile with a base port).

    Returns:
        The ports, ascending when ``consecutive``.

    Raises:
        RuntimeError: the pool has no such ports free.
    """
    ports = pool()
    start = random.randrange(len(ports))
    order = [ports[(start + i) % len(ports)] for i in range(len(ports))]
    with contextlib.ExitStack() as held:
        chosen: list[int] = []
        for port in order:
            if consecutive and chosen and port != chosen[-1] + 1:
                chosen = []  # the run broke (wrapped around): start a new one here
                held.close()
            sock = held.enter_context(socket.socket())
            if _bindable(sock, port):
                chosen.append(port)
                if len(chosen) == count:
                    return chosen
            elif consecutive:
                chosen = []
                held.close()
    raise RuntimeError(f"no {count} free loopback ports in {ports.start}-{ports.stop - 1}")


def free_port() -> int:
    """One loopback port nothing holds now (see :func:`free_ports`)."""
    return free_ports(1)[0]
