"""What the monitor derives across its servers and GPUs, beyond each one's own state: the fleet's
latency percentiles (``tui.fleet.latency``) and the GPUs that stand out from it
(``tui.fleet.imbalance``).

The monitor builds the snapshot as before and hands it here last (``Insight.finish``); each
part is a pure reading of the trackers' windows, so the poll's own path stays as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from tui.fleet.imbalance import READINGS, Outlier, outliers
from tui.fleet.latency import fleet_latency
from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerState
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
        imbalance = fleet_imbalance(snapshot.panels)
        if latency is None and not imbalance:
            return snapshot
        return dataclasses.replace(snapshot, latency=latency, imbalance=imbalance)


def fleet_imbalance(panels: Iterable[GpuPanel]) -> tuple[Outlier, ...]:
    """Every reading's outliers over the servers that are ready (a starting or stopped server
    is not imbalance: its state says what it is).

    Args:
        panels: The snapshot's panels.

    Returns:
        The outliers, reading by reading (``READINGS``' order), most distant first in each.
    """
    ready = [p for p in panels if p.server is not None and p.server.state is ServerState.READY]
    found: list[Outlier] = []
    for reading in READINGS:
        values = {}
        for panel in ready:
            server = panel.server
            assert server is not None
            value = {
                "queue": server.queued,
                "running": server.running,
                "kv": server.token_usage,
                "tok_s": server.gen_throughput,
            }[reading.name]
            if value is not None:
                values[panel.gpu_index] = float(value)
        found += outliers(values, reading)
    return tuple(found)
