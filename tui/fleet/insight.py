"""What the monitor derives across its servers and GPUs, beyond each one's own state: the fleet's
latency percentiles (``tui.fleet.latency``), the GPUs that stand out from it
(``tui.fleet.imbalance``), and each GPU's energy with its tokens per joule (``tui.fleet.energy``).

The monitor builds the snapshot as before and hands it here last (``Insight.finish``); the slow
GPU counters (the energy counter, ~4 ms a GPU on an H200) are read in the poll's thread every
``SLOW_EVERY_S`` (``Insight.read_slow``), never on the event loop.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence

from tui.fleet.energy import EnergyWindow, fleet_energy
from tui.fleet.imbalance import READINGS, Outlier, outliers
from tui.fleet.latency import FleetLatency
from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerSnapshot, ServerState
from tui.fleet.tracker import Tracker
from tui.gpu.energy import EnergyMeter
from tui.gpu.snapshot import GpuSlowSnapshot, GpuSource
from tui.gpu.source import sample_slow

LIVE_STATES = frozenset(
    {ServerState.READY, ServerState.STUCK, ServerState.STALE, ServerState.STOPPING}
)
"""States whose load is read (``tui.fleet.server_state``): their windows count in the fleet's."""
SLOW_EVERY_S = 10.0
"""Seconds between two reads of the GPUs' energy counters (the power samples bridge them)."""

_VALUES: dict[str, Callable[[ServerSnapshot], float | int | None]] = {
    "queue": lambda s: s.queued,
    "running": lambda s: s.running,
    "kv": lambda s: s.token_usage,
    "tok_s": lambda s: s.gen_throughput,
}
"""Each imbalance reading (``tui.fleet.imbalance.READINGS``) from a server's snapshot."""


class Insight:
    """The monitor's fleet-wide readings between polls (owned by one monitor).

    Args:
        slow_every_s: Seconds between reads of the energy counters.
        clock: Monotonic seconds (tests pass their own).
    """

    def __init__(
        self, slow_every_s: float = SLOW_EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.slow_every_s = slow_every_s
        self._clock = clock
        self._slow_at = float("-inf")
        self._slow: tuple[GpuSlowSnapshot, ...] = ()
        self._meters: dict[tuple[str, int], EnergyMeter] = {}
        """One per card (node, its index there): two slots on one card read one counter."""
        self._cards: dict[int, tuple[str, int]] = {}
        """Each metered slot's card."""
        self._windows: dict[int, EnergyWindow] = {}
        self._latency = FleetLatency()

    def read_slow(self, source: GpuSource) -> None:
        """Read the GPUs' energy counters when due. Blocking: the poll's thread."""
        now = self._clock()
        if now - self._slow_at < self.slow_every_s:
            return
        self._slow_at = now
        try:
            self._slow = sample_slow(source)
        except Exception:  # a driver hiccup costs a counter reading; the power still meters
            self._slow = ()

    def finish(self, snapshot: FleetSnapshot, trackers: Sequence[Tracker]) -> FleetSnapshot:
        """The snapshot with the fleet-wide readings added.

        Args:
            snapshot: The poll's snapshot (panels built).
            trackers: The monitor's trackers, whose ``state`` this poll set.

        Returns:
            A new snapshot (the same one when nothing is added).
        """
        live = [t.latency for t in trackers if t.state in LIVE_STATES]
        latency = self._latency.of(live, snapshot.taken_at)
        imbalance = fleet_imbalance(snapshot.panels)
        panels = self._metered(snapshot, {t.spec.gpu_index: t for t in trackers})
        energy = fleet_energy(
            (card, self._meters[card].joules, self._windows[slot])
            for slot, card in sorted(self._cards.items())
        )
        if latency is None and not imbalance and energy is None:
            return snapshot
        return dataclasses.replace(
            snapshot, panels=panels, latency=latency, imbalance=imbalance, energy=energy
        )

    def _metered(
        self, snapshot: FleetSnapshot, trackers: dict[int, Tracker]
    ) -> tuple[GpuPanel, ...]:
        """Feed each card's meter its power (and the counter, when read), once a poll however
        many slots run on it, and each slot's window."""
        slow, self._slow = {r.index: r for r in self._slow}, ()
        cards = {p.gpu_index: _card(p) for p in snapshot.panels if p.gpu is not None}
        fed: set[tuple[str, int]] = set()
        panels = []
        for panel in snapshot.panels:
            gpu = panel.gpu
            if gpu is None:
                panels.append(panel)
                continue
            card = self._cards[panel.gpu_index] = cards[panel.gpu_index]
            meter = self._meters.get(card)
            if meter is None:
                meter = self._meters[card] = EnergyMeter()
            if card not in fed:
                fed.add(card)
                meter.power(gpu.taken_at, gpu.power_w)
                counter = slow.get(card[1]) if not panel.node else slow.get(panel.gpu_index)
                if counter is not None:
                    meter.energy_counter(counter.taken_at, counter.energy_mj)
            tracker = trackers.get(panel.gpu_index)
            load = tracker.load if tracker is not None else None
            epoch = tracker.process.pid if tracker is not None and tracker.process else None
            window = self._windows.get(panel.gpu_index)
            if window is None:
                window = self._windows[panel.gpu_index] = EnergyWindow()
            window.add(gpu.taken_at, meter.joules, load.generation_tokens if load else None, epoch)
            energy = window.reading(meter.joules, meter.counter)
            shared = tuple(
                s for s, c in sorted(cards.items()) if c == card and s != panel.gpu_index
            )
            if shared:
                energy = dataclasses.replace(energy, shared_with=shared)
            panels.append(dataclasses.replace(panel, energy=energy))
        return tuple(panels)


def _card(panel: GpuPanel) -> tuple[str, int]:
    """The card a panel's slot runs on: its node, and the card's index there."""
    return panel.node, panel.local_index if panel.device is None else panel.device


def fleet_imbalance(panels: Iterable[GpuPanel]) -> tuple[Outlier, ...]:
    """Every reading's outliers over the servers that are ready (a starting or stopped server
    is not imbalance: its state says what it is).

    Args:
        panels: The snapshot's panels.

    Returns:
        The outliers, reading by reading (``READINGS``' order), most distant first in each.
    """
    ready = [p for p in panels if p.server is not None and p.server.state is ServerState.READY]
    servers = {p.gpu_index: p.server for p in ready if p.server is not None}
    names = {p.gpu_index: f"{p.node} GPU {p.local_index}" if p.node else f"GPU {p.gpu_index}"
             for p in ready}  # fmt: skip
    found: list[Outlier] = []
    for reading in READINGS:
        value = _VALUES[reading.name]
        values = {gpu: float(v) for gpu, s in servers.items() if (v := value(s)) is not None}
        found += outliers(values, reading, names)
    return tuple(found)
