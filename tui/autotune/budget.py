"""The search's budget: wall time, exploration GPU-seconds, and the largest regression it risks.

Exploration is what the search costs the job beyond running the incumbent: each canary's
restart dip (``cost.lost_gpu_seconds``, measured by the canary against the fleet's rate before
it) plus, for a candidate slower than the incumbent, the canary GPU's shortfall over its window
(``-relative * window_s``). A candidate faster than the incumbent is not credited back: the
budget is what the search may risk, not its net. A restart whose dip could not be measured (no
job sending requests, so no rate before it) counts the canary GPU's time out of service, its
stop and its start (``restart_gpu_seconds``): '0.0 GPU-s exploring' after three canaries read
as if the restarts had been free. Putting the canary GPU back on the incumbent after a rejected
candidate is a restart too, and counts the same way.

The wall time is the search's own time: the seconds an operator kept it paused are not
spent (``WallClock``), so a search paused over lunch does not come back with its budget gone.

The largest regression is a relative drop of the canary GPU. A candidate measured worse than
that is rolled back like any other, and ends the search: the cheap model that ranked it was
that wrong about this fleet, and the operator asked not to risk more.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tui.retune.events import VerifyReport
from tui.rollout.canary_result import CanaryResult


@dataclass(frozen=True, slots=True)
class Budget:
    """What the search may spend."""

    wall_s: float = 4 * 3600.0
    """Longest the search runs (checked between steps)."""
    explore_gpu_s: float = 1800.0
    """GPU-seconds of job throughput it may spend exploring."""
    max_regression: float = 0.25
    """Largest relative drop of the canary GPU it accepts to see (0.25 = 25%)."""

    def errors(self) -> list[str]:
        """Invalid fields, each naming field, value and allowed range."""
        out = []
        if not self.wall_s > 0:
            out.append(f"wall_s={self.wall_s!r}: must be > 0 seconds")
        if not self.explore_gpu_s > 0:
            out.append(f"explore_gpu_s={self.explore_gpu_s!r}: must be > 0 GPU-seconds")
        if not 0 < self.max_regression < 1:
            out.append(f"max_regression={self.max_regression!r}: must be in (0, 1)")
        return out


def restart_gpu_seconds(reports: Sequence[VerifyReport]) -> float:
    """The GPUs' time out of service over some restarts: each one's stop (its drain, then its
    memory released) and its start until ready (or until it failed: the time is not known)."""
    return round(sum((r.stop_s or 0.0) + (r.time_to_ready_s or 0.0) for r in reports), 3)


def exploration_cost(result: CanaryResult) -> float:
    """GPU-seconds one canary cost the job (restart dip + the candidate's own shortfall); an
    unmeasured dip counts the canary GPU's time out of service instead."""
    lost = 0.0
    if result.cost is not None and result.cost.lost_gpu_seconds is not None:
        lost += result.cost.lost_gpu_seconds
    elif result.report is not None:
        lost += restart_gpu_seconds([result.report])
    if result.tokens is not None and result.tokens.relative < 0:
        lost += -result.tokens.relative * result.window_s
    return round(lost, 3)


PAUSE = "pause"
"""The operator's pause (a ``WallClock`` hold)."""
WAIT = "wait"
"""A step's wait for the fleet's operation lock (a ``WallClock`` hold)."""


@dataclass(frozen=True, slots=True)
class Spent:
    """What the search has spent so far."""

    wall_s: float = 0.0
    """Seconds since it started, less the seconds it was paused or waited for the fleet."""
    explore_gpu_s: float = 0.0
    """Exploration GPU-seconds (see ``exploration_cost``)."""
    canaries: int = 0
    """Canaries run."""
    paused_s: float = 0.0
    """Seconds the operator kept it paused (not counted in ``wall_s``)."""
    waited_s: float = 0.0
    """Seconds its steps waited for another operation's lock (not counted in ``wall_s``)."""

    def exhausted(self, budget: Budget) -> str | None:
        """Why no further canary may start, or None.

        A further canary is refused when the mean cost of the ones run so far would take the
        exploration past its budget (an unknown cost counts as none).
        """
        if self.wall_s >= budget.wall_s:
            return f"wall-time budget spent ({self.wall_s:.0f} s of {budget.wall_s:.0f} s)"
        per = self.explore_gpu_s / self.canaries if self.canaries else 0.0
        if self.explore_gpu_s + per > budget.explore_gpu_s:
            return (
                f"exploration budget spent ({self.explore_gpu_s:.1f} of "
                f"{budget.explore_gpu_s:.1f} GPU-seconds; a canary costs about {per:.1f})"
            )
        return None


class WallClock:
    """The search's wall time: seconds since it started, less the seconds it was held.

    Two things hold it, each on its own and possibly at once: the operator's pause, and a wait
    for another operation to release the fleet's operation lock (an operator's rollout is the
    operator's time, not the search's: a search that waited an hour for it would otherwise find
    its budget gone before its next canary). Each is counted apart (``paused_s``,
    ``waited_s``); the budget's clock stops while either holds.

    Args:
        clock: Monotonic seconds (tests pass a fake one).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start = clock()
        self._since: dict[str, float] = {}
        """Each hold now on, and since when."""
        self._totals: dict[str, float] = {PAUSE: 0.0, WAIT: 0.0}
        """Each hold's finished seconds."""
        self._off_total = 0.0
        """Finished stretches with at least one hold on (the union: overlaps count once)."""
        self._off_since: float | None = None

    def _hold(self, reason: str) -> None:
        if reason in self._since:
            return
        now = self._clock()
        self._since[reason] = now
        if self._off_since is None:
            self._off_since = now

    def _release(self, reason: str) -> None:
        since = self._since.pop(reason, None)
        if since is None:
            return
        now = self._clock()
        self._totals[reason] += now - since
        if not self._since and self._off_since is not None:
            self._off_total += now - self._off_since
            self._off_since = None

    def _held_s(self, reason: str) -> float:
        since = self._since.get(reason)
        return self._totals[reason] + (self._clock() - since if since is not None else 0.0)

    @property
    def paused(self) -> bool:
        """Whether the operator's pause holds it now."""
        return PAUSE in self._since

    def pause(self) -> None:
        """The operator paused (idempotent)."""
        self._hold(PAUSE)

    def resume(self) -> None:
        """The operator resumed (idempotent)."""
        self._release(PAUSE)

    def wait(self) -> None:
        """A step started waiting for the operation lock (idempotent)."""
        self._hold(WAIT)

    def waited(self) -> None:
        """The wait for the operation lock is over (idempotent)."""
        self._release(WAIT)

    def paused_s(self) -> float:
        """Seconds the operator kept it paused (the current pause included)."""
        return self._held_s(PAUSE)

    def waited_s(self) -> float:
        """Seconds its steps waited for the operation lock (the current wait included)."""
        return self._held_s(WAIT)

    def elapsed(self) -> float:
        """Seconds counted against the budget: since the start, less every hold."""
        now = self._clock()
        off = self._off_total + (now - self._off_since if self._off_since is not None else 0.0)
        return max(0.0, now - self._start - off)
