"""What the monitor derives across its servers and GPUs, beyond each one's own state: the fleet's
latency percentiles (``tui.fleet.latency``).

The monitor builds the snapshot as before and hands it here last (``Insight.finish``); each
part is a pure reading of the trackers' windows, so the poll's own path stays as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tui.fleet.latency import fleet_latency
from tui.fleet.snapshot import FleetSnapshot, ServerState
from tui.fleet.tracker import Tracker

LIVE_STATES = frozenset(
    {ServerState.READY, ServerState.STUCK, ServerState.STALE, ServerState.STOPPING}
)
"""States whose load is read (``tui.fleet.server_state``): their windows count in the fleet's."""


class Insight:
    """The monitor's fleet-wide readings between polls (owned by one monitor)."""

    def finish(self, snapshot: FleetSnapshot, trackers: Sequence[Tracker]) -> FleetSnapshot:
        """The snapshot with the fleet-wide readings added.

        Args:
            snapshot: The poll's snapshot (panels built).
            trackers: The monitor's trackers, whose ``state`` this poll set.

        Returns:
            A new snapshot (the same one when nothing is added).
        """
        live = [t.latency for t in trackers if t.state in LIVE_STATES]
        latency = fleet_latency(live)
        if latency is None:
            return snapshot
        return dataclasses.replace(snapshot, latency=latency)
