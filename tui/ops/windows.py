"""The measuring windows of operations asked by an operator who waits for the answer (the
console, and the agent on a console's behalf): one ``--measure-window`` sets them all."""

from __future__ import annotations

from dataclasses import dataclass, field

from tui.retune.options import ApplyOptions
from tui.rollout.canary import CanaryOptions
from tui.rollout.fleet_verdict import VerdictWindows
from tui.rollout.rollout import RolloutOptions

MEASURE_WINDOW_DEFAULT_S = 30.0
"""The console's throughput window: shorter than the headless default, the operator waits."""
MEASURE_WINDOW_RANGE_S = (1.0, 3600.0)
"""Allowed ``--measure-window`` seconds."""


def console_apply_options(measure_window_s: float = MEASURE_WINDOW_DEFAULT_S) -> ApplyOptions:
    """The apply options of the console: a ``measure_window_s`` window each side of the change.

    The warm-up is a third of the window and the sampling interval a tenth (at least 0.5 s),
    so a short window (tests, a quick look) still gets about ten samples each side.

    Args:
        measure_window_s: Seconds of each throughput window.

    Returns:
        The options.

    Raises:
        ValueError: the window is outside ``MEASURE_WINDOW_RANGE_S`` (naming field and range).
    """
    low, high = MEASURE_WINDOW_RANGE_S
    if not low <= measure_window_s <= high:
        raise ValueError(
            f"--measure-window: {measure_window_s:g} is outside {low:g}-{high:g} seconds"
        )
    return ApplyOptions(
        window_s=measure_window_s,
        warmup_s=measure_window_s / 3,
        interval_s=max(0.5, measure_window_s / 10),
    )


def console_canary_options(measure_window_s: float = MEASURE_WINDOW_DEFAULT_S) -> CanaryOptions:
    """The canary options of the console: the same ``--measure-window`` as its applies.

    The window is planned at ``measure_window_s`` (at least six samples), may stretch to three
    times that when a verdict is in reach, and samples every twelfth of it (at least 0.5 s).

    Args:
        measure_window_s: Seconds of the planned window (already range-checked by
            :func:`console_apply_options`).

    Returns:
        The options.
    """
    interval = max(0.5, measure_window_s / 12)
    window = max(measure_window_s, 6 * interval)
    return CanaryOptions(
        window_s=window,
        warmup_s=measure_window_s / 3,
        max_window_s=3 * window,
        interval_s=interval,
    )


def console_rollout_options(measure_window_s: float = MEASURE_WINDOW_DEFAULT_S) -> RolloutOptions:
    """The rollout (and rollback) options of the console: its fleet verdict takes the apply's
    windows (``measure_window_s`` each side, a third of it as warm-up, a tenth as interval).

    Args:
        measure_window_s: Seconds of each window (already range-checked by
            :func:`console_apply_options`).

    Returns:
        The options.
    """
    apply = console_apply_options(measure_window_s)
    verdict = VerdictWindows(apply.window_s, apply.warmup_s, apply.interval_s)
    return RolloutOptions(verdict=verdict)


@dataclass(frozen=True, slots=True)
class ConsoleWindows:
    """The measuring windows of the console's operations, all from one ``--measure-window``."""

    apply: ApplyOptions
    """Timeouts and before/after throughput windows of applies."""
    canary: CanaryOptions
    """Windows of canaries."""
    rollout: RolloutOptions = field(default_factory=RolloutOptions)
    """Fleet-verdict windows of rollouts and rollbacks (their batch is per call)."""


def console_windows(measure_window_s: float = MEASURE_WINDOW_DEFAULT_S) -> ConsoleWindows:
    """The apply, canary and rollout options of one ``--measure-window``.

    Raises:
        ValueError: the window is outside ``MEASURE_WINDOW_RANGE_S`` (naming field and range).
    """
    return ConsoleWindows(
        console_apply_options(measure_window_s),
        console_canary_options(measure_window_s),
        console_rollout_options(measure_window_s),
    )
