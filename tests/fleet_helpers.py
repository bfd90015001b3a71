"""Shared helper of the fleet-monitor tests: poll a real monitor until a condition holds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import FleetSnapshot


async def poll_until(
    monitor: FleetMonitor, done: Callable[[FleetSnapshot], bool], deadline_s: float = 60.0
) -> FleetSnapshot:
    """Poll ``monitor`` until ``done(snapshot)``; fail with the last snapshot after the deadline."""
    deadline = time.monotonic() + deadline_s
    snap = await monitor.poll()
    while not done(snap):
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached; last snapshot: {snap}")
        await asyncio.sleep(0.05)  # the monitor's own cadence, shortened; not a synchronisation
        snap = await monitor.poll()
    return snap
