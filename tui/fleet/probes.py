"""The monitor's probe policy: which HTTP probes a server gets at each poll, and when.

The refresh uses cheap signals only: ``/ready`` (SGLang 0.5.23 answers it at once), ``/metrics``
and the log. A ready server whose last ``/metrics`` read answered needs no readiness probe for
``ready_interval``: that answer already proves it up (the monitor reads those steady loads in one
blocking batch, ``tui.servers.batch_fetch``; the rest is asyncio). ``/server_info`` goes through
the scheduler, so it is read when a server becomes ready and then every
``server_info_interval``. SGLang's generating health check (``/health_generate``, >= 1 s, up to
20 s) runs in a background task per server every ``health_interval`` and is never awaited by the
refresh: it is what makes SGLang notice a hung scheduler (UnHealthy: ``/ready`` 503), and on
servers without ``/ready`` it is the readiness. A server being stopped or cordoned gets no
generating probe: SGLang's drain waits for it as for any request.

Separate from the monitor (``tui.fleet.monitor``), which joins processes, logs, GPUs and these
answers into the snapshot: this module decides only what to ask; its memory between polls is the
servers' trackers (``tui.fleet.tracker``), its settings a frozen value.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tui.fleet.tracker import Tracker
from tui.servers.probe import ProbeStatus, Readiness, ServerLoad


@dataclass(frozen=True, slots=True)
class ProbePolicy:
    """When each probe of a server runs (the monitor's settings; the memory is its trackers')."""

    server_info_interval: float = 30.0
    """Seconds between ``/server_info`` reads of a ready server (it goes through the scheduler,
    so rarely); it is also read when a server becomes ready."""
    health_interval: float = 30.0
    """Seconds between generating health probes (``/health_generate``) of a ready server, run
    in the background; a server without ``/ready`` gets one whenever the previous one finished
    (it is its readiness)."""
    ready_interval: float = 10.0
    """Seconds between ``/ready`` probes of a ready server whose ``/metrics`` keeps answering
    200: that answer already proves it up, and one request per server per poll instead of two
    halves the monitor's CPU. A failed ``/metrics`` asks readiness the same poll; a drain
    (``/ready`` 503) shows within this interval. 0 asks readiness every poll."""
    clock: Callable[[], float] = field(default=time.time)
    """Wall clock (tests pass a fake one)."""

    def load_suffices(self, tracker: Tracker, now: float) -> bool:
        """A ready server whose last load read answered, with no readiness probe due."""
        previous = tracker.readiness
        return (
            previous is not None
            and previous.status is ProbeStatus.READY
            and tracker.load is not None
            and now - tracker.checked_at < self.ready_interval
        )

    async def probe_all(
        self, trackers: Sequence[Tracker], steady: dict[int, ServerLoad | None], now: float
    ) -> None:
        """Probe every server on the event loop for this poll, at once.

        Args:
            trackers: The fleet's servers.
            steady: By tracker position, the steady ``/metrics`` read taken this poll (None:
                it failed, so readiness is asked at once); a server not in it is probed whole.
            now: When the poll began.
        """
        # Servers whose steady read answered need nothing on the loop (no coroutine at all,
        # the point of the batch) unless /server_info is due; the others are probed here.
        waits = []
        for position, tracker in enumerate(trackers):
            if position not in steady:
                waits.append(self._probe(tracker))
            elif (load := steady[position]) is None:
                waits.append(self._probe(tracker, load_failed=True))
            elif self._steady(tracker, now, load):
                waits.append(self._server_info(tracker, now, became_ready=False))
        if waits:
            await asyncio.gather(*waits)

    def _start_health(self, tracker: Tracker, now: float, due: bool) -> None:
        """Start the generating probe in the background when ``due`` and none is in flight."""
        task = tracker.health_task
        if task is not None and task.done():
            tracker.health_task = None
            if not task.cancelled() and task.exception() is None:
                tracker.health = task.result()
        if tracker.health_task is None and due:
            tracker.health_at = now
            tracker.health_task = asyncio.ensure_future(tracker.probe.health_generate())

    async def _readiness(self, tracker: Tracker, now: float) -> Readiness:
        """``/ready``; on a server without it, the background generating probe's last answer.

        Why: in SGLang 0.5.23 ``/health`` and ``/health_generate`` take >= 1 s (up to 20 s on a
        hung scheduler): awaited here they would hold the whole refresh.
        """
        quick = await tracker.probe.ready_endpoint()
        if quick is not None:
            return quick
        self._start_health(tracker, now, due=True)
        return tracker.health or Readiness(ProbeStatus.UP, endpoint="/health")

    def _health_due(self, tracker: Tracker, now: float) -> bool:
        """A ready server whose generating probe is due (``health_interval``), unless it is
        being stopped or cordoned: SGLang's drain waits for a generating probe as for any
        request (its ``HEALTH_CHECK_`` rid), so a probe sent as a drain begins holds it."""
        return (
            not tracker.stopping
            and not tracker.cordoned
            and tracker.ever_ready
            and tracker.readiness is not None
            and tracker.readiness.status is ProbeStatus.READY
            and now - tracker.health_at >= self.health_interval
        )

    def _steady(self, tracker: Tracker, now: float, load: ServerLoad) -> bool:
        """Take a steady read's load (it answered: still up); True when ``/server_info`` is
        due as well."""
        self._start_health(tracker, now, due=self._health_due(tracker, now))
        tracker.load, tracker.load_at = load, now
        return now - tracker.info_at >= self.server_info_interval

    async def _probe(self, tracker: Tracker, *, load_failed: bool = False) -> None:
        """Probe one server on the event loop; ``load_failed``: its steady read failed this
        poll, so readiness is asked at once (not the load again)."""
        now = self.clock()
        self._start_health(tracker, now, due=self._health_due(tracker, now))
        if not load_failed and self.load_suffices(tracker, now):
            load = await tracker.probe.load()
            if load is not None:  # it answered: still up, and this is the poll's one request
                tracker.load, tracker.load_at = load, now
                await self._server_info(tracker, now, became_ready=False)
                return
        readiness = await self._readiness(tracker, now)
        tracker.checked_at = now
        tracker.readiness = readiness
        if readiness.status is not ProbeStatus.READY:
            tracker.load = None
            return
        became_ready = not tracker.ever_ready
        tracker.ever_ready = True
        if tracker.ready_at is None:
            tracker.ready_at = now
        tracker.load = await tracker.probe.load()
        if tracker.load is not None:
            tracker.load_at = now
        await self._server_info(tracker, now, became_ready)

    async def _server_info(self, tracker: Tracker, now: float, became_ready: bool) -> None:
        if became_ready or now - tracker.info_at >= self.server_info_interval:
            tracker.info_at = now
            tracker.info = await tracker.probe.server_info() or tracker.info
