"""One canary of the search, watched: its progress reported, and cancelled cleanly on a stop.

The engine's launch runs in a thread that cannot be cut in half, so a stop asked while the
canary GPU is being restarted waits until it is up (or failed); from then on only the measuring
window remains, which cancels cleanly (the sampler stops, the operation lock is released, no
canary entry is journalled). The caller then puts the canary GPU back on the incumbent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from tui.ops.events import EventSink, OpEvent
from tui.retune.events import GpuFailed, GpuReady
from tui.rollout.canary_result import CanaryLook, CanaryResult


class CanaryWatch:
    """Runs one canary while watching for a stop.

    Args:
        gpu: The canary GPU.
        poll_s: How often a stop is looked for and progress reported.
        forward: Receives every event of the canary too (the search's sink).
    """

    def __init__(self, gpu: int, poll_s: float, forward: EventSink | None = None) -> None:
        self.gpu = gpu
        self.poll_s = poll_s
        self.forward = forward
        self.up = False
        """True once the canary GPU is up (or failed): only the window is left."""
        self.look: CanaryLook | None = None
        """The canary's latest look."""

    def sink(self, event: OpEvent) -> None:
        """The canary's event sink: follows its GPU and its looks, forwards everything."""
        if isinstance(event, GpuReady | GpuFailed) and event.gpu == self.gpu:
            self.up = True
        if isinstance(event, CanaryLook):
            self.look = event
        if self.forward is not None:
            self.forward(event)

    async def run(
        self,
        canary: Awaitable[CanaryResult],
        stop_asked: Callable[[], Awaitable[bool]],
        progress: Callable[[], Awaitable[None]],
    ) -> tuple[CanaryResult | None, bool]:
        """Run ``canary`` (whose sink is ``self.sink``) to its end or to a stop.

        Args:
            canary: The ``FleetOps.canary`` coroutine.
            stop_asked: Whether the operator asked for a stop (polled until it says yes).
            progress: Called when the GPU came up or a new look arrived (writes the status).

        Returns:
            (result, stop asked), or (None, True) when the canary was cancelled by a stop.
        """
        task = asyncio.ensure_future(canary)
        stop = False
        shown: tuple[bool, CanaryLook | None] = (False, None)
        while not task.done():
            await asyncio.wait({task}, timeout=self.poll_s)
            if (self.up, self.look) != shown:
                shown = (self.up, self.look)
                await progress()
            stop = stop or await stop_asked()
            if stop and self.up and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if task.cancelled():
            return None, True
        return task.result(), stop
