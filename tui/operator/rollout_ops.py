"""Canary and rolling rollout for the console: ``tui.rollout`` with the console's callbacks.

The console shows each look of a canary as it happens; the core's ``Canary`` reports a look as
(intervals, ``Decision``), which this module turns into a ``CanaryLook`` carrying what a screen
needs (the window so far, the seconds still needed) so the UI never computes statistics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tui.profiles import Profile
from tui.retune.events import RetuneEvent
from tui.rollout.canary import Canary, CanaryOptions, CanaryResult
from tui.rollout.rollout import Rollout, RolloutOptions, RolloutResult, rollout_plan
from tui.rollout.stats import Decision, PairedEstimate

EventSink = Callable[[object], None]
"""Receives every ``tui.retune.events`` dataclass, on the event loop."""


@dataclass(frozen=True, slots=True)
class CanaryLook:
    """One look of a canary's window, as the console shows it."""

    intervals: int
    """Paired intervals measured so far (after the warm-up)."""
    interval_s: float
    """Seconds per interval."""
    verdict: str
    """better / worse / no measurable difference / not measured, at this look."""
    final: bool
    """True when this look ends the window."""
    reason: str
    """Why, in words."""
    estimate: PairedEstimate | None = None
    """Output tokens/s canary vs control at the look's level (None when the core gave none)."""
    more_s_to_exclude_zero: float | None = None
    """Further seconds for the interval to exclude 0 at the observed effect."""
    more_s_to_bound: float | None = None
    """Further seconds for the interval to lie within +/- margin."""

    @property
    def window_s(self) -> float:
        """Seconds measured so far."""
        return self.intervals * self.interval_s


LookSink = Callable[[CanaryLook], None]
"""Receives every look of a canary, on the event loop."""


def look_from(intervals: int, decision: Decision, interval_s: float) -> CanaryLook:
    """The console's view of one look.

    Args:
        intervals: Paired intervals so far.
        decision: The look's decision.
        interval_s: Seconds per interval.

    Returns:
        The look, with interval counts turned into seconds.
    """

    def secs(k: int | None) -> float | None:
        return None if k is None else k * interval_s

    return CanaryLook(
        intervals,
        interval_s,
        decision.verdict,
        decision.final,
        decision.reason,
        getattr(decision, "estimate", None),  # carried once the core's Decision holds it
        secs(decision.more_intervals_to_exclude_zero),
        secs(decision.more_intervals_to_bound),
    )


async def run_canary(
    profile: Profile,
    gpu: int,
    options: CanaryOptions,
    on_event: EventSink | None = None,
    on_look: LookSink | None = None,
) -> CanaryResult:
    """Try ``profile`` on ``gpu`` against every other running GPU (journalled by the core).

    Args:
        profile: The candidate, as loaded for this fleet (its ports and speed).
        gpu: The canary GPU.
        options: Windows, levels, timeouts.
        on_event: Receives the canary restart's retune events.
        on_look: Receives each look.

    Returns:
        The canary's result (refused, failed to come up, or a verdict).
    """

    def event(e: RetuneEvent) -> None:
        if on_event is not None:
            on_event(e)

    def look(n: int, decision: Decision) -> None:
        if on_look is not None:
            on_look(look_from(n, decision, options.interval_s))

    return await Canary(profile, gpu, options, on_event=event, on_look=look).run()


async def run_rollout(
    profile: Profile, options: RolloutOptions, on_event: EventSink | None = None
) -> RolloutResult:
    """Move every GPU not yet on ``profile`` to it, ``options.batch`` at a time, verified.

    Args:
        profile: The profile, as loaded for this fleet.
        options: Batch size, timeouts, cost measurement.
        on_event: Receives every batch's retune events.

    Returns:
        The rollout's result (stopped at the first failure: which failed, which stayed).
    """

    def event(e: RetuneEvent) -> None:
        if on_event is not None:
            on_event(e)

    plan, skipped = rollout_plan(profile)
    return await Rollout(plan, profile, options, skipped=skipped, on_event=event).run()
