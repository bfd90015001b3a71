"""Liveness that does not lie: a server with work whose progress stops for too long is *stuck*.

A hung scheduler can keep ``/health`` at 200 (sgl-project/sglang #6624, #30314, #33858, #4191),
and ``/ready`` checks nothing at all; so the monitor watches progress instead. Progress is any
change of a fingerprint made of the counters that move while the scheduler works: from
``/metrics`` ``sglang:realtime_tokens_total`` (every prefill and decode iteration),
``generation_tokens_total``, ``prompt_tokens_total`` and ``num_requests_total`` (when requests
finish); from ``/v1/loads`` the used and prefilled token counts; and from the log the number of
``Decode batch`` and ``Prefill batch`` lines. A long prefill therefore counts as progress (its
chunks print Prefill lines and move the prefill counter) even though no token is decoded.

The bound: ``max(floor_s, intervals * typical gap)``, the typical gap being the median time
between two progress observations while the server was busy. That gap is about one poll at a
normal rate, or the decode-log interval (40 decode steps) when only the log shows progress, or
a long prefill's chunk time; five of them tolerate a slow batch or a chunked prefill while
still showing a wedged scheduler within ten-odd seconds. The floor (10 s by default) keeps one
slow poll from flagging; SGLang's own health check gives up after 20 s.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

DEFAULT_FLOOR_S = 10.0
"""Shortest time without progress that can count as stuck."""

DEFAULT_INTERVALS = 5.0
"""How many typical progress gaps make a server stuck."""

Fingerprint = tuple[float, ...]
"""Counters whose change means the scheduler did something."""


@dataclass
class ProgressWatch:
    """One server's progress, fed once per poll. Mutable; owned by the monitor."""

    floor_s: float = DEFAULT_FLOOR_S
    """Shortest time without progress that can count as stuck."""
    intervals: float = DEFAULT_INTERVALS
    """Typical progress gaps that make a server stuck."""
    last_progress_at: float | None = None
    """When the fingerprint last changed (or the server was last seen idle)."""
    _fingerprint: Fingerprint | None = None
    _gaps: deque[float] = field(default_factory=lambda: deque(maxlen=20))

    def reset(self) -> None:
        """Forget everything (a new launch)."""
        self.last_progress_at = None
        self._fingerprint = None
        self._gaps.clear()

    def observe(self, now: float, busy: bool, fingerprint: Fingerprint) -> None:
        """Fold in one poll's reading.

        Args:
            now: the monitor's clock.
            busy: requests are running or queued.
            fingerprint: the progress counters read this poll.
        """
        moved = self._fingerprint is not None and fingerprint != self._fingerprint
        self._fingerprint = fingerprint
        if not busy:
            self.last_progress_at = now  # idle is not stuck: the clock starts with the work
            return
        if self.last_progress_at is None:
            self.last_progress_at = now
        elif moved:
            self._gaps.append(now - self.last_progress_at)
            self.last_progress_at = now

    def bound_s(self) -> float:
        """Seconds without progress after which a busy server is stuck."""
        typical = statistics.median(self._gaps) if self._gaps else 0.0
        return max(self.floor_s, self.intervals * typical)

    def stuck_for(self, now: float, busy: bool) -> float | None:
        """Seconds without progress when that exceeds the bound on a busy server, else None."""
        if not busy or self.last_progress_at is None:
            return None
        still = now - self.last_progress_at
        return still if still > self.bound_s() else None
