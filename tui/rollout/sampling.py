"""Per-GPU cumulative counters sampled on a fixed cadence, and per-interval per-GPU rates.

Two counters from each server's ``/metrics``: output tokens (``sglang:generation_tokens_total``)
and finished requests (``sglang:num_requests_total``). A restarted server's counters start again
from 0 and a server that is down does not answer; ``interval_rates`` turns both into honest
rates (a reset counts what the new process produced, a down server counts 0), so a restart shows
up as lost throughput, never as negative throughput.

Beside them, the load each server was offered: its running and queued requests
(``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, gauges every SGLang release and the
simulator export), read from the same ``/metrics`` body. A throughput says what a server made
of the work it was given; the load says whether it was given the same work (a job that ended,
a client that gave up on a restart: ``tui.rollout.load``).

And, on an "observed" reading (every ``observe_every_s``, not every reading: a rollout reads each
second for minutes), what the verdicts report beside throughput (``tui.rollout.beside``): each
server's TTFT and ITL histograms from the same body (``MetricsProbe.last_histograms``), and each
GPU's joules so far (``tui.rollout.joules``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tui.retune.counters import MetricsCounterProbe, output_tokens, parse_counter
from tui.servers.histogram import ITL, TTFT, Histogram, parse_histograms

REQUESTS_COUNTER = "sglang:num_requests_total"
"""SGLang's finished-requests counter."""
RUNNING_GAUGE = "sglang:num_running_reqs"
"""SGLang's running-requests gauge."""
QUEUED_GAUGE = "sglang:num_queue_reqs"
"""SGLang's waiting-queue gauge."""

Counts = tuple[float, float] | tuple[float, float, float, float]
"""(cumulative output tokens, cumulative finished requests) of one server, and, when its
``/metrics`` has the gauges, (..., running requests, queued requests) now."""


@dataclass(frozen=True, slots=True)
class Load:
    """The requests one server (or the mean of several) was holding."""

    running: float
    """Requests running (in the batch)."""
    queued: float
    """Requests waiting in its queue."""

    @property
    def offered(self) -> float:
        """Every request it was given and has not finished: running + queued."""
        return self.running + self.queued


def load_of(counts: Counts | None) -> Load | None:
    """The load in a reading (None: not answering, or no gauges on its ``/metrics``)."""
    if counts is None or len(counts) < 4:
        return None
    return Load(float(counts[2]), float(counts[3]))  # type: ignore[misc]


@dataclass(frozen=True, slots=True)
class Reading:
    """Every GPU's counters at one moment."""

    t: float
    """Monotonic time of the reading (the event loop's clock)."""
    wall: float
    """time.time() of the reading."""
    values: dict[int, Counts | None]
    """Per GPU: its counters, or None when its server did not answer."""
    latency: Mapping[int, Mapping[str, Histogram]] = field(default_factory=dict)
    """On an observed reading, per GPU that answered: its TTFT and ITL histograms (cumulative,
    as exposed, by family name); empty on the others and where the probe reads none."""
    joules: Mapping[int, float | None] = field(default_factory=dict)
    """On an observed reading with an energy reader, per GPU: its joules since the reader began
    (None: not metered, e.g. a card two servers share); empty otherwise."""
    observed: bool = False
    """Whether the histograms and the joules were read with it (a GPU missing from them was
    not read: its server did not answer, or it is not metered)."""


@dataclass(frozen=True, slots=True)
class IntervalRates:
    """Per-GPU rates over one interval between two readings."""

    t0: float
    """Start (monotonic)."""
    t1: float
    """End (monotonic)."""
    tokens: dict[int, float]
    """Output tokens/s per GPU."""
    requests: dict[int, float]
    """Finished requests/s per GPU."""
    load: dict[int, Load | None] = field(default_factory=dict)
    """Per GPU: the load it held over the interval (the mean of its two readings; the end's
    alone when the start's is unknown), None when not known (down, or no gauges)."""

    @property
    def mid(self) -> float:
        """Middle of the interval."""
        return (self.t0 + self.t1) / 2.0


def interval_rates(readings: Sequence[Reading], gpus: Sequence[int]) -> list[IntervalRates]:
    """Per-interval, per-GPU rates from consecutive readings, robust to restarts.

    A server that did not answer a reading (down, or its ``/metrics`` slower than the probe's
    timeout on a busy machine) counts 0 for that interval until it answers again: a new process
    (its counters went back) made nothing before it started; the same process (its counters went
    on) made what they say since its last answer, spread evenly over every interval since. Seen
    in the demo: a slow read gave the canary 0 tok/s in one 5 s interval and twice its rate in
    the next, its interval -34% .. +62% around +3%.

    Args:
        readings: In time order.
        gpus: GPUs to report (a GPU missing from a reading counts as not answering).

    Returns:
        One entry per consecutive pair of readings with a positive time step.
    """
    last: dict[int, Counts | None] = dict.fromkeys(gpus)
    last_t: dict[int, float] = {}
    """When each GPU last answered."""
    missed: dict[int, list[int]] = {g: [] for g in gpus}
    """Per GPU, the intervals (indices of ``out``) since its last answer."""
    out: list[IntervalRates] = []
    prev_t: float | None = None
    prev_load: dict[int, Load | None] = {}
    for reading in readings:
        loads = {g: load_of(reading.values.get(g)) for g in gpus}
        step = prev_t is not None and reading.t > prev_t
        if step:
            assert prev_t is not None
            out.append(
                IntervalRates(
                    prev_t,
                    reading.t,
                    dict.fromkeys(gpus, 0.0),
                    dict.fromkeys(gpus, 0.0),
                    {g: _mean_load(prev_load.get(g), loads[g]) for g in gpus},
                )
            )
        for gpu in gpus:
            now = reading.values.get(gpu)
            if now is None:
                if step and last[gpu] is not None:
                    missed[gpu].append(len(out) - 1)
                continue
            before = last[gpu]
            if step and (before is None or now[0] < before[0]):
                # Not seen since the window began, or counters went back: a new process whose
                # counters started from 0, all of it made in this interval.
                dt = out[-1].t1 - out[-1].t0
                out[-1].tokens[gpu], out[-1].requests[gpu] = now[0] / dt, now[1] / dt
            elif step and before is not None:
                span = reading.t - last_t[gpu]
                tokens, requests = (now[0] - before[0]) / span, max(now[1] - before[1], 0.0) / span
                for i in [*missed[gpu], len(out) - 1]:
                    out[i].tokens[gpu], out[i].requests[gpu] = tokens, requests
            missed[gpu] = []
            last[gpu], last_t[gpu] = now, reading.t
        prev_t = reading.t
        prev_load = loads
    return out


def _mean_load(start: Load | None, end: Load | None) -> Load | None:
    """An interval's load from its two readings (gauges: a mean of the two is steadier than
    either); the end's alone when the start's is unknown (the server was down then)."""
    if start is None or end is None:
        return end
    return Load((start.running + end.running) / 2, (start.queued + end.queued) / 2)


class MetricsProbe(MetricsCounterProbe):
    """Reads both counters (tokens, requests) from each GPU's server ``/metrics``, and keeps
    the TTFT and ITL histograms of the same bodies (``last_histograms``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.last_histograms: dict[int, dict[str, Histogram]] = {}
        """Per GPU that answered the last ``read``: its TTFT and ITL histograms."""
        self._bounds: dict[tuple[float, ...], tuple[float, ...]] = {}
        """Each bounds tuple seen, kept once: a rollout keeps minutes of readings."""

    async def _counts(self, gpu: int) -> Counts | None:
        text = await self.metrics_text(gpu)
        tokens = None if text is None else output_tokens(text)
        if text is None or tokens is None:
            return None
        try:
            found = parse_histograms(text.encode())
        except ValueError:  # a malformed bucket line: no latency from this body, counts still
            found = {}
        self.last_histograms[gpu] = {
            f: Histogram(self._bounds.setdefault(h.bounds, h.bounds), h.counts)
            for f, h in found.items()
            if f in (TTFT, ITL)
        }
        requests = parse_counter(text, REQUESTS_COUNTER) or 0.0
        running, queued = parse_counter(text, RUNNING_GAUGE), parse_counter(text, QUEUED_GAUGE)
        if running is None or queued is None:
            return tokens, requests
        return tokens, requests, running, queued

    async def read(self, gpus: Sequence[int]) -> dict[int, Counts | None]:
        """Every GPU's counters now, read in parallel (None where a server did not answer)."""
        self.last_histograms = {}
        values = await asyncio.gather(*(self._counts(g) for g in gpus))
        return dict(zip(gpus, values, strict=True))


class LatencySource(Protocol):
    """Where an observed reading's histograms come from: the probe that read the bodies."""

    last_histograms: dict[int, dict[str, Histogram]]
    """Per GPU that answered the last read: its TTFT and ITL histograms."""


class EnergyReader(Protocol):
    """Each GPU's joules so far (``tui.rollout.joules.JoulesReader``)."""

    def read(self) -> Mapping[int, float | None]:
        """Per GPU: joules since the reader began (None: not metered). Blocking."""
        ...

    def close(self) -> None:
        """Release what it reads from."""
        ...


class CountsReader(Protocol):
    """Where a sampler's counters come from: this node's servers (``MetricsProbe``), or the
    agents of a many-node console (``tui.agent.cross_canary.NodesCounters``)."""

    async def read(self, gpus: Sequence[int]) -> dict[int, Counts | None]:
        """Every GPU's counters now (None where nothing answered)."""
        ...


class Sampler:
    """Reads the counters every ``interval_s`` in a background task and keeps every reading.

    Args:
        probe: Where the counters come from.
        gpus: GPUs to read.
        interval_s: Cadence (> 0).
        latency: Where an observed reading's histograms come from (the probe itself, when it
            is a ``MetricsProbe``); None: none (the agents' counters of a many-node canary).
        energy: Each GPU's joules so far (blocking: read in a thread beside the probe's read,
            closed by ``stop``); None: no energy reading.
        observe_every_s: The shortest time between two observed readings (0: every reading).
    """

    def __init__(
        self,
        probe: CountsReader,
        gpus: Sequence[int],
        interval_s: float,
        *,
        latency: LatencySource | None = None,
        energy: EnergyReader | None = None,
        observe_every_s: float = 0.0,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s={interval_s!r}: must be > 0")
        self.gpus = tuple(sorted(set(gpus)))
        self.interval_s = interval_s
        self.readings: list[Reading] = []
        self._probe = probe
        self._latency = latency
        self._energy = energy
        self.observe_every_s = observe_every_s
        """The shortest time between two observed readings (a rollout sets its verdict's
        interval: it reads every second)."""
        self._task: asyncio.Task[None] | None = None
        self._new = asyncio.Event()
        self._last_observed: float | None = None

    def start(self) -> None:
        """Start sampling (the first reading is taken at once)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Stop sampling; the readings stay."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._energy is not None:
            with contextlib.suppress(Exception):  # releasing a half-broken driver must not raise
                await asyncio.to_thread(self._energy.close)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        i = 0
        while True:
            # Sampling cadence: reading i is due at a fixed offset from the start (no drift).
            delay = start + i * self.interval_s - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            observe = (self._latency is not None or self._energy is not None) and (
                self._last_observed is None
                or loop.time() - self._last_observed >= self.observe_every_s - 1e-3
            )
            values, joules = await asyncio.gather(
                self._probe.read(self.gpus),
                self._joules() if observe else _nothing(),
            )
            now = loop.time()
            latency = dict(self._latency.last_histograms) if observe and self._latency else {}
            if observe:
                self._last_observed = now
            self.readings.append(Reading(now, time.time(), values, latency, dict(joules), observe))
            self._new.set()
            self._new = asyncio.Event()
            i += 1

    async def _joules(self) -> Mapping[int, float | None]:
        """The energy reader's joules (none when it has none, or it failed: the verdict says
        tokens/J not metered, the throughput's readings go on)."""
        if self._energy is None:
            return {}
        try:
            return await asyncio.to_thread(self._energy.read)
        except Exception:  # a driver that fails mid-window: no energy figure, never no verdict
            return {}

    async def next_reading(self) -> Reading:
        """Wait for the next reading and return it."""
        event = self._new
        await event.wait()
        return self.readings[-1]

    def rates(self) -> list[IntervalRates]:
        """Per-interval rates of every reading so far."""
        return interval_rates(self.readings, self.gpus)


async def _nothing() -> Mapping[int, float | None]:
    """No energy reading (the gather's other half)."""
    return {}
