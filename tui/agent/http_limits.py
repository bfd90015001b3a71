"""What the agent lets one client hold: connections per address and the time to send a
request's headers (uvicorn's h11 protocol, with the two limits uvicorn lacks).

uvicorn closes a connection idle between requests after ``timeout_keep_alive`` (its own
setting, ``IDLE_TIMEOUT_S`` here), but a connection whose request headers never finish has no
deadline there: 1,100 of them (past the open-file limit of 1,024) took the agent offline for as
long as they were held, no token needed. ``guarded_h11`` makes uvicorn's protocol close a
connection whose next request's headers have not arrived ``header_timeout_s`` after the
connection's start or its previous response, and hold each client address to
``tui.servers.connections``'s table (a connection is busy while its request is answered).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from tui.servers.connections import HEADER_TIMEOUT_S, ConnectionTable

IDLE_TIMEOUT_S = 5
"""uvicorn's ``timeout_keep_alive``: an idle connection between requests is closed after it."""


def guarded_h11(
    table: ConnectionTable, header_timeout_s: float = HEADER_TIMEOUT_S
) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a header deadline and the address table (``http=`` of
    ``uvicorn.Config``).

    Args:
        table: The connections of each client address (one per server).
        header_timeout_s: Seconds a connection has to finish its next request's headers.

    Returns:
        The protocol class.
    """

    class GuardedH11(H11Protocol):
        """One connection of the agent."""

        _address = ""
        _admitted = False
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._address = self.client[0] if self.client else ""
            if not table.admit(self._address, self):
                transport.close()
                return
            self._admitted = True
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            if self._admitted:
                table.release(self._address, self)
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request's headers, from now

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(header_timeout_s, self._late, self.cycle)

        def _late(self, armed: object) -> None:
            """No request has begun since the deadline was armed: close."""
            self._deadline = None
            if self.cycle is armed and not self.busy() and not self.transport.is_closing():
                self.transport.close()

        def busy(self) -> bool:
            """A request of this connection is being answered."""
            return self.cycle is not None and not self.cycle.response_complete

        def drop(self) -> None:
            """Close the connection (to make room for another of its address)."""
            self.transport.close()

    return GuardedH11
