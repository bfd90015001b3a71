"""Batching the console's readings into the history: cheap to hand over, written a few at a time.

The console hands every fleet snapshot and status document to ``add_fleet`` / ``add_pipeline``
on its event loop (a list append); a thread worker calls ``flush_if_due`` after each, which
writes what accumulated in one transaction every ``flush_s`` seconds and prunes every
``prune_s``. A history that cannot be written stops being written, and says why once
(``error``): the console goes on without it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from tui.fleet.snapshot import FleetSnapshot
from tui.history.samples import fleet_samples, idle_samples, job_idle, pipeline_samples
from tui.history.store import TIERS, HistoryError, HistoryStore, Sample
from tui.pipeline.status import PipelineStatus

FLUSH_S = 5.0
"""Seconds between writes (the 5 s buckets of the finest tier fill at about this pace)."""
PRUNE_S = 600.0
"""Seconds between prunes (retention and the size cap)."""
MAX_PENDING = 100_000
"""Samples kept while the file cannot keep up; the oldest are dropped past this."""


class HistoryRecorder:
    """Collects readings and writes them to a ``HistoryStore`` in batches.

    Args:
        open_store: Opens the store (called on the first flush, in the worker's thread, so a
            slow or damaged file never blocks the console's start).
        flush_s: Seconds between writes.
        prune_s: Seconds between prunes.
        clock: Monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        open_store: Callable[[], HistoryStore],
        *,
        flush_s: float = FLUSH_S,
        prune_s: float = PRUNE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._open_store = open_store
        self.flush_s = flush_s
        """Seconds between writes."""
        self.prune_s = prune_s
        """Seconds between prunes."""
        self._clock = clock
        self._pending: list[Sample] = []
        self._pending_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._store: HistoryStore | None = None
        self._last_flush = clock()
        self._last_prune: float | None = None
        self._last_status_at: float | None = None
        self._status_read = False
        """Whether the console has read the status document once (until then the job's state
        is unknown, and nothing is recorded for it)."""
        self._status: PipelineStatus | None = None
        """The newest status document handed over (None: there is none)."""
        self._newest = 0.0
        self._bucket: int | None = None
        """The finest bucket of the last snapshot recorded (its slow readings once a bucket)."""
        self.error: str | None = None
        """Why the history is not written (None while it is)."""
        self.writes = True
        """Whether what is added is written (False: ``reading``, a replay's)."""

    @classmethod
    def at(cls, path: Path) -> HistoryRecorder:
        """A recorder writing ``path`` (opened on the first flush)."""
        return cls(lambda: HistoryStore(path))

    @classmethod
    def reading(cls, store: HistoryStore) -> HistoryRecorder:
        """A recorder that only reads ``store``: what the console adds is dropped, nothing is
        written (a replay: its snapshots are the record itself, shown again)."""
        recorder = cls(lambda: store)
        recorder.writes = False
        return recorder

    @property
    def store(self) -> HistoryStore | None:
        """The store, once opened (None before the first flush or when it failed)."""
        return self._store

    def open(self) -> HistoryStore | None:
        """Open the store now if not yet (blocking); None when it cannot be used."""
        with self._write_lock:
            return self._opened()

    def _opened(self) -> HistoryStore | None:
        if self._store is None and self.error is None:
            try:
                self._store = self._open_store()
            except HistoryError as error:
                self.error = str(error)
        return self._store

    # --- on the event loop ------------------------------------------------------------------

    def add(self, samples: list[Sample]) -> None:
        """Keep samples for the next write (cheap; thread-safe)."""
        if self.error is not None or not samples or not self.writes:
            return
        with self._pending_lock:
            self._pending.extend(samples)
            if len(self._pending) > MAX_PENDING:
                del self._pending[: len(self._pending) - MAX_PENDING]

    def add_fleet(self, snapshot: FleetSnapshot) -> None:
        """Keep a fleet snapshot's per-GPU readings, and the fleet's rates at zero while the
        job makes no output (``tui.history.samples.job_idle``): a console that watches records
        idle time as 0, so a gap in the rates means that no console was watching."""
        bucket = int(snapshot.taken_at // TIERS[0].bucket_s)
        samples = fleet_samples(snapshot, slow=bucket != self._bucket)
        self._bucket = bucket
        if self._status_read and job_idle(self._status, snapshot.taken_at):
            samples += idle_samples(snapshot.taken_at)
        self.add(samples)

    def add_pipeline(self, status: PipelineStatus | None) -> None:
        """Keep a status document's rates (once per document, and only while running)."""
        self._status_read, self._status = True, status
        if status is None:
            return
        samples = pipeline_samples(status, self._last_status_at)
        if samples:
            self._last_status_at = status.updated_at
            self.add(samples)

    # --- in a thread ------------------------------------------------------------------------

    @property
    def due(self) -> bool:
        """Whether ``flush_s`` has passed since the last write (cheap: no thread needed)."""
        return self._clock() - self._last_flush >= self.flush_s

    def flush_if_due(self) -> int:
        """Write what accumulated when ``flush_s`` has passed since the last write. Blocking.

        Returns:
            Samples written (0 when not due, nothing pending, or the history is unusable).
        """
        return self.flush() if self.due else 0

    def flush(self) -> int:
        """Write what accumulated now, and prune when due. Blocking (call from a thread).

        Returns:
            Samples written.
        """
        with self._write_lock:
            self._last_flush = self._clock()
            store = self._opened()
            with self._pending_lock:
                batch, self._pending = self._pending, []
            if store is None or not batch:
                return 0
            try:
                written = store.write(batch)
                self._newest = max(self._newest, max(s.t for s in batch))
                now = self._clock()
                if self._last_prune is None or now - self._last_prune >= self.prune_s:
                    self._last_prune = now
                    store.prune(self._newest)
            except HistoryError as error:
                self.error = str(error)
                return 0
            return written

    def close(self) -> None:
        """Write what is pending and close the file. Blocking."""
        self.flush()
        with self._write_lock:
            if self._store is not None:
                self._store.close()
                self._store = None
