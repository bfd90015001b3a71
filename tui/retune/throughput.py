"""Per-interval fleet output tokens/s from cumulative per-GPU counters.

Each interval's rate is the sum over GPUs of the counter's increase divided by the interval's
length. A GPU whose counter went backwards (the server restarted) or did not answer is left out of
that interval, so a restart never shows up as negative throughput.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence

from tui.retune.ports import ThroughputProbe


def interval_rates(
    readings: Sequence[tuple[float, dict[int, float | None]]],
) -> tuple[float, ...]:
    """Turn timestamped counter readings into per-interval fleet tokens/s.

    Args:
        readings: (monotonic time, {gpu: cumulative output tokens or None}) in time order.

    Returns:
        One rate per consecutive pair of readings with a positive time step.
    """
    rates = []
    for (t0, c0), (t1, c1) in itertools.pairwise(readings):
        dt = t1 - t0
        if dt <= 0:
            continue
        total = 0.0
        for gpu, v1 in c1.items():
            v0 = c0.get(gpu)
            if v0 is None or v1 is None or v1 < v0:
                continue
            total += v1 - v0
        rates.append(total / dt)
    return tuple(rates)


async def measure(
    probe: ThroughputProbe,
    gpus: Sequence[int],
    window_s: float,
    interval_s: float,
    on_sample: Callable[[int], None] | None = None,
) -> tuple[float, ...]:
    """Read the counters every ``interval_s`` for ``window_s`` and return per-interval rates.

    Args:
        probe: Where the cumulative counters come from.
        gpus: GPUs whose counters are summed.
        window_s: Length of the measurement window.
        interval_s: Sampling interval (one rate per interval).
        on_sample: Called with the number of rates so far after each reading.

    Returns:
        Per-interval fleet output tokens/s.
    """
    loop = asyncio.get_running_loop()
    readings: list[tuple[float, dict[int, float | None]]] = []
    start = loop.time()
    n = max(1, round(window_s / interval_s))
    for i in range(n + 1):
        # Sampling cadence: the next reading is due at a fixed offset from the start.
        delay = start + i * interval_s - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        readings.append((loop.time(), await probe.counters(gpus)))
        if on_sample is not None and i > 0:
            on_sample(i)
    return interval_rates(readings)
