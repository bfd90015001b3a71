"""Trailing-window throughput (requests/s, output tokens/s) from one-second buckets.

Rates come from the recent past only, so the ETA follows a retune within a minute instead of
being dragged by the lifetime average.
"""

from __future__ import annotations

import collections
import time

from tui.pipeline.status import Rate


class RateMeter:
    """Counts completions in one-second buckets over the last ``horizon_s`` seconds."""

    def __init__(
        self, horizon_s: int = 600, clock: collections.abc.Callable[[], float] = time.monotonic
    ) -> None:
        """Args: horizon_s: the longest window asked for; clock: monotonic seconds."""
        self._clock = clock
        self._horizon = horizon_s
        self._started = clock()
        self._buckets: collections.deque[list[int]] = collections.deque()

    def record(self, output_tokens: int) -> None:
        """Count one completed request."""
        second = int(self._clock())
        buckets = self._buckets
        if buckets and buckets[-1][0] == second:
            bucket = buckets[-1]
            bucket[1] += 1
            bucket[2] += output_tokens
            return
        buckets.append([second, 1, output_tokens])
        while buckets and buckets[0][0] <= second - self._horizon:
            buckets.popleft()

    def rate(self, window_s: float) -> Rate:
        """Throughput over the last ``window_s`` seconds (or the run's age, when younger)."""
        now = self._clock()
        span = max(min(window_s, now - self._started), 1e-9)
        floor = now - window_s
        requests = tokens = 0
        for second, count, out in reversed(self._buckets):
            if second < floor:
                break
            requests += count
            tokens += out
        if span < 1.0:
            # Too young for a meaningful rate.
            return Rate(round(span, 3), 0.0, 0.0)
        return Rate(round(span, 3), requests / span, tokens / span)


def eta_seconds(remaining: int, rate_1m: Rate, rate_10m: Rate) -> float | None:
    """Seconds to finish ``remaining`` prompts at the recent rate.

    The last minute's rate, or the last ten minutes' when nothing finished in the last minute
    (a fleet being restarted); never the lifetime average, which a retune makes wrong.

    Args:
        remaining: prompts neither done nor failed.
        rate_1m: throughput over the last minute.
        rate_10m: throughput over the last ten minutes.

    Returns:
        The ETA, 0 when nothing remains, None when no recent rate is known.
    """
    if remaining <= 0:
        return 0.0
    recent = rate_1m.requests_per_s or rate_10m.requests_per_s
    return remaining / recent if recent > 0 else None
