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
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tui.retune.counters import MetricsCounterProbe, output_tokens, parse_counter

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
    """Reads both counters (tokens, requests) from each GPU's server ``/metrics``."""

    async def _counts(self, gpu: int) -> Counts | None:
        text = await self.metrics_text(gpu)
        tokens = None if text is None else output_tokens(text)
        if text is None or tokens is None:
            return None
        requests = parse_counter(text, REQUESTS_COUNTER) or 0.0
        running, queued = parse_counter(text, RUNNING_GAUGE), parse_counter(text, QUEUED_GAUGE)
        if running is None or queued is None:
            return tokens, requests
        return tokens, requests, running, queued

    async def read(self, gpus: Sequence[int]) -> dict[int, Counts | None]:
        """Every GPU's counters now, read in parallel (None where a server did not answer)."""
        values = await asyncio.gather(*(self._counts(g) for g in gpus))
        return dict(zip(gpus, values, strict=True))


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
    """

    def __init__(self, probe: CountsReader, gpus: Sequence[int], interval_s: float) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s={interval_s!r}: must be > 0")
        self.gpus = tuple(sorted(set(gpus)))
        self.interval_s = interval_s
        self.readings: list[Reading] = []
        self._probe = probe
        self._task: asyncio.Task[None] | None = None
        self._new = asyncio.Event()

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

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        i = 0
        while True:
            # Sampling cadence: reading i is due at a fixed offset from the start (no drift).
            delay = start + i * self.interval_s - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            values = await self._probe.read(self.gpus)
            self.readings.append(Reading(loop.time(), time.time(), values))
            self._new.set()
            self._new = asyncio.Event()
            i += 1

    async def next_reading(self) -> Reading:
        """Wait for the next reading and return it."""
        event = self._new
        await event.wait()
        return self.readings[-1]

    def rates(self) -> list[IntervalRates]:
        """Per-interval rates of every reading so far."""
        return interval_rates(self.readings, self.gpus)
