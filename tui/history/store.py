"""The fleet's time series on disk: SQLite from the standard library, bounded in time and size.

Every sample goes into three tiers of buckets; a bucket keeps the sum and the count of the
samples that fell in it, so its value is their mean, and writing the same sample twice (two
consoles on one fleet) leaves the mean as it was. The finest bucket is written with each write;
a coarser one is summed in memory while it is open and written once it closes
(``tui.history.open_buckets``).

======  =========  ===========  =================================================
tier    bucket     kept         what reads it
======  =========  ===========  =================================================
0       5 s        2 hours      the 10-minute and 1-hour views
1       1 minute   2 days       the 6-hour view, a job of up to 2 days
2       15 minutes 120 days     a longer job
======  =========  ===========  =================================================

At about 40 series (7 GPUs x 5 metrics and the fleet's 2), that is at most about 600,000 rows,
some 25 MB. The file is also capped (``MAX_BYTES``, 64 MiB): past it, the oldest buckets of the
coarsest tier that holds any are deleted and the pages returned to the file system
(incremental vacuum), whatever the number of GPUs.

A file that is not a history database raises ``HistoryError`` naming it; nothing is overwritten.
Blocking: call from threads (one connection, shared under a lock).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import sqlite3
import stat
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tui.history.open_buckets import OpenBuckets, Row
from tui.outputs import UnsafePath, make_dir, write_reason

SCHEMA_VERSION = 1
"""Written in the file's ``user_version``; another version is refused, not migrated blindly."""

FLEET = -1
"""The ``gpu`` column of the fleet's own series (``gpu=None`` in the API)."""

MAX_BYTES = 64 * 1024 * 1024
"""The file's size cap."""
CACHE_KIB = 2048
"""SQLite's page cache for the connection, KiB (``PRAGMA cache_size``): what the store holds in
memory is bounded by this, not by the file, which grows for two hours (tier 0) and two days
(tier 1) of a job; said explicitly rather than left to the library's default."""


@dataclass(frozen=True, slots=True)
class Tier:
    """One resolution of the store."""

    bucket_s: int
    """Bucket width in seconds: samples in one bucket are averaged."""
    keep_s: int
    """How long its buckets are kept (seconds before the newest sample written)."""


TIERS: tuple[Tier, ...] = (Tier(5, 2 * 3600), Tier(60, 2 * 86400), Tier(900, 120 * 86400))
"""Finest first (see the module's table)."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One reading of one metric."""

    t: float
    """time.time() of the reading."""
    gpu: int | None
    """GPU index, or None for the fleet's own series."""
    metric: str
    """The metric's name (``tui.history.samples.METRICS``)."""
    value: float
    """The value, in the metric's unit."""


Point = tuple[float, float]
"""(bucket start as time.time(), mean of its samples)."""


class HistoryError(RuntimeError):
    """The history cannot be used or read (its file here, a Prometheus server for
    ``tui.agent.history``); the message names it and says why."""


class HistoryStore:
    """Time series of the fleet in one SQLite file.

    Args:
        path: The file (created with its directory when missing); ``":memory:"`` for a test.
        tiers: Resolutions, finest first.
        max_bytes: The file's size cap.

    Raises:
        HistoryError: the file exists but is not a history database of this version.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        tiers: Sequence[Tier] = TIERS,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        if not tiers or any(b.bucket_s <= a.bucket_s for a, b in itertools.pairwise(tiers)):
            raise ValueError("tiers: give at least one, finest first")
        if any(t.bucket_s % tiers[0].bucket_s for t in tiers):
            raise ValueError("tiers: each bucket width a multiple of the finest's")
        self.path = path
        """The file."""
        self.tiers = tuple(tiers)
        """Resolutions, finest first."""
        self.max_bytes = max_bytes
        """The size cap."""
        self._lock = threading.Lock()
        self._series: dict[tuple[int, str], int] = {}
        self._open_buckets = OpenBuckets([t.bucket_s for t in self.tiers])
        """The coarser tiers' buckets still open (``tui.history.open_buckets``)."""
        try:
            if isinstance(path, Path):
                # SQLite opens what the name points to: a link, or another user's file, is
                # refused here first (the directory checked: nobody else can put one there).
                make_dir(path.parent)
                with contextlib.suppress(FileNotFoundError):
                    st = os.lstat(path)
                    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                        raise UnsafePath(path, "is not a regular file of this user: refused")
            self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=10.0)
            self._open()
        except OSError as error:
            raise HistoryError(f"{path}: cannot be used ({write_reason(error)})") from None
        except sqlite3.Error as error:
            raise HistoryError(f"{path}: not a usable history database ({error})") from None

    def _open(self) -> None:
        db = self._db
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if version == 0 and not tables:
            # auto_vacuum must be chosen before the first table: deleted pages can then go back
            # to the file system, which the size cap needs.
            db.execute("PRAGMA auto_vacuum = INCREMENTAL")
            db.executescript(
                """
                CREATE TABLE series (
                    id INTEGER PRIMARY KEY,
                    gpu INTEGER NOT NULL,
                    metric TEXT NOT NULL,
                    UNIQUE (gpu, metric)
                );
                CREATE TABLE points (
                    tier INTEGER NOT NULL,
                    series INTEGER NOT NULL,
                    t INTEGER NOT NULL,
                    total REAL NOT NULL,
                    count INTEGER NOT NULL,
                    PRIMARY KEY (tier, series, t)
                ) WITHOUT ROWID;
                """
            )
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.commit()
        elif version != SCHEMA_VERSION or not {"series", "points"} <= tables:
            raise HistoryError(
                f"{self.path}: history schema {version} with tables {sorted(tables)}; "
                f"expected schema {SCHEMA_VERSION} (move the file away to start a new history)"
            )
        if str(self.path) != ":memory:":
            db.execute("PRAGMA journal_mode = WAL")  # readers (another console) never wait
        db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        for series_id, gpu, metric in db.execute("SELECT id, gpu, metric FROM series"):
            self._series[(gpu, metric)] = series_id

    def close(self) -> None:
        """Write the coarser tiers' open buckets, and close the file."""
        with self._lock:
            try:
                with self._db:
                    self._upsert(self._open_buckets.drain())
            except sqlite3.Error:
                pass  # closing: what cannot be written now is lost with the open buckets
            self._db.close()

    def _upsert(self, buckets: list[Row]) -> None:
        self._db.executemany(
            "INSERT INTO points (tier, series, t, total, count) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (tier, series, t) DO UPDATE SET"
            " total = total + excluded.total, count = count + excluded.count",
            [(*key, total, count) for key, (total, count) in buckets],
        )

    # --- writing ----------------------------------------------------------------------------

    def _series_id(self, gpu: int | None, metric: str) -> int:
        key = (FLEET if gpu is None else gpu, metric)
        found = self._series.get(key)
        if found is None:
            cursor = self._db.execute("INSERT INTO series (gpu, metric) VALUES (?, ?)", key)
            found = int(cursor.lastrowid or 0)
            self._series[key] = found
        return found

    def write(self, samples: Iterable[Sample]) -> int:
        """Add samples to every tier, in one transaction.

        Args:
            samples: Readings, any order; NaN and infinite values are skipped.

        Returns:
            How many samples were written.

        Raises:
            HistoryError: the file could not be written (naming it and why).
        """
        # Summed per bucket before SQLite sees them: a flush holds a few seconds of readings,
        # which share one 5 s bucket per series (one upsert each, not one per reading). Each
        # reading goes into its finest bucket only; the coarser tiers' are sums of those (their
        # widths are multiples of the finest's), kept open in memory and written once, when a
        # reading past their end arrives: the console's ~200 series a second cost three upserts
        # each per flush, two of them the same minute's and quarter-hour's again (0.8 ms of
        # its poll).
        finest: dict[tuple[int, int], list[float]] = {}
        width = self.tiers[0].bucket_s
        written = 0
        with self._lock:
            try:
                with self._db:
                    for sample in samples:
                        if not math.isfinite(sample.value):
                            continue
                        written += 1
                        key = (self._series_id(sample.gpu, sample.metric),
                               int(sample.t // width) * width)  # fmt: skip
                        sums = finest.get(key)
                        if sums is None:
                            finest[key] = [sample.value, 1]
                        else:
                            sums[0] += sample.value
                            sums[1] += 1
                    closed = self._open_buckets.add(finest)
                    self._upsert([((0, *key), sums) for key, sums in finest.items()] + closed)
                self._open_buckets.written(closed)
            except sqlite3.Error as error:
                self._series.clear()  # ids of a rolled-back transaction may not exist
                self._reload_series()
                raise HistoryError(f"{self.path}: cannot write the history ({error})") from None
        return written

    def _reload_series(self) -> None:
        try:
            for series_id, gpu, metric in self._db.execute("SELECT id, gpu, metric FROM series"):
                self._series[(gpu, metric)] = series_id
        except sqlite3.Error:
            pass

    def prune(self, now: float) -> int:
        """Drop what each tier keeps no longer, then enforce the size cap.

        Args:
            now: The reference time (the newest sample written; not the clock, so a history
                replayed from the past is kept).

        Returns:
            How many buckets were deleted.
        """
        deleted = 0
        with self._lock:
            try:
                with self._db:
                    for index, tier in enumerate(self.tiers):
                        deleted += self._db.execute(
                            "DELETE FROM points WHERE tier = ? AND t < ?",
                            (index, now - tier.keep_s),
                        ).rowcount
                while self._size_locked() > self.max_bytes:
                    with self._db:
                        removed = self._drop_oldest_locked()
                    if not removed:
                        break
                    deleted += removed
                # Give the freed pages back to the file system (the file shrinks).
                self._db.execute("PRAGMA incremental_vacuum")
            except sqlite3.Error as error:
                raise HistoryError(f"{self.path}: cannot prune the history ({error})") from None
        return deleted

    def _drop_oldest_locked(self) -> int:
        """Delete the oldest quarter of the coarsest tier that holds buckets."""
        for index in reversed(range(len(self.tiers))):
            low, high = self._db.execute(
                "SELECT MIN(t), MAX(t) FROM points WHERE tier = ?", (index,)
            ).fetchone()
            if low is None:
                continue
            cut = low + max((high - low) // 4, self.tiers[index].bucket_s)
            cursor = self._db.execute("DELETE FROM points WHERE tier = ? AND t < ?", (index, cut))
            return cursor.rowcount
        return 0

    def _size_locked(self) -> int:
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
        size = self._db.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)

    def size_bytes(self) -> int:
        """Bytes the history's pages hold (what the cap bounds)."""
        with self._lock:
            return self._size_locked()

    # --- reading ----------------------------------------------------------------------------

    def series(
        self, gpu: int | None, metric: str, since: float, until: float | None = None
    ) -> list[Point]:
        """One metric's buckets from ``since`` on, at the finest tier that still covers it.

        Args:
            gpu: GPU index, or None for a fleet series.
            metric: The metric (``tui.history.samples.METRICS``).
            since: time.time() of the oldest bucket wanted.
            until: time.time() of the newest bucket wanted (default: all).

        Returns:
            (bucket start, mean) pairs, oldest first; empty when nothing is stored.
        """
        key = (FLEET if gpu is None else gpu, metric)
        with self._lock:
            series = self._series.get(key)
            if series is None:
                self._reload_series()
                series = self._series.get(key)
            if series is None:
                return []
            tier = self._tier_for(series, since)
            first = int(since // self.tiers[tier].bucket_s) * self.tiers[tier].bucket_s
            last = math.inf if until is None else until
            rows = self._db.execute(
                "SELECT t, total, count FROM points WHERE tier = ? AND series = ? AND t >= ?"
                " AND t <= ? ORDER BY t",
                (tier, series, first, last),
            ).fetchall()
            sums = {int(t): [float(total), int(count)] for t, total, count in rows}
            if tier > 0:
                self._open_buckets.add_to(sums, tier, series, first, last)
        return [(float(t), total / count) for t, (total, count) in sorted(sums.items()) if count]

    def _tier_for(self, series: int, since: float) -> int:
        """The finest tier that covers ``since``: it holds a bucket that old, or ``since`` is
        within what it keeps (the history is younger than that: no tier reaches further)."""
        for index in range(len(self.tiers) - 1):
            oldest, newest = self._db.execute(
                "SELECT MIN(t), MAX(t) FROM points WHERE tier = ? AND series = ?", (index, series)
            ).fetchone()
            if oldest is None:
                continue
            if oldest <= since or since >= newest - self.tiers[index].keep_s:
                return index
        return len(self.tiers) - 1

    def series_keys(self) -> list[tuple[int | None, str]]:
        """Every series the store holds: (GPU or None for the fleet's, metric), in order."""
        with self._lock:
            self._reload_series()
            found = sorted(self._series, key=lambda k: (k[0], k[1]))
        return [(None if gpu == FLEET else gpu, metric) for gpu, metric in found]

    def values_at(self, t: float) -> tuple[float, int, dict[tuple[int | None, str], float]] | None:
        """Every series' value at ``t``: the mean of the bucket that holds it, from the finest
        tier that still has buckets that old (what a replay shows at a past moment).

        Args:
            t: time.time() of the moment.

        Returns:
            (the bucket's start, its width in seconds, {(GPU or None, metric): mean}); None
            when no tier has a bucket at ``t`` (nothing was recorded then).
        """
        with self._lock:
            self._reload_series()
            names = {series: key for key, series in self._series.items()}
            for index, tier in enumerate(self.tiers):
                start = int(t // tier.bucket_s) * tier.bucket_s
                rows = self._db.execute(
                    "SELECT series, total / count FROM points WHERE tier = ? AND t = ?",
                    (index, start),
                ).fetchall()
                if rows:
                    values = {}
                    for series, value in rows:
                        gpu, metric = names[series]
                        values[(None if gpu == FLEET else gpu, metric)] = float(value)
                    return float(start), tier.bucket_s, values
        return None

    def first_time(self, gpu: int | None, metric: str) -> float | None:
        """When the series starts, as far as the store still knows (a "whole job" view's start):
        from the finest tier that has lost nothing to retention yet.

        Returns:
            time.time() of its oldest bucket kept, or None when the series is empty.
        """
        key = (FLEET if gpu is None else gpu, metric)
        with self._lock:
            series = self._series.get(key)
            if series is None:
                return None
            return self._oldest_locked("series = ?", (series,))

    def time_range(self) -> tuple[float, float] | None:
        """The first and the last moment recorded, over every series (a replay's range).

        Returns:
            (the oldest bucket kept, from the finest tier that has lost nothing to retention,
            as ``first_time``; the newest bucket's start), or None when nothing is stored.
        """
        with self._lock:
            first = self._oldest_locked("1", ())
            if first is None:
                return None
            newest = self._db.execute("SELECT MAX(t) FROM points").fetchone()[0]
            return first, float(newest)

    def _oldest_locked(self, where: str, params: tuple[int, ...]) -> float | None:
        """The oldest bucket kept of the points ``where`` selects, from the finest tier that
        has lost nothing to retention yet (the coarsest otherwise); None: no such points."""
        for index, tier in enumerate(self.tiers):
            oldest, newest = self._db.execute(
                f"SELECT MIN(t), MAX(t) FROM points WHERE tier = ? AND {where}",
                (index, *params),
            ).fetchone()
            if oldest is None:
                continue
            if newest - oldest < tier.keep_s - tier.bucket_s or index == len(self.tiers) - 1:
                return float(oldest)
        return None
