"""The pipeline's S3 side: connect (or keep trying), reconcile, upload committed shards, finish.

S3 being unreachable at start is not bad input: generation goes on, committed shards are held
locally, and the connection is retried with backoff up to ``wait_s``; once S3 answers, the
bucket check, the prefix's lease (``tui.pipeline.s3_lease``: one job per prefix) and the
reconciliation run and every held shard is uploaded. A bucket that does not exist (or is
forbidden), a prefix held by another job, or a lease lost to one is a permanent error, reported
as such whenever it is found: it stops the job, never retried for ever.

Reconciling trusts an object only when it is the one this job uploaded: its ETag, listed with
every object, equals the manifest entry's (any rewrite changes it); an entry of an older
manifest, without one, is checked once by the sha256 its uploader recorded. A size that matches
proves nothing: another job's shard of the same name and size used to pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from tui.pipeline.done_record import DoneRecord
from tui.pipeline.manifest_keeper import ManifestKeeper
from tui.pipeline.s3_lease import LeaseLost, S3Lease
from tui.pipeline.s3_sink import ManifestEntry, S3Error, S3Sink, S3Unreachable, is_transient
from tui.pipeline.shards import ShardStore

T = TypeVar("T")

Notify = Callable[[str], None]
"""Receives a plain-words event for the status document's message."""
Fatal = Callable[[str, bool], None]
"""Called once when S3 cannot be used: (message, whether it is bad input rather than outage)."""


class _Stopped(Exception):
    """A permanent S3 error stopped the job (already reported through ``fatal``)."""


def _log(message: str) -> None:
    print(f"gpufleet generate: {message}", file=sys.stderr, flush=True)


class Uploads:
    """Uploads committed shards to one bucket and keeps its manifest right."""

    def __init__(
        self,
        s3: S3Sink,
        store: ShardStore,
        done: DoneRecord,
        *,
        job_id: str,
        wait_s: float,
        notify: Notify,
        fatal: Fatal,
        lease_ttl_s: float,
    ) -> None:
        """Args: the sink, the local store and done record, the job's id (the manifest carries
        it), how long to keep trying an unreachable S3 at start, where events and a fatal
        error go, and how long the prefix's lease lasts after each renewal."""
        self.s3 = s3
        """The bucket."""
        self.keeper = ManifestKeeper(job_id)
        """The manifest as this run knows it."""
        self.lease = S3Lease(s3, job_id, self.keeper.run_id, lease_ttl_s)
        """This job's hold on the prefix."""
        self.s3_ok = False
        """Whether the last call to S3 succeeded (the lease is released at the end only then:
        a release that waits on an unreachable S3 would hold up a stop)."""
        self.ready = False
        """Whether the bucket was checked and reconciled (uploads flow only then)."""
        self._store = store
        self._done = done
        self._wait_s = wait_s
        self._notify = notify
        self._fatal = fatal
        self._queue: asyncio.Queue[int] = asyncio.Queue()
        self._queued: set[int] = set()
        self._held = 0
        self._dirty = False

    @property
    def pending(self) -> int:
        """Durable local shards not yet confirmed uploaded (queued or held for S3)."""
        return len(self._queued) + self._held

    async def connect(self, missing_local: tuple[int, ...]) -> asyncio.Task[None] | None:
        """Check the bucket and reconcile; if S3 is unreachable, keep trying in the background.

        Args:
            missing_local: committed shards with no local file (reported, not uploadable).

        Returns:
            The background retry task when S3 could not be reached, else None.

        Raises:
            S3Error: the bucket cannot be used (missing, forbidden): bad input.
        """
        try:
            await self._check_and_reconcile(missing_local)
            return None
        except S3Unreachable as exc:
            _log(f"{exc}; generating anyway, retrying S3 for up to {self._wait_s:g}s")
            self._notify(f"S3 unreachable, retrying: {exc}")
            return asyncio.create_task(self._keep_trying(missing_local))

    async def _check_and_reconcile(self, missing_local: tuple[int, ...]) -> None:
        try:
            await asyncio.to_thread(self.s3.check_bucket)
            note = await asyncio.to_thread(self.lease.acquire)
            if note:
                _log(note)
            if not self.lease.enforced:
                _log(
                    f"warning: s3://{self.s3.bucket} does not implement conditional writes: "
                    "one job per prefix is not enforced"
                )
            uploads = await asyncio.to_thread(self._reconcile, missing_local)
            self.s3_ok = True
        except S3Error:
            raise
        except Exception as exc:
            if is_transient(exc):
                raise S3Unreachable(f"cannot reach S3 ({exc})") from None
            raise S3Error(f"--s3-bucket={self.s3.bucket}: {exc}") from None
        # Shards committed while S3 was away are in the done record, so the plan covers them.
        self._held = 0
        self.ready = True
        for number in uploads:
            self._enqueue(number)

    async def _keep_trying(self, missing_local: tuple[int, ...]) -> None:
        deadline = time.monotonic() + self._wait_s
        delay = 0.5
        while True:
            await asyncio.sleep(min(delay, max(deadline - time.monotonic(), 0.0)))
            try:
                await self._check_and_reconcile(missing_local)
                _log("S3 reachable again; uploading the held shards")
                self._notify("S3 reachable again")
                return
            except S3Unreachable as exc:
                if time.monotonic() >= deadline:
                    self._fatal(
                        f"S3 unreachable for {self._wait_s:g}s ({exc}); the durable shards are "
                        f"kept in {self._store.out_dir}: run again to upload them",
                        False,
                    )
                    return
                self._notify(f"S3 unreachable, retrying in {delay:g}s: {exc}")
                delay = min(delay * 2, 10.0)
            except S3Error as exc:
                self._fatal(str(exc), True)
                return

    def committed(self, number: int) -> None:
        """A shard became durable: upload it now, or hold it until S3 is reachable."""
        if self.ready:
            self._enqueue(number)
        else:
            self._held += 1

    def _enqueue(self, number: int) -> None:
        if number not in self._queued:
            self._queued.add(number)
            self._queue.put_nowait(number)

    def _reconcile(self, missing_local: tuple[int, ...]) -> list[int]:
        """Adopt the bucket's manifest; committed local shards it lacks are to be uploaded.

        Cheap at any scale: one GET of the manifest and one LIST per 1,000 shards.
        """
        remote = self.s3.read_manifest()
        self.keeper.check_owner(self.s3, remote)
        if not self.ready:
            self.keeper.adopt(remote)
        objects = self.s3.list_shard_keys()
        local = self._store.local_shards()
        uploads = []
        for number in sorted(self._done.shards):
            name = self._store.path(number).name
            entry = self.keeper.entries.get(name)
            if entry is not None and self._intact(entry, objects.get(entry.key)):
                continue
            if entry is not None and entry.key in objects:
                _log(
                    f"warning: s3://{self.s3.bucket}/{entry.key} is not the object this job "
                    "uploaded (its ETag or sha256 differs from the manifest's): uploading it again"
                )
            if number in local:
                self.keeper.entries.pop(name, None)
                uploads.append(number)
            elif entry is not None:
                _log(f"warning: {entry.key} is in the manifest, missing in S3 and locally")
        if missing_local:
            _log(f"warning: committed shards missing locally: {list(missing_local)[:10]}")
        # A manifest that is not ours (stale, or written by someone else) is rewritten.
        self._dirty = self._dirty or not self.keeper.in_sync_with(remote)
        return uploads

    def _intact(self, entry: ManifestEntry, listed: tuple[int, str] | None) -> bool:
        """Whether the object listed for ``entry`` is the one this job uploaded (see the module
        docstring); an older entry found intact gets its ETag (the manifest is rewritten)."""
        if listed is None or listed[0] != entry.bytes:
            return False
        if entry.etag:
            return listed[1] == entry.etag
        etag, sha256 = self.s3.stored_sha256(entry.key)
        if sha256 != entry.sha256 or etag != listed[1]:
            return False
        self.keeper.add(replace(entry, etag=etag))
        self._dirty = True
        return True

    async def run(self) -> None:
        """Upload queued shards forever (cancelled at the end of the run, or ended by a
        permanent error, which stops the job)."""
        with contextlib.suppress(_Stopped):
            while True:
                number = await self._queue.get()
                path = self._store.path(number)
                entry = await self._retrying(f"upload of {path.name}", self.s3.upload, path)
                self.keeper.add(entry)
                self._dirty = True
                if self._queue.empty():
                    # One manifest write per burst: a backlog after an outage costs one, not N.
                    await self._publish()
                self._queued.discard(number)

    async def keep_lease(self) -> None:
        """Renew the prefix's lease every quarter of its length while the job runs (cancelled
        at the end); a lease lost to another job stops the job."""
        while True:
            await asyncio.sleep(self.lease.renew_every_s)
            if not self.ready:
                continue
            try:
                await asyncio.to_thread(self.lease.renew)
                self.s3_ok = True
            except LeaseLost as exc:
                self._fatal(str(exc), False)
                return
            except Exception as exc:  # S3 away: uploads wait (the lease is not fresh); retry
                self.s3_ok = False
                self._notify(f"S3 lease renewal failed ({exc}); retrying")

    async def _confirm_lease(self) -> None:
        """The run's last word on S3: it still holds the prefix (renewed once more). Another
        job that took the lease since the last renewal (every quarter of its length: a short
        job's whole run fits in one) fails the run naming it, never "all prompts done and
        uploaded" over a prefix another job now writes."""
        if not (self.ready and self.lease.held):
            return
        try:
            await asyncio.to_thread(self.lease.renew)
        except LeaseLost as exc:
            self._fatal(str(exc), False)
        except Exception as exc:  # S3 away at the very end: the lease runs out on its own
            self._notify(f"final S3 lease renewal failed ({exc})")

    async def release(self) -> None:
        """Let go of the prefix's lease at the end of the run, when S3 answered last."""
        if self.ready and self.s3_ok and self.lease.held:
            await asyncio.to_thread(self.lease.release)

    async def _publish(self) -> None:
        await self._retrying("manifest write", self.keeper.publish, self.s3)
        self._dirty = False

    async def _retrying(self, what: str, call: Callable[..., T], *args: object) -> T:
        """``call`` in a thread until it succeeds, with this job's lease fresh (renewed first
        when it may have run out).

        Raises:
            _Stopped: a permanent error (a lease lost, another job's manifest) stopped the job.
        """
        delay = 0.5
        while True:
            try:
                if not self.lease.fresh():
                    await asyncio.to_thread(self.lease.renew)
                result = await asyncio.to_thread(call, *args)
                self.s3_ok = True
                return result
            except S3Error as exc:
                if not isinstance(exc, S3Unreachable):
                    self._fatal(str(exc), False)
                    raise _Stopped from None
                self._notify(f"{what} failed ({exc}); retrying in {delay:g}s")
            except Exception as exc:  # any S3 failure: keep the shard, back off, retry
                self.s3_ok = False
                self._notify(f"{what} failed ({exc}); retrying in {delay:g}s")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)

    async def drain(self, stopping: Callable[[], bool]) -> None:
        """Wait for every upload, then check the bucket agrees; repeat until it does.

        The check is one manifest GET and the object listing; a manifest left stale (an outage,
        another writer) is rewritten from this run's entries, missing objects re-uploaded.
        """
        delay = 0.5
        while not stopping():
            # Polled: uploads take seconds, and a stop must be able to interrupt the wait.
            while not stopping() and (self._queued or not self.ready):
                await asyncio.sleep(0.05)
            if stopping():
                return
            try:
                missing = await asyncio.to_thread(self._reconcile, ())
            except S3Error as exc:  # another job's manifest now: stop, never retry for ever
                if not isinstance(exc, S3Unreachable):
                    self._fatal(str(exc), False)
                    return
                self._notify(f"final S3 check failed ({exc}); retrying in {delay:g}s")
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            except Exception as exc:  # S3 unreachable at the end: keep trying
                self._notify(f"final S3 check failed ({exc}); retrying in {delay:g}s")
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            if missing:
                for number in missing:
                    self._enqueue(number)
                continue
            if not self._dirty:
                await self._confirm_lease()
                return
            try:
                await self._publish()
            except _Stopped:
                return
