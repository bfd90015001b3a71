"""The run's one writer: full result buffers become shards committed to the done record, failure
records are appended to ``failures.jsonl``, in the order they were handed over, in a thread.

One task writes, so a shard and the failures around it land in order and the event loop never
waits on a disk. A write that fails (a full disk: ``tui.outputs.WriteFailed``, naming the file)
is told once and nothing more is written: the job stops, and what was committed before stays.
The task itself never dies of a failed write: the run's last ``join`` waits on it, and a dead
writer left that wait, and the job, hanging for ever (status ``running`` every second, SIGTERM
no help).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from tui.pipeline.done_record import DoneRecord
from tui.pipeline.failures import FailureLog
from tui.pipeline.shards import ShardStore


@dataclass(frozen=True, slots=True)
class _Shard:
    """A full buffer: shard ``number`` holding ``indices``."""

    number: int
    indices: list[int]
    lines: list[bytes]


@dataclass(frozen=True, slots=True)
class _Failures:
    """Failure records, each a whole line."""

    records: list[bytes]


Committed = Callable[[int, list[int]], None]
"""on_committed(shard number, its indices): the shard is durable and in the done record."""
Broken = Callable[[Exception], None]
"""on_broken(error): a write failed; nothing more will be written."""


class OutputWriter:
    """Writes a run's shards and failure records (start ``run`` as a task)."""

    def __init__(
        self,
        store: ShardStore,
        done: DoneRecord,
        failures: FailureLog,
        *,
        on_committed: Committed,
        on_broken: Broken,
    ) -> None:
        """Args: the output directory, its done record and failures file; what to tell when a
        shard is committed and when a write fails."""
        self.broken = False
        """A write failed: nothing more is written."""
        self._store = store
        self._done = done
        self._failures = failures
        self._on_committed = on_committed
        self._on_broken = on_broken
        self._queue: asyncio.Queue[_Shard | _Failures] = asyncio.Queue()
        self._failure_buffer: list[bytes] = []

    @property
    def failed(self) -> int:
        """Failure records this run appended whole and fsynced: what the file holds."""
        return self._failures.count

    def shard(self, number: int, indices: list[int], lines: list[bytes]) -> None:
        """Hand over shard ``number`` (the failure records before it go first)."""
        self.flush_failures()
        self._queue.put_nowait(_Shard(number, indices, lines))

    def failure(self, record: bytes) -> None:
        """Keep one failure record for the next ``flush_failures``."""
        self._failure_buffer.append(record)

    def flush_failures(self) -> None:
        """Hand over the failure records kept so far."""
        if self._failure_buffer:
            self._queue.put_nowait(_Failures(self._failure_buffer))
            self._failure_buffer = []

    async def join(self) -> None:
        """Wait until everything handed over is written (or dropped after a failed write)."""
        self.flush_failures()
        await self._queue.join()

    async def run(self) -> None:
        """Write what is handed over, in order, until cancelled."""
        while True:
            job = await self._queue.get()
            try:
                if self.broken:
                    continue
                if isinstance(job, _Failures):
                    await asyncio.to_thread(self._failures.append, job.records)
                    continue
                await asyncio.to_thread(
                    self._store.commit, self._done, job.number, job.indices, job.lines
                )
                self._on_committed(job.number, job.indices)
            except Exception as exc:  # never dies (see the module docstring)
                self.broken = True
                self._on_broken(exc)
            finally:
                self._queue.task_done()
