"""Which GPU stands out from the fleet: a robust z-score against the median, above its noise.

Seven data-parallel servers fed by one script should look alike; an uneven queue is the first
thing to look for (one server idle while another drowns). For each reading (queue, running, KV
use, tok/s) over the servers that serve, a GPU is flagged when its distance from the fleet's
median is more than ``Z_LIMIT`` times the fleet's spread:

    spread = max(1.4826 * MAD, floor_abs, floor_rel * |median|)

The median absolute deviation (MAD, scaled to a standard deviation for normal noise) is what
the other servers' own scatter says; the floors are the noise a reading has even when every
server agrees (MAD is 0 when six of seven read the same): a queue of 1 against 0 is no
imbalance, nor is 5 % of tok/s. Fewer than ``MIN_SERVERS`` readings: nothing is flagged (with
two, neither can be told to be the odd one).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

MIN_SERVERS = 3
"""Readings needed to single one out."""
Z_LIMIT = 3.5
"""The modified z-score past which a value stands out (Iglewicz and Hoaglin's outlier rule)."""
MAD_TO_SIGMA = 1.4826
"""MAD times this estimates the standard deviation of normally distributed noise."""


@dataclass(frozen=True, slots=True)
class Reading:
    """One kind of per-GPU value the check reads, and its noise floors."""

    name: str
    """Key in the outlier (``queue``, ``running``, ``kv``, ``tok_s``)."""
    label: str
    """How the operator reads it."""
    floor_abs: float
    """The spread never taken below this (the reading's unit)."""
    floor_rel: float
    """...nor below this fraction of the median."""


READINGS = (
    Reading("queue", "queued", 2.0, 0.25),
    Reading("running", "running", 2.0, 0.10),
    Reading("kv", "KV use", 0.05, 0.10),
    Reading("tok_s", "tok/s", 20.0, 0.10),
)
"""What is compared across the fleet, with the noise each has when every server agrees."""


@dataclass(frozen=True, slots=True)
class Outlier:
    """One GPU that stands out on one reading."""

    gpu: int
    """The GPU (its panel's index)."""
    reading: str
    """``Reading.name``."""
    value: float
    """Its value."""
    median: float
    """The fleet's median of that reading."""
    score: float
    """(value - median) / spread: signed, past ``Z_LIMIT`` in size."""
    words: str
    """In the operator's words: 'GPU 3 tok/s 290: 0.25x the fleet median 1,160'."""


def _number(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}".rstrip("0").rstrip(".") if value % 1 else f"{value:.0f}"


def _words(who: str, reading: Reading, value: float, median: float) -> str:
    if reading.name == "kv":
        return f"{who} {reading.label} {value:.0%} against the fleet median {median:.0%}"
    if median > 0:
        how = f"{value / median:.2f}x the fleet median {_number(median)}"
    else:
        how = f"against the fleet median {_number(median)}"
    return f"{who} {reading.label} {_number(value)}: {how}"


def outliers(
    values: Mapping[int, float], reading: Reading, names: Mapping[int, str] | None = None
) -> tuple[Outlier, ...]:
    """The GPUs whose ``reading`` stands out (see the module), most distant first.

    Args:
        values: GPU -> its value (servers without one are left out by the caller).
        reading: What the values are, and their noise floors.
        names: GPU -> how the operator calls it ('n2 GPU 1'; default 'GPU <index>').

    Returns:
        The outliers; empty for fewer than ``MIN_SERVERS`` values or a fleet within its noise.
    """
    if len(values) < MIN_SERVERS:
        return ()
    median = statistics.median(values.values())
    mad = statistics.median(abs(v - median) for v in values.values())
    spread = max(MAD_TO_SIGMA * mad, reading.floor_abs, reading.floor_rel * abs(median))
    found = []
    for gpu, value in values.items():
        score = (value - median) / spread
        if abs(score) > Z_LIMIT:
            who = (names or {}).get(gpu, f"GPU {gpu}")
            words = _words(who, reading, value, median)
            found.append(Outlier(gpu, reading.name, value, median, score, words))
    return tuple(sorted(found, key=lambda o: -abs(o.score)))
