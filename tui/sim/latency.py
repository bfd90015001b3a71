"""The simulated server's latency histograms: SGLang's four, with its default buckets, observed
where SGLang observes them (``srt/observability/metrics_collector.py``, 0.5.17-0.5.23):

* queue time (scheduler side): when a request leaves the waiting queue for its first prefill
  batch, the time since it arrived;
* time to first token: when its prefill ends (its first token);
* inter-token latency: each decode output's interval over the tokens it carried, counted once
  per token (``observe_inter_token_latency``: a speculative step's tokens share its interval);
* end-to-end latency: when its last token is generated.

Times are the scheduler's own stamps (``SimScheduler.advance``: each step at the time it would
have run), in wall seconds like every rate the simulator reports: at ``--sim-speed 20`` a step
is a twentieth of the real one, and so is its latency. Health probes are not observed
(SGLang's ``log_metrics=False``).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
"""SGLang's ``bucket_time_to_first_token`` default."""
E2E_BUCKETS = (*TTFT_BUCKETS, 600, 1200, 1800, 2400)
"""SGLang's ``bucket_e2e_request_latency`` default."""
ITL_BUCKETS = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
    0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
)  # fmt: skip
"""SGLang's ``bucket_inter_token_latency`` default."""
QUEUE_BUCKETS = (
    0.0, 0.001, 0.005, 0.010, 0.050, 0.100, 0.200, 0.500, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50,
    60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800,
    2000, 2500, 3000,
)  # fmt: skip
"""``sglang:queue_time_seconds``'s buckets (its first bound is 0)."""


@dataclass
class Recorded:
    """One histogram's observations so far (mutable: the scheduler adds to it)."""

    bounds: tuple[float, ...]
    """Finite upper bounds, ascending (``+Inf`` is implied)."""
    counts: list[float] = field(default_factory=list)
    """Observations per bucket, not cumulative (the last one is above every bound)."""
    total: float = 0.0
    """The sum of the observed values."""

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0.0] * (len(self.bounds) + 1)

    def observe(self, value: float, count: float = 1.0) -> None:
        """``count`` observations of ``value`` (a fraction of one is kept, not rounded away:
        a speculative step gains a mean accept length of tokens)."""
        self.counts[bisect.bisect_left(self.bounds, value)] += count
        self.total += value * count

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative ``(le, count)`` pairs as Prometheus exposes them, ``+Inf`` last; counts in
        whole observations (floored, so each stays monotonic over time)."""
        out, running = [], 0.0
        for bound, count in zip((*self.bounds, math.inf), self.counts, strict=True):
            running += count
            out.append(("+Inf" if math.isinf(bound) else f"{float(bound)}", float(int(running))))
        return out


@dataclass
class LatencyRecorder:
    """The four histograms of one simulated server."""

    ttft: Recorded = field(default_factory=lambda: Recorded(TTFT_BUCKETS))
    """``sglang:time_to_first_token_seconds``."""
    itl: Recorded = field(default_factory=lambda: Recorded(ITL_BUCKETS))
    """``sglang:inter_token_latency_seconds``."""
    e2e: Recorded = field(default_factory=lambda: Recorded(E2E_BUCKETS))
    """``sglang:e2e_request_latency_seconds``."""
    queue: Recorded = field(default_factory=lambda: Recorded(QUEUE_BUCKETS))
    """``sglang:queue_time_seconds``."""

    def admitted(self, created: Iterable[float], at: float) -> None:
        """Requests that left the queue for their first prefill at ``at`` (their arrival
        times)."""
        for arrived in created:
            self.queue.observe(max(at - arrived, 0.0))

    def first_token(self, created: float, at: float) -> None:
        """A request's first token at ``at``."""
        self.ttft.observe(max(at - created, 0.0))

    def decoded(self, step_s: float, accept: float, tokens: float) -> None:
        """``tokens`` output tokens from decode steps of ``step_s`` seconds gaining ``accept``
        tokens per request each."""
        if tokens > 0:
            self.itl.observe(step_s / max(accept, 1.0), tokens)

    def finished(self, created: float, at: float) -> None:
        """A request's last token at ``at``."""
        self.e2e.observe(max(at - created, 0.0))
