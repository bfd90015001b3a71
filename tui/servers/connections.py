"""How many connections one client address may hold open on gpufleet's own HTTP servers (the
agent, ``gpufleet serve``), and which one gives way when it asks for more.

Why: without a token, 1,100 connections that never finished their headers (the open-file
limit is 1,024) took the agent and ``serve`` offline: every real request timed out for the
36-45 s they were held. Each server now closes a connection whose request headers do not
arrive in time (its own setting: ``tui.agent.http_limits``, ``tui.ui.serve.limits``), and this
table holds each address to ``per_address`` connections. A new connection past the limit takes
the place of the address's oldest connection that is not handling a request (its headers still
unfinished, or idle between requests): a real request that arrives during such an attack from
the same address (an SSH tunnel makes every client ``127.0.0.1``) is served, and the stalled
ones give way. Only when every connection of the address is handling a request is the new one
closed at once.
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from typing import Protocol

PER_ADDRESS = 256
"""Default connections one client address may hold open: above the 200 concurrent clients the
agent is measured with (``bench.bench_agent_load``), all from loopback as through a tunnel."""
HEADER_TIMEOUT_S = 10.0
"""Default seconds from a connection's start (or its previous response) to the end of its next
request's headers."""


class Guarded(Protocol):
    """One connection, as the table sees it."""

    def busy(self) -> bool:
        """Whether it is handling a request now (its headers arrived; no answer sent yet)."""
        ...

    def drop(self) -> None:
        """Close it now."""
        ...


class ConnectionTable:
    """The open connections of each client address, oldest first.

    Args:
        per_address: Connections one address may hold (>= 1).
        on_drop: Called with the address of each connection dropped or refused (a count).
    """

    def __init__(
        self, per_address: int = PER_ADDRESS, on_drop: Callable[[str], None] | None = None
    ) -> None:
        if per_address < 1:
            raise ValueError(f"per_address must be >= 1, got {per_address}")
        self.per_address = per_address
        """Connections one address may hold."""
        self.dropped = 0
        """Connections closed to make room, or refused."""
        self._on_drop = on_drop
        self._open: dict[str, dict[Guarded, None]] = {}

    def admit(self, address: str, connection: Guarded) -> bool:
        """Count ``connection`` for ``address``, making room when the address is at its limit.

        Returns:
            False when every connection of the address is busy: the caller closes this one.
        """
        held = self._open.setdefault(address, {})
        if len(held) >= self.per_address:
            victim = next((c for c in held if not c.busy()), None)
            self.dropped += 1
            if self._on_drop is not None:
                self._on_drop(address)
            if victim is None:
                return False
            del held[victim]
            victim.drop()
        held[connection] = None
        return True

    def release(self, address: str, connection: Guarded) -> None:
        """Forget ``connection`` (it closed); nothing when it was not counted."""
        held = self._open.get(address)
        if held is None:
            return
        held.pop(connection, None)
        if not held:
            del self._open[address]

    def count(self, address: str) -> int:
        """Connections ``address`` holds open now."""
        return len(self._open.get(address, ()))


def raise_open_file_limit(ceiling: int = 65536) -> int:
    """Raise this process's open-file limit to its hard limit (at most ``ceiling``): systemd's
    default soft limit of 1,024 is what 1,100 idle connections exhausted.

    Returns:
        The soft limit now.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = ceiling if hard == resource.RLIM_INFINITY else min(hard, ceiling)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError):
            return soft
        return wanted
    return soft
