"""The replay port: the console on the recorded history, at a time cursor (``gpufleet replay``).

``ReplayFleet`` is a ``tui.ops.port.Fleet`` whose ``snapshot()`` is the history at its cursor
(``tui.history.replay.HistorySource.snapshot_at``) and whose capabilities are empty (every
command refused: "replay"); its reads hold nothing of now (no profiles, no status document, no
log: none of them is recorded), except the journal's markers for the chart. The console moves
the cursor (``step``, ``jump``, ``follow``) and shows it in the header: the snapshot's
``gpu_source`` says ``replay 2026-12-07 18:42:10`` and the width of the bucket whose means the
panels show. ``moment`` reads ``--at``. No Textual here.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from tui.fleet.snapshot import FleetSnapshot
from tui.history.cli import UNITS, when
from tui.history.replay import HistorySource
from tui.history.store import HistoryStore
from tui.ops.adoption import AdoptPlan
from tui.ops.alerts.engine import AlertFired
from tui.ops.commands import Kind, Op
from tui.ops.events import EventSink
from tui.ops.journal import JournalRead
from tui.ops.marks import OperationMark
from tui.ops.port import Capabilities, FleetReads, Refused, Tuning
from tui.pipeline.energy import JobEnergy
from tui.pipeline.status import PipelineStatus
from tui.profiles import Problem, Profile, ProfileError
from tui.state.fleet_state import GpuState

R = TypeVar("R")

REPLAY = "replay"
"""Why a replay's port runs nothing: it shows the past."""
FORMS = (
    "an ISO time (2026-12-07 18:42:10), an offset from the history's last moment (-15m) or "
    "from its first (+5m), or seconds since the epoch"
)
"""What ``--at`` accepts, in words."""


def stamp(t: float) -> str:
    """``t`` as the header shows it: local ``2026-12-07 18:42:10``."""
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def moment(text: str, first: float, last: float) -> float:
    """``--at``'s moment in the history that runs from ``first`` to ``last``.

    Args:
        text: An ISO time, ``-15m`` (before ``last``), ``+5m`` (after ``first``), or epoch
            seconds; the units are s, m, h, d.
        first: The history's first moment.
        last: Its last.

    Returns:
        The moment, time.time() seconds.

    Raises:
        ValueError: not one of those forms, or outside ``first``..``last`` (one line naming
            ``--at``, the forms and the range).
    """
    span = f"the history runs {stamp(first)} .. {stamp(last)}"
    offset = re.fullmatch(r"([+-])(\d+(?:\.\d+)?)([smhd])", text.strip())
    if offset:
        sign, amount, unit = offset.groups()
        seconds = float(amount) * UNITS[unit]
        at = last - seconds if sign == "-" else first + seconds
    elif re.fullmatch(r"\d+(?:\.\d+)?[smhd]", text.strip()):
        # an age without its sign ('15m'): before the last moment or after the first? Asked.
        raise ValueError(f"--at={text!r}: give {FORMS}; {span}")
    else:
        try:
            at = when(text, time.time())  # an ISO time or epoch seconds (ages handled above)
        except argparse.ArgumentTypeError:
            raise ValueError(f"--at={text!r}: give {FORMS}; {span}") from None
    if not first <= at <= last:
        raise ValueError(f"--at={text!r} is {stamp(at)}, outside the history: {span}")
    return at


class ReplayReads:
    """A replay's reads: nothing of now. Profiles, the running record, the status document and
    the logs are not recorded in the history; the journal's markers (when given) are, and the
    chart shows those up to its cursor."""

    def __init__(self, marks: Callable[[], list[OperationMark]] | None = None) -> None:
        self._marks = marks

    def profile_names(self) -> list[str]:
        """None: a replay has no profiles."""
        return []

    def current_profile(self) -> str | None:
        """Unknown."""
        return None

    def load_profile(self, name: str) -> Profile:
        """Refused."""
        raise ProfileError([Problem("file", name, f"a {REPLAY} loads no profile")], name)

    def running(self) -> dict[int, GpuState]:
        """Not recorded."""
        return {}

    def journal(self) -> JournalRead:
        """Empty: the journal key is off in a replay."""
        return JournalRead((), 0)

    def autotune_status(self) -> None:
        """None: a replay follows no search (the past one's status is not recorded)."""
        return None

    def marks(self) -> list[OperationMark]:
        """The journal's operations (the chart keeps those before its cursor)."""
        return [] if self._marks is None else self._marks()

    def pipeline_status(self) -> PipelineStatus | None:
        """Not recorded (the history keeps the job's rates only)."""
        return None

    def job_energy(self) -> JobEnergy | None:
        """Not recorded (the panels' energy is, in the history)."""
        return None

    def node_alerts(self) -> tuple[AlertFired, ...] | None:
        """None: a replay fires no alerts (the history keeps none)."""
        return None

    def log_tail(self, path: Path, max_lines: int) -> list[str]:
        """Not recorded."""
        return []

    def canary_controls(self, gpu: int) -> tuple[int, ...] | None:
        """No canary in a replay."""
        return None

    def tuning(self, gpu: int | None) -> Tuning:
        """Refused (the tuning key is off)."""
        raise Refused(f"tune: {REPLAY}")

    async def plan_adoption(
        self, ports: tuple[int, ...], gpus: tuple[int, ...], name: str
    ) -> AdoptPlan:
        """Refused (the adopt key is off)."""
        raise Refused(f"adopt: {REPLAY}")


class ReplayFleet:
    """The port of a replay: the history at a cursor, read-only.

    Args:
        store: The history (read from a thread; the caller closes it).
        at: Where the cursor starts.
        marks: The journal's operation markers (None: none).
    """

    def __init__(
        self,
        store: HistoryStore,
        at: float,
        marks: Callable[[], list[OperationMark]] | None = None,
    ) -> None:
        self.store = store
        """The history."""
        self.source = HistorySource(store)
        found = store.time_range()
        self.first, self.last = found if found is not None else (at, at)
        """The history's range as last read (``time_range``)."""
        self.cursor = min(max(at, self.first), self.last)
        """The moment shown."""
        self.following = False
        """The cursor stays on the newest moment recorded (``follow``)."""
        self._to_end = False
        """The next snapshot reads the range again and puts the cursor on its end."""
        self.bucket_s = 5
        """The width of the bucket last shown: one ``step``."""
        self._reads = ReplayReads(marks)

    @property
    def reads(self) -> FleetReads:
        """Nothing of now (``ReplayReads``)."""
        return self._reads

    def capabilities(self) -> Capabilities:
        """None: every kind is off, because this is a replay."""
        return Capabilities(frozenset(), {kind: REPLAY for kind in Kind})

    async def run(self, command: Op[R], sink: EventSink | None = None) -> R:
        """Refused: a replay changes nothing."""
        raise Refused(f"{type(command).__name__.lower()}: {REPLAY} (it shows the past)")

    async def snapshot(self) -> FleetSnapshot:
        """The fleet at the cursor, as recorded (read in a thread)."""
        return await asyncio.to_thread(self.snapshot_now)

    def snapshot_now(self) -> FleetSnapshot:
        """The fleet at the cursor (blocking). Its ``gpu_source`` is the header's words."""
        if self.following or self._to_end:
            self._to_end = False
            self.refresh_range()
            self.cursor = self.last
        at = self.cursor
        found = self.source.snapshot_at(at)
        if found is None:  # no console ran then, within the coarsest bucket
            return FleetSnapshot(gpu_source=f"{REPLAY} {stamp(at)} · nothing recorded", taken_at=at)
        self.bucket_s = found.bucket_s
        words = [f"{REPLAY} {stamp(at)}", f"{found.bucket_s} s means"]
        if self.following:
            words.append("following")
        return replace(found.snapshot, gpu_source=" · ".join(words))

    def refresh_range(self) -> None:
        """Read the history's range again (another console may still record it). Blocking."""
        found = self.store.time_range()
        if found is not None:
            self.first, self.last = found

    def step(self, steps: float = 1.0, seconds: float | None = None) -> float:
        """Move the cursor ``steps`` buckets (or ``seconds``), within the range; stops following.

        Returns:
            The new cursor.
        """
        self.following = False
        delta = steps * self.bucket_s if seconds is None else seconds
        self.cursor = min(max(self.cursor + delta, self.first), self.last)
        return self.cursor

    def jump(self, to_end: bool) -> None:
        """The cursor on the history's first moment, or (at the next snapshot, the range read
        again) its last; stops following."""
        self.following = False
        self._to_end = to_end
        if not to_end:
            self.cursor = self.first

    def follow(self) -> None:
        """Keep the cursor on the newest moment recorded, at every snapshot (a console that
        still records the history: its buckets come in every few seconds)."""
        self.following = True

    def __repr__(self) -> str:
        return f"ReplayFleet(cursor={stamp(self.cursor)}, first={stamp(self.first)})"
