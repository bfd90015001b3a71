"""Latency percentiles over a rolling window, per server and for the fleet.

Each server's window keeps a reading of its four latency histograms (``tui.servers.histogram``)
every few seconds (``THIN_S``) for ``WINDOW_S``; its percentiles are those of the buckets'
increase over the window, as Prometheus computes ``histogram_quantile(q, increase(...[5m]))``:

* a counter reset (the server restarted: another process, or a bucket that went down) ends a
  segment, and the new process's counts are its increase from zero (``increase`` across a reset);
  what the old process observed within the window still counts;
* with one reading only (a window not yet begun, or ``gpufleet status`` polling once) the
  increase is the histograms themselves: every observation since the server started, said so
  by ``window_s`` None, never passed off as five minutes;
* the fleet's percentiles are those of the servers' increases summed bucket by bucket
  (``sum by (le)``), over the servers whose window has begun.

Percentiles are computed when a reading is added (every ``THIN_S`` at most), not each poll.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from tui.servers.histogram import (
    E2E,
    ITL,
    QUEUE,
    TTFT,
    Histogram,
    merged,
    quantiles,
)

WINDOW_S = 300.0
"""The rolling window (sgtop's 5 minutes)."""
THIN_S = 10.0
"""Seconds between two readings kept: the window moves in steps of this (30 over 5 minutes).
Each reading parses a body's histograms (~0.2 ms); at 5 s they were a sixth of what the
percentiles added to the console's poll."""
QUANTILES = (0.5, 0.9, 0.99)
"""The percentiles shown: p50, p90, p99."""


@dataclass(frozen=True, slots=True)
class Percentiles:
    """One latency's percentiles over the window, in seconds (None: no observation)."""

    p50: float | None
    """Median."""
    p90: float | None
    """90th percentile."""
    p99: float | None
    """99th percentile."""
    count: int | None
    """Observations they come from (requests; tokens for inter-token latency); None where it
    is not known (a replay of the history, which keeps the percentiles only)."""


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """The four latencies of a server (or the fleet) over the window."""

    window_s: float | None
    """Seconds the percentiles cover; None: every observation since the server started (one
    reading so far)."""
    ttft: Percentiles | None = None
    """Time to first token."""
    itl: Percentiles | None = None
    """Inter-token latency."""
    e2e: Percentiles | None = None
    """End-to-end request latency."""
    queue: Percentiles | None = None
    """Time in the scheduler's queue."""


FAMILIES = {"ttft": TTFT, "itl": ITL, "e2e": E2E, "queue": QUEUE}
"""``LatencySummary`` field -> the histogram family it reads."""


def percentiles(histogram: Histogram) -> Percentiles:
    """p50, p90 and p99 of a histogram (an increase) with its observation count."""
    found = quantiles(histogram, QUANTILES)
    p50, p90, p99 = (found[q] for q in QUANTILES)
    return Percentiles(p50, p90, p99, count=round(histogram.count))


def summarise(increases: Mapping[str, Histogram], window_s: float | None) -> LatencySummary:
    """The summary of per-family increases (a family absent: None)."""
    parts = {
        field: percentiles(increases[family]) if family in increases else None
        for field, family in FAMILIES.items()
    }
    return LatencySummary(window_s, **parts)


@dataclass(frozen=True, slots=True)
class _Reading:
    t: float
    histograms: Mapping[str, Histogram]
    restart: bool
    """The counters began again before this reading (its increase is its own counts)."""


class LatencyWindow:
    """One server's rolling window. Not thread-safe: the monitor's poll owns it."""

    def __init__(self, window_s: float = WINDOW_S, thin_s: float = THIN_S) -> None:
        """Args:
        window_s: Seconds the percentiles cover.
        thin_s: Seconds between two readings kept.
        """
        self.window_s = window_s
        self.thin_s = thin_s
        self._readings: list[_Reading] = []
        self._epoch: object = None
        self._increases: dict[str, Histogram] = {}
        self._covered: float | None = None
        self.summary: LatencySummary | None = None
        """The percentiles as of the newest reading (None before the first); a new object
        exactly when a reading was added (the fleet's and the history's cue)."""

    def due(self, t: float) -> bool:
        """Whether a reading taken at ``t`` would be kept as a new one (not thinned away)."""
        return not self._readings or t - self._readings[-1].t >= self.thin_s

    def offer(self, t: float, read: Callable[[], Mapping[str, Histogram]], epoch: object) -> None:
        """Add a reading when due (``read`` is called only then: it parses the body).

        Args:
            t: When the histograms were scraped.
            read: Returns them (empty: the server exports none; nothing is added).
            epoch: The server's identity (its pid): another one is a restart.
        """
        restarted = bool(self._readings) and epoch != self._epoch
        if not restarted and not self.due(t):
            return
        histograms = read()
        if histograms:
            self.add(t, histograms, epoch)

    def add(self, t: float, histograms: Mapping[str, Histogram], epoch: object = None) -> None:
        """Add a reading (the newest) and recompute the percentiles.

        Args:
            t: When the histograms were scraped.
            histograms: By family (``tui.servers.histogram``).
            epoch: The server's identity: another one than the last reading's is a restart.
        """
        last = self._readings[-1] if self._readings else None
        restart = last is not None and (
            epoch != self._epoch or any(_went_down(last.histograms, histograms))
        )
        self._epoch = epoch
        reading = _Reading(t, dict(histograms), restart)
        if last is not None and not restart and len(self._readings) >= 2:
            before = self._readings[-2]
            if not last.restart and t - before.t < self.thin_s:
                self._readings[-1] = reading  # thinned: keep the newest of a short stretch
            else:
                self._readings.append(reading)
        else:
            self._readings.append(reading)
        while len(self._readings) >= 2 and self._readings[1].t <= t - self.window_s:
            self._readings.pop(0)  # the oldest left is the window's base
        self._recompute()

    def increases(self) -> Mapping[str, Histogram]:
        """Per family, the observations over the window as of the newest reading."""
        return self._increases

    @property
    def covered_s(self) -> float | None:
        """Seconds the window covers (None: one reading, every observation since start)."""
        return self._covered

    def _recompute(self) -> None:
        readings = self._readings
        self._covered = readings[-1].t - readings[0].t if len(readings) >= 2 else None
        families = readings[-1].histograms.keys()
        self._increases = {}
        for family in families:
            found = _increase(family, readings)
            if found is not None:
                self._increases[family] = found
        self.summary = summarise(self._increases, self._covered)


def _went_down(old: Mapping[str, Histogram], new: Mapping[str, Histogram]) -> Iterable[bool]:
    for family, histogram in new.items():
        before = old.get(family)
        yield before is not None and histogram.since(before) is None


def _increase(family: str, readings: list[_Reading]) -> Histogram | None:
    """Prometheus's ``increase``: segment by segment (a restart begins one from zero)."""
    if len(readings) == 1:
        return readings[0].histograms.get(family)
    total: Histogram | None = None
    base: Histogram | None = readings[0].histograms.get(family)
    previous = base
    for reading in readings[1:]:
        current = reading.histograms.get(family)
        if reading.restart:
            total = _add(total, _since(previous, base))
            base = None  # the new process counted from zero
        previous = current
    return _add(total, _since(previous, base))


def _since(last: Histogram | None, base: Histogram | None) -> Histogram | None:
    if last is None:
        return None
    return last if base is None else last.since(base)


def _add(total: Histogram | None, part: Histogram | None) -> Histogram | None:
    if part is None:
        return total
    return part if total is None else (total.plus(part) or total)


class FleetLatency:
    """The fleet's percentiles, computed again at most every ``THIN_S`` while the same servers
    count (each server's window moves every ``THIN_S``, at its own moment: recomputed at each
    move, the fleet's cost 0.2 ms nearly every poll for seven servers), at once when they
    change."""

    def __init__(self) -> None:
        self._windows: tuple[LatencyWindow, ...] = ()
        self._summaries: tuple[LatencySummary | None, ...] = ()
        self._at = float("-inf")
        self._summary: LatencySummary | None = None

    def of(self, windows: Sequence[LatencyWindow], now: float) -> LatencySummary | None:
        """``fleet_latency(windows)`` as of at most ``THIN_S`` ago (``now``: time.time())."""
        summaries = tuple(w.summary for w in windows)
        # Compared by identity, and held here: none can be freed and its address reused.
        same = len(summaries) == len(self._summaries) and all(
            a is b for a, b in zip(summaries, self._summaries, strict=True)
        )
        if same:
            return self._summary
        counted = len(windows) != len(self._windows) or any(
            a is not b for a, b in zip(windows, self._windows, strict=True)
        )
        if counted or now - self._at >= THIN_S:
            self._windows, self._summaries, self._at = tuple(windows), summaries, now
            self._summary = fleet_latency(windows)
        return self._summary


def fleet_latency(windows: Iterable[LatencyWindow]) -> LatencySummary | None:
    """The fleet's percentiles: the servers' increases summed bucket by bucket.

    Args:
        windows: Every server's window.

    Returns:
        Over the servers whose window has begun (else, all since their start: ``window_s``
        None); None when no server has a reading.
    """
    read = [w for w in windows if w.summary is not None]
    begun = [w for w in read if w.covered_s is not None]
    chosen = begun or read
    if not chosen:
        return None
    increases = {}
    for family in FAMILIES.values():
        total = merged(w.increases()[family] for w in chosen if family in w.increases())
        if total is not None:
            increases[family] = total
    covered = [w.covered_s for w in begun if w.covered_s is not None]
    return summarise(increases, min(covered) if covered else None)
