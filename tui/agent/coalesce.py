"""One computation for every API caller that asks the same thing at the same time.

Under 200 concurrent clients, an agent that reads the fleet state, a journal or every server's
``/metrics`` once per request does that work 200 times at once: its threads queue, each request
holds its own copy of the answer, and memory grows with the clients (issue 31 measured ``GET
/api/v1/counters`` at p50 6.4 s and 51 -> 245 MiB). ``Coalesced`` runs one computation per key:
a caller that arrives while it runs waits for that one (single flight), and its answer is kept
for callers whose key is the same (the journal's file identity, the view's number) until the key
moves on. Memory is bounded by design: at most ``keep`` answers are kept (oldest dropped first),
and in-flight computations are one per distinct key.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class Coalesced(Generic[K, T]):
    """``await get(key)``: ``compute(key)`` once for every caller of that key at that time.

    Args:
        compute: The work (a coroutine function of the key).
        keep: Answers kept after their computation ended (0: single flight only, every caller
            that arrives after an answer starts a new computation).
    """

    def __init__(self, compute: Callable[[K], Awaitable[T]], keep: int = 0) -> None:
        self._compute = compute
        self._keep = keep
        self._flights: dict[K, asyncio.Future[T]] = {}
        self._done: OrderedDict[K, T] = OrderedDict()

    async def get(self, key: K) -> T:
        """The answer for ``key``: kept, in flight, or computed now.

        Raises:
            Whatever ``compute`` raised (every caller of that flight gets it; nothing is kept).
        """
        if key in self._done:
            self._done.move_to_end(key)
            return self._done[key]
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self._compute(key))
            self._flights[key] = flight
            flight.add_done_callback(lambda done: self._landed(key, done))
        # A caller that goes away (its client hung up) must not cancel the others' answer.
        return await asyncio.shield(flight)

    def _landed(self, key: K, flight: asyncio.Future[T]) -> None:
        self._flights.pop(key, None)
        if flight.cancelled():
            return
        failed = flight.exception() is not None  # retrieved: no "never retrieved" warning
        if self._keep and not failed:
            self._done[key] = flight.result()
            while len(self._done) > self._keep:
                self._done.popitem(last=False)

    def forget(self) -> None:
        """Drop every kept answer (the next caller computes again)."""
        self._done.clear()
