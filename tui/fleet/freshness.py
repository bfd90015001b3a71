"""How old a number may be before the console dims it, blanks it, or lets it decay to zero.

The monitor polls about once a second. A value older than ``DIM_AFTER_S`` (three missed polls)
is shown dimmed with its age; older than ``BLANK_AFTER_S`` it is not shown at all (its age is).
Generation throughput is a gauge SGLang sets on each Decode line (every
``decode_log_interval`` = 40 decode iterations in 0.5.23: ``srt/arg_groups/fields/
observability.py``, ``srt/managers/scheduler_components/metrics_reporter.py``) and keeps when
no request runs: an idle server would show its last busy rate for ever. With no Decode line for
``THROUGHPUT_HOLD_S`` the console's rate decays linearly to 0 at ``THROUGHPUT_ZERO_S``.
"""

from __future__ import annotations

from enum import StrEnum

DIM_AFTER_S = 3.0
"""A value older than this (three missed one-second polls) is dimmed and shows its age."""
BLANK_AFTER_S = 30.0
"""A value older than this is blanked: only its age is shown."""
THROUGHPUT_HOLD_S = 5.0
"""Seconds without a Decode line during which the last throughput stands as read."""
THROUGHPUT_ZERO_S = 30.0
"""Seconds without a Decode line after which the throughput reads 0."""


class Freshness(StrEnum):
    """How a value of a given age is shown."""

    LIVE = "live"
    """Fresh: shown as is."""
    DIM = "dim"
    """Older than ``DIM_AFTER_S``: dimmed, with its age."""
    BLANK = "blank"
    """Older than ``BLANK_AFTER_S``: not shown, only its age."""


def freshness(age_s: float | None) -> Freshness:
    """How a value ``age_s`` seconds old is shown (None: unknown age, shown as is).

    Args:
        age_s: Seconds since the value was read.

    Returns:
        LIVE, DIM or BLANK by ``DIM_AFTER_S`` and ``BLANK_AFTER_S``.
    """
    if age_s is None or age_s <= DIM_AFTER_S:
        return Freshness.LIVE
    return Freshness.DIM if age_s <= BLANK_AFTER_S else Freshness.BLANK


def decayed_throughput(value: float | None, age_s: float | None) -> float | None:
    """The generation rate to show ``age_s`` seconds after the last Decode line.

    Args:
        value: The rate the last Decode line (or the gauge) gave.
        age_s: Seconds since that line (None: unknown, the value stands).

    Returns:
        ``value`` while fresh, then linearly less, 0 from ``THROUGHPUT_ZERO_S`` on.
    """
    if value is None or age_s is None or age_s <= THROUGHPUT_HOLD_S:
        return value
    if age_s >= THROUGHPUT_ZERO_S:
        return 0.0
    return value * (THROUGHPUT_ZERO_S - age_s) / (THROUGHPUT_ZERO_S - THROUGHPUT_HOLD_S)
