"""Matching a prompts file's ids to the job index's serials, as runs of consecutive serials.

An edited prompts file is mostly the old one in long stretches: lines inserted, removed or moved
in blocks. So the file's id hashes are matched to the index a run at a time: where the next id
is the next serial, the run is extended by comparing whole slices (memcmp) with a galloping
search; elsewhere the id is looked up in the index's bytes (a C-speed scan). An insert at the top
of 913,786 prompts is two runs and a few milliseconds. A file too fragmented for that (more than
``MAX_LOOKUPS`` lookups: a shuffle) is matched id by id through a dict, in C loops.

The result is a :class:`SerialMap`: its runs (searched by bisection) while there are few, else a
table of one serial per position.
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from dataclasses import dataclass

MAX_LOOKUPS = 256
"""Index scans (one per run start, ~1 ms each at 913,786 ids) before switching to the dict."""
MAX_RUNS = 4096
"""Most runs a SerialMap keeps as runs; more are expanded into a table (8 bytes a position)."""
NEW = -1
"""The serial of an id the index does not have (yet)."""


@dataclass(frozen=True, slots=True)
class Run:
    """Positions ``position..position+length-1`` hold serials ``serial..serial+length-1``."""

    position: int
    """First position of the run in the prompts file."""
    serial: int
    """Its first serial (``NEW`` for ids not in the index)."""
    length: int
    """How many positions."""


def _find(index_bytes: bytes, value: int) -> int:
    """The serial holding ``value``, or NEW (the scan skips hits that straddle two ids)."""
    needle = value.to_bytes(8, "little")
    at = index_bytes.find(needle)
    while at >= 0 and at % 8:
        at = index_bytes.find(needle, at + 1)
    return NEW if at < 0 else at // 8


def _run_length(ids: memoryview, position: int, index: memoryview, serial: int) -> int:
    """How many ids from ``position`` equal the index from ``serial`` (at least 1 is known)."""
    most = min(len(ids) - position, len(index) - serial)

    def same(start: int, end: int) -> bool:  # offsets start..end-1 of the run match
        return ids[position + start : position + end] == index[serial + start : serial + end]

    good, step = 1, 1
    while good < most:  # gallop: double the checked stretch while it matches
        span = min(good + step, most)
        if not same(good, span):
            break
        good, step = span, step * 2
    else:
        return good
    low, high = good, min(good + step, most)  # the first mismatch is at an offset in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        if same(low, middle):
            low = middle
        else:
            high = middle
    return low


def align(index_bytes: bytes, ids: array[int]) -> list[Run] | None:
    """Runs covering every position of ``ids`` in order, or None when the file is too fragmented.

    Args:
        index_bytes: the index's id hashes (8 bytes each, little-endian), serial order.
        ids: the file's id hashes, position order.

    Returns:
        The runs (new ids have serial ``NEW``), or None after ``MAX_LOOKUPS`` lookups.
    """
    index = memoryview(index_bytes).cast("Q")
    view = memoryview(ids)
    runs: list[Run] = []
    position, serial, lookups = 0, 0, 0
    while position < len(ids):
        if serial < len(index) and view[position] == index[serial]:
            length = _run_length(view, position, index, serial)
            runs.append(Run(position, serial, length))
            position, serial = position + length, serial + length
            continue
        lookups += 1
        if lookups > MAX_LOOKUPS:
            return None
        found = _find(index_bytes, ids[position])
        if found != NEW:
            serial = found
            continue
        if runs and runs[-1].serial == NEW and runs[-1].position + runs[-1].length == position:
            runs[-1] = Run(runs[-1].position, NEW, runs[-1].length + 1)
        else:
            runs.append(Run(position, NEW, 1))
        position += 1
    return runs


def table(index_bytes: bytes, ids: array[int]) -> array[int]:
    """One serial per position (``NEW`` for ids not in the index), through a dict, in C loops."""
    index = memoryview(index_bytes).cast("Q")
    known = dict(zip(index, range(len(index)), strict=True))
    return array("q", map(known.get, ids, itertools.repeat(NEW)))


def runs_of(serials: array[int]) -> list[Run] | None:
    """The runs of a serial table, or None when there are more than ``MAX_RUNS``."""
    runs: list[Run] = []
    start = 0
    for position in range(1, len(serials) + 1):
        if position < len(serials) and serials[position] == serials[position - 1] + 1:
            continue
        if len(runs) == MAX_RUNS:
            return None
        runs.append(Run(start, serials[start], position - start))
        start = position
    return runs


class SerialMap:
    """Position -> serial, as runs (bisected) or as a table."""

    def __init__(self, runs: list[Run] | None, serials: array[int] | None = None) -> None:
        """Args: the runs, or (when None) the table of one serial per position."""
        self.runs = runs
        """The runs, when kept as runs."""
        self._serials = serials
        self._starts = [run.position for run in runs] if runs is not None else []

    def serial_of(self, position: int) -> int:
        """The serial at ``position``."""
        if self.runs is None:
            assert self._serials is not None
            return self._serials[position]
        run = self.runs[bisect.bisect_right(self._starts, position) - 1]
        return run.serial + position - run.position

    def is_identity(self) -> bool:
        """Whether serial == position everywhere."""
        if self.runs is None:
            assert self._serials is not None
            return self._serials == array("q", range(len(self._serials)))
        return all(run.serial == run.position for run in self.runs)
