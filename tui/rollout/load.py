"""Whether a window's throughput can be judged: the load the servers were offered, measured.

A throughput says what a server made of the work it was given. A verdict compares two
configurations, so it holds only where both were given the same work, and the work is not
ours to hold still: the job ends, its queue empties, a server joins the fleet and takes a share
of the requests, a client gives up on a server that restarted. Each one moves the tokens/s of
the GPUs it touches as much as any knob does; measured in the demo, a job that finished during
a canary's window read ``worse: -54.4%`` (the canary's tail against the controls' tail) and
ended an autotune search on its regression budget.

So every window is read with the load each server held: its running and queued requests
(``IntervalRates.load``, SGLang's gauges). The offered load of a server is running + queued:
every request given to it and not finished. Under a closed loop (a client that keeps N requests
in flight, as the seed's script and ``gpufleet generate`` do) it is N whatever the server's
speed: a faster configuration moves requests from the queue to the batch, it does not change
the sum. Two questions:

1. **Did the controls' load change beyond its noise?** The reference is the controls' offered
   load per GPU before the change (the canary's baseline, a rollout's window before); the band
   around it is the larger of ``LOAD_TOLERANCE`` of it, ``NOISE_SIGMAS`` of its own spread, and
   ``MIN_BAND`` requests (a request in transit between two reads). Two intervals in a row
   outside it (or the window's last) is a change; a lone reading outside it is noise.
2. **Were the canary and its controls offered comparable load?** One side offered less than
   the other by more than the band while its own queue stayed empty is not comparable: its
   rate measures what it was sent, not what it can do (a canary whose client gave up on the
   restart; a canary the job's tail missed). A side that queues was offered all it can take:
   a faster canary with an empty queue beside controls that queue is compared, as it must be.

A window that fails either is ``not measured: the load changed (...)``, saying which, never
``better`` or ``worse``; where no server's gauges are known the window is judged on its
throughput alone, as before. The check is pure: it reads the sampler's intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, pstdev
from typing import Literal

from tui.retune.events import LOAD_CHANGED
from tui.rollout.sampling import IntervalRates, Load

LOAD_TOLERANCE = 0.25
"""Relative change of the offered load that counts as a change whatever its noise."""
NOISE_SIGMAS = 4.0
"""A change must also be this many standard deviations of the reference's own spread."""
MIN_BAND = 1.5
"""Requests: a band never narrower than this (a request between two reads of a gauge)."""
IDLE_SHARE = 0.1
"""A load that fell to this share of its reference or less: the job's requests stopped."""
QUEUE_EMPTY = 0.5
"""Mean queued requests below this: a queue that stayed empty."""
SETTLE_INTERVALS = 3
"""Intervals in a row within ``SETTLE_TOLERANCE`` of their mean: a load settled at a level."""
SETTLE_TOLERANCE = 0.1
"""How far from their mean the intervals of a settled level may be (relative; a slope of a
queue draining passes a looser band)."""


@dataclass(frozen=True, slots=True)
class LoadSeen:
    """The load over a window (per GPU, requests), as recorded beside its verdict."""

    canary_offered: float | None = None
    """The canary GPU's mean offered load (running + queued); None: not known."""
    canary_queued: float | None = None
    """Its mean queued requests."""
    control_offered: float | None = None
    """The control GPUs' mean offered load per GPU."""
    control_queued: float | None = None
    """Their mean queued requests per GPU."""
    reference: float | None = None
    """The controls' offered load per GPU before the change (the band's centre)."""

    def describe(self) -> str:
        """``load: canary 48 requests (0 queued), controls 48 (32 queued); before 48``."""
        if self.canary_offered is None and self.control_offered is None:
            return "load: not known (no running/queued gauges on the servers' /metrics)"

        def side(offered: float | None, queued: float | None) -> str:
            if offered is None:
                return "not known"
            return f"{offered:.0f} requests ({0.0 if queued is None else queued:.0f} queued)"

        words = (
            f"load: canary {side(self.canary_offered, self.canary_queued)}, controls "
            f"{side(self.control_offered, self.control_queued)} per GPU"
        )
        if self.reference is not None:
            words += f"; before the change {self.reference:.0f}"
        return words


@dataclass(frozen=True, slots=True)
class LoadChange:
    """Why a window's throughput is not comparable: the load it was measured under changed."""

    what: str
    """Which, in words (``the controls' offered load fell from 48 to 2 requests per GPU, 35 s
    into the window: the job's requests stopped``)."""
    at_s: float | None = None
    """Seconds into the window where it changed (None: over the whole window)."""
    level: float | None = None
    """The controls' offered load per GPU after the change (None: not a change of theirs)."""
    idle: bool = False
    """True when the job's requests stopped: nothing is left to measure."""

    def words(self) -> str:
        """``the load changed (...)``: the reason a verdict was not taken."""
        return f"{LOAD_CHANGED} ({self.what})"


def mean_load(loads: Sequence[Load | None]) -> Load | None:
    """The mean of the known loads (None: none known)."""
    known = [x for x in loads if x is not None]
    if not known:
        return None
    return Load(fmean(x.running for x in known), fmean(x.queued for x in known))


def per_interval(
    rates: Sequence[IntervalRates], gpus: Sequence[int], t_from: float, t_to: float
) -> list[Load | None]:
    """Each interval inside [t_from, t_to]: the mean load of ``gpus`` (per GPU; None where
    none of them is known), in the order ``tui.rollout.canary`` pairs its rates."""
    out: list[Load | None] = []
    for r in rates:
        if r.t0 < t_from - 1e-9 or r.t1 > t_to + 1e-9:
            continue
        out.append(mean_load([r.load.get(g) for g in gpus]))
    return out


def _band(reference: Sequence[float]) -> tuple[float, float]:
    """(centre, half-width) of the band a steady load stays in."""
    centre = fmean(reference)
    spread = pstdev(reference) if len(reference) > 1 else 0.0
    return centre, max(LOAD_TOLERANCE * centre, NOISE_SIGMAS * spread, MIN_BAND)


def control_change(
    reference: Sequence[float],
    window: Sequence[float | None],
    interval_s: float,
    *,
    complete: bool = False,
    whose: str = "the controls'",
    where: str = "into the window",
) -> LoadChange | None:
    """The first change of a load beyond its noise.

    Args:
        reference: Offered load per GPU before the change, one per interval (empty: unknown).
        window: Offered load per GPU in each interval of the window (None: not known then).
        interval_s: Seconds per interval (to say when).
        complete: The window is over: its last interval alone outside the band is a change
            too (while it runs, the newest interval waits for the next one to tell a change
            from one noisy reading).
        whose: Whose load, in words.
        where: Where the seconds count from, in words.

    Returns:
        The change (from the first of two intervals in a row outside the band), or None when
        it stayed within its noise (or nothing is known).
    """
    if not reference:
        return None
    centre, half = _band(reference)
    outside = [v is not None and abs(v - centre) > half for v in window]
    for i, out in enumerate(outside):
        last = i == len(outside) - 1
        if not out or not (outside[i + 1] if not last else complete):
            continue
        return _moved(centre, fmean(known(window[i:])), i * interval_s, whose, where)
    return None


def _moved(centre: float, level: float, at_s: float, whose: str, where: str) -> LoadChange:
    """A change of a load from ``centre`` to ``level``, in words."""
    moved = "fell" if level < centre else "rose"
    what = (
        f"{whose} offered load {moved} from {centre:.0f} to {level:.0f} requests per GPU, "
        f"{at_s:.0f} s {where}"
    )
    idle = level <= IDLE_SHARE * centre
    if idle:
        what += ": the job's requests stopped"
    elif centre <= 0.0:
        what += ": the job's requests began"
    return LoadChange(what, at_s, level, idle)


def _settled(values: Sequence[float | None]) -> int | None:
    """The index of the first of ``SETTLE_INTERVALS`` known values in a row that lie within
    ``SETTLE_TOLERANCE`` of their own mean (a level, not a slope), or None."""
    for i in range(len(values) - SETTLE_INTERVALS + 1):
        run = values[i : i + SETTLE_INTERVALS]
        if any(v is None for v in run):
            continue
        level = fmean(known(run))
        if all(abs(v - level) <= max(SETTLE_TOLERANCE * level, MIN_BAND) for v in known(run)):
            return i
    return None


@dataclass(frozen=True, slots=True)
class Follow:
    """What a window does at a reading, given its controls' load (``follow``)."""

    action: Literal["look", "wait", "restart", "stop"]
    """look: take a look; wait: not now (the load moves); restart: measure again from
    ``restart_at`` against ``reference``; stop: no verdict, ``change`` says why."""
    change: LoadChange | None = None
    """The change seen (for wait, restart and stop)."""
    restart_at: int = 0
    """The interval (of the window so far) the new window starts at."""
    reference: tuple[float, ...] = ()
    """The new level the new window is held to."""


def follow(
    reference: Sequence[float],
    window: Sequence[float | None],
    interval_s: float,
    *,
    may_restart: bool,
) -> Follow:
    """The window's next step after a reading, from its controls' offered load.

    Within its band: look. A newest interval alone outside it: wait for the next (noise, or
    the start of a change). A change: wait until the load settles at a new level
    (``SETTLE_INTERVALS`` in a row), then measure again from there (``restart``, when
    ``may_restart``), or stop: at once when it may not restart, and when the load fell to
    nothing and stayed there (the job ended: nothing left to measure).

    Args:
        reference: The controls' offered load per GPU the window is held to.
        window: Their offered load in each interval of the window so far.
        interval_s: Seconds per interval.
        may_restart: Whether the window may start again (once per canary).

    Returns:
        The step.
    """
    change = control_change(reference, window, interval_s)
    if change is None:
        if window and reference and window[-1] is not None:
            centre, half = _band(reference)
            if abs(window[-1] - centre) > half:
                return Follow("wait")
        return Follow("look")
    at = round((change.at_s or 0.0) / interval_s)
    after = window[at:]
    centre = fmean(reference)
    latest = known(after)[-SETTLE_INTERVALS:]
    if len(latest) == SETTLE_INTERVALS and max(latest) <= IDLE_SHARE * centre:
        return Follow(
            "stop",
            _moved(centre, fmean(latest), change.at_s or 0.0, "the controls'", "into the window"),
        )
    if not may_restart:
        return Follow("stop", change)
    first = _settled(after)
    if first is None:
        return Follow("wait", change)
    level = tuple(known(after[first : first + SETTLE_INTERVALS]))
    settled = _moved(centre, fmean(level), change.at_s or 0.0, "the controls'", "into the window")
    return Follow("restart", settled, at + first, level)


def offered_mismatch(
    canary: Sequence[Load | None], control: Sequence[Load | None]
) -> LoadChange | None:
    """Whether the canary and its controls were offered comparable load over a window.

    Args:
        canary: The canary GPU's load in each interval.
        control: The controls' mean load per GPU in the same intervals.

    Returns:
        Why not (one side offered less by more than the band, its own queue empty), or None
        when comparable (or not known).
    """
    c, k = mean_load(canary), mean_load(control)
    if c is None or k is None:
        return None
    if c.offered < k.offered and c.queued < QUEUE_EMPTY:
        short, full = c, k
        what = (
            f"the canary GPU was offered {c.offered:.0f} requests against {k.offered:.0f} per "
            "control GPU, its queue empty"
        )
        why = ": did its client give up on the restart?"
    elif k.offered < c.offered and k.queued < QUEUE_EMPTY:
        short, full = k, c
        what = (
            f"the control GPUs were offered {k.offered:.0f} requests per GPU against "
            f"{c.offered:.0f} on the canary GPU, their queue empty"
        )
        why = ": does the job send the canary more than its share?"
    else:
        return None
    if full.offered - short.offered <= max(LOAD_TOLERANCE * full.offered, MIN_BAND):
        return None
    if full.queued >= QUEUE_EMPTY:
        held = "theirs" if short is c else "the canary's"
        what += f" while {held} held {full.queued:.0f}"
    return LoadChange(what + why)


def seen(
    canary: Sequence[Load | None], control: Sequence[Load | None], reference: Sequence[float]
) -> LoadSeen:
    """The window's load as recorded (``LoadSeen``)."""
    c, k = mean_load(canary), mean_load(control)
    return LoadSeen(
        None if c is None else round(c.offered, 2),
        None if c is None else round(c.queued, 2),
        None if k is None else round(k.offered, 2),
        None if k is None else round(k.queued, 2),
        round(fmean(reference), 2) if reference else None,
    )


def offered(loads: Sequence[Load | None]) -> list[float | None]:
    """The offered load of each (None stays None)."""
    return [None if x is None else x.offered for x in loads]


def known(values: Sequence[float | None]) -> list[float]:
    """The known values (finite), in order."""
    return [v for v in values if v is not None and math.isfinite(v)]
