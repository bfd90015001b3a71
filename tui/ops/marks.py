"""The output-rate chart's markers: the operations of the journal that changed a server.

A marker names what happened (``canary sim-m120 GPU 0``, ``apply sim-aggressive GPUs 0-6``,
``kill GPU 3``) and when the servers changed: for an operation that measured a window before
the change, at that window's end (an apply's or a canary's restart comes after it), else at its
start. Only operations that changed a server make one: refusals do not (nothing was stopped), a
kill whose every GPU failed to stop does not, nor do a pipeline's start and stop (no server
changed), an autotune's own records (its trials are journalled as canaries), and the summary of
a stepped rollout (each step is a marker of its own). An operation that measured also carries
its windows (``before`` and ``after``), which the chart shades for the last one.

Reading the journal is the journal's (``read_journal``); ``JournalMarks`` reads it again only
when the file changed, since the console asks once a second.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui import paths
from tui.ops.journal import JournalEntry, read_journal
from tui.words import gpus_words

SERVER_CHANGES = frozenset(
    {"apply", "relaunch", "rollback", "canary", "rollout-step", "rollback-step", "kill", "start"}
)
"""Journal types whose operation stops or starts servers."""

SHOWN_AS = {"rollout-step": "rollout", "rollback-step": "rollback"}
"""A step is named for what it is a step of."""


@dataclass(frozen=True, slots=True)
class Window:
    """A measurement window of an operation."""

    name: str
    """``before`` or ``after``."""
    start: float
    """time.time() at its start."""
    end: float
    """time.time() at its end."""


@dataclass(frozen=True, slots=True)
class OperationMark:
    """One operation that changed servers, as the chart marks it."""

    t: float
    """time.time() when the servers changed (see the module)."""
    kind: str
    """What it was, as shown: apply, canary, rollout, rollback, relaunch, kill, start."""
    label: str
    """The marker's words: kind, profile and GPUs (``canary sim-m120 GPU 0``)."""
    ok: bool
    """It did everything it set out to do (a failed one is still a change: marked as such)."""
    windows: tuple[Window, ...] = ()
    """Its measurement windows, before first (empty: it measured none)."""


def _span(value: Any) -> tuple[float, float] | None:
    """A recorded ``[start, end]``, or None when it is missing or not two ordered numbers."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    start, end = value
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (start, end))
    return (float(start), float(end)) if numbers and start <= end else None


def _windows(entry: JournalEntry) -> tuple[Window, ...]:
    """The windows an apply (``detail.throughput``) or a canary recorded; older entries have
    none."""
    detail: Mapping[str, Any] = entry.detail
    throughput = detail.get("throughput")
    if isinstance(throughput, Mapping):
        spans = (throughput.get("before_window"), throughput.get("after_window"))
    else:
        spans = (detail.get("baseline_window"), detail.get("measure_window"))
    return tuple(
        Window(name, *span)
        for name, raw in zip(("before", "after"), spans, strict=True)
        if (span := _span(raw)) is not None
    )


def mark_of(entry: JournalEntry) -> OperationMark | None:
    """The marker of one journal entry, or None when it changed no server (see the module)."""
    if entry.type not in SERVER_CHANGES or entry.refused:
        return None
    if entry.type in ("rollback", "rollout") and "steps" in entry.detail:
        return None  # a stepped walk's summary: its steps are marked
    if entry.type in ("kill", "start") and entry.gpus and set(entry.failed) >= set(entry.gpus):
        return None  # nothing stopped, or nothing started
    gpus = entry.gpus
    if entry.type == "start":
        # servers found running and re-attached were not started: a demo reopened after 'keep'
        # was marked 'start sim-baseline GPUs 0-6' while nothing had changed
        kept = entry.detail.get("reattached")
        kept = set(kept) if isinstance(kept, list) else set()
        gpus = tuple(g for g in entry.gpus if g not in kept)
        if entry.gpus and not gpus:
            return None
    kind = SHOWN_AS.get(entry.type, entry.type)
    words = [kind]
    if entry.target and kind != "kill":
        words.append(entry.target)
    words.append(gpus_words(gpus))
    if not entry.ok:
        words.append("(failed)")
    windows = _windows(entry)
    before = next((w for w in windows if w.name == "before"), None)
    changed_at = before.end if before is not None else entry.started_at
    return OperationMark(changed_at, kind, " ".join(w for w in words if w), entry.ok, windows)


def mark_time(mark: OperationMark) -> float:
    """When the servers changed: the key that orders markers."""
    return mark.t


def marks_of(
    entries: Iterable[JournalEntry], gpus: frozenset[int] | None = None
) -> tuple[OperationMark, ...]:
    """The markers of ``entries``, oldest first; with ``gpus``, only of operations on one of them
    (or naming no GPU)."""
    marks = (
        mark_of(entry)
        for entry in entries
        if gpus is None or not entry.gpus or not gpus.isdisjoint(entry.gpus)
    )
    return tuple(sorted((m for m in marks if m is not None), key=mark_time))


class JournalMarks:
    """The journal's markers, read again only when the file changed. Blocking (a thread).

    Why: the console asks once a second; reading and parsing a long job's journal each time
    (hundreds of entries with their reports) was work for nothing between operations.

    Args:
        path: The journal (default ``tui.paths.journal_file()``).
        gpus: Only the operations on these GPUs (a console watching some of the fleet's
            ports); None: every operation.
    """

    def __init__(self, path: Path | None = None, gpus: frozenset[int] | None = None) -> None:
        self.path = path
        """The journal (None: the default, looked up at each call)."""
        self.gpus = gpus
        """The GPUs whose operations are marked (None: all)."""
        self._key: tuple[int, int, int] | None = None
        self._marks: tuple[OperationMark, ...] = ()

    def __call__(self) -> list[OperationMark]:
        """Every marker, oldest first (empty when there is no journal)."""
        target = self.path or paths.journal_file()
        try:
            stat = os.stat(target)
        except OSError:
            self._key, self._marks = None, ()
            return []
        key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if key != self._key:
            self._marks = marks_of(read_journal(target).entries, self.gpus)
            self._key = key
        return list(self._marks)
