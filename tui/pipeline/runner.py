"""One run of the generation pipeline: resume, dispatch, durable shards, uploads, status.

Order of events per shard: results collect in memory; a full buffer (or one older than
``flush_interval_s``) becomes the next numbered shard, written and committed to the done record
by one writer task in a thread; committed shards queue for upload; after each upload the manifest
is rewritten. A kill at any moment loses only the in-memory buffer and requests in flight.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tui.pipeline.dispatch import Dispatcher
from tui.pipeline.done_record import DoneRecord
from tui.pipeline.prompts import PromptFile
from tui.pipeline.rates import RateMeter
from tui.pipeline.s3_sink import ManifestEntry, S3Error, S3Sink
from tui.pipeline.shards import ShardStore
from tui.pipeline.status import SCHEMA_VERSION, PipelineStatus, ServerShare, write_status

EXIT_DONE = 0
EXIT_FAILED_RUN = 1
EXIT_BAD_INPUT = 2
EXIT_SOME_FAILED = 3
EXIT_STOPPED = 143


@dataclass(frozen=True, slots=True)
class GenerateConfig:
    """Everything one run needs (built by the command line)."""

    prompts: PromptFile
    """The opened, validated prompt file."""
    out_dir: Path
    """Local output directory (shards, done record, failures)."""
    servers: tuple[str, ...]
    """Base URLs of the OpenAI-compatible servers."""
    status_path: Path
    """Where the status document is written."""
    s3: S3Sink | None = None
    """Upload target, or None for local output only."""
    per_server_inflight: int = 48
    """Most requests in flight per server."""
    shard_size: int = 1000
    """Records per shard."""
    max_tokens: int = 2048
    """Completion length limit per request."""
    model: str = "default"
    """Model name sent in each request."""
    max_retries: int = 3
    """Retries of one prompt after errors that may be its own, before it is recorded failed."""
    fleet_timeout_s: float = 60.0
    """How long to wait at start for any server to answer /health."""
    request_timeout_s: float = 600.0
    """Read timeout of one request."""
    flush_interval_s: float = 60.0
    """A partial shard older than this is written anyway, bounding what a kill can lose."""


def _log(message: str) -> None:
    print(f"gpufleet generate: {message}", file=sys.stderr, flush=True)


class Pipeline:
    """Runs one generation job to completion, to a graceful stop, or to a clear failure."""

    def __init__(self, config: GenerateConfig) -> None:
        """Args: config: the run's settings."""
        self.config = config
        self._store = ShardStore(config.out_dir)
        self._done = DoneRecord.load(self._store.done_path)
        self._meter = RateMeter()
        self._dispatcher = Dispatcher(
            list(config.servers),
            config.prompts,
            per_server_inflight=config.per_server_inflight,
            model=config.model,
            max_tokens=config.max_tokens,
            max_retries=config.max_retries,
            on_result=self._on_result,
            on_failed=self._on_failed,
            request_timeout=config.request_timeout_s,
        )
        self._buffer: list[bytes] = []
        self._buffer_indices: list[int] = []
        self._buffer_since = 0.0
        self._unwritten: set[int] = set()
        self._next_shard = 1
        self._write_queue: asyncio.Queue[tuple[int, list[int], list[bytes]]] = asyncio.Queue()
        self._upload_queue: asyncio.Queue[int] = asyncio.Queue()
        self._upload_pending = 0
        self._manifest: dict[str, ManifestEntry] = {}
        self._failed = 0
        self._state = "running"
        self._message = ""
        self._started_at = time.time()
        self._stopping = False

    async def run(self) -> int:
        """Run the job; returns the process exit status."""
        try:
            return await self._run()
        finally:
            await self._dispatcher.aclose()
            self.config.prompts.close()

    async def _run(self) -> int:
        config = self.config
        found = self._store.reconcile(self._done)
        if found.removed_temporary or found.removed_uncommitted:
            _log(
                f"resume: removed {len(found.removed_temporary)} partial and "
                f"{len(found.removed_uncommitted)} uncommitted shard file(s); redoing them"
            )
        self._next_shard = self._store.next_number(self._done)
        if config.s3 is not None:
            try:
                await asyncio.to_thread(config.s3.check_bucket)
                uploads = await asyncio.to_thread(
                    self._reconcile_s3, config.s3, found.missing_committed
                )
            except S3Error as exc:
                self._fail(str(exc), EXIT_BAD_INPUT)
                self._write_status()
                _log(str(exc))
                return EXIT_BAD_INPUT
            for number in uploads:
                self._queue_upload(number)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        todo = self._todo_count()
        _log(f"{len(self._done)} done, {todo} to generate, {self._upload_pending} to upload")
        workers = [
            asyncio.create_task(self._writer()),
            asyncio.create_task(self._uploader()),
            asyncio.create_task(self._status_loop()),
        ]
        try:
            if todo:
                self._dispatcher.start_probes()
                if not await self._dispatcher.wait_any_healthy(config.fleet_timeout_s):
                    detail = "; ".join(f"{s.url}: {s.last_error}" for s in self._dispatcher.servers)
                    return self._fail(
                        f"no server answered GET /health with 200 within "
                        f"{config.fleet_timeout_s:g}s ({detail})",
                        EXIT_FAILED_RUN,
                    )
                workers.append(asyncio.create_task(self._flush_timer()))
                await self._dispatcher.run(self._pending(), todo)
            self._flush()
            await self._write_queue.join()
            if self._stopping:
                self._state = "stopped"
                self._message = "stopped by signal; durable shards kept, resume to continue"
                return EXIT_STOPPED
            await self._drain_uploads()
            if self._stopping:
                self._state = "stopped"
                return EXIT_STOPPED
            self._state = "finished"
            if self._failed:
                self._message = f"{self._failed} prompt(s) failed; see {self._store.failures_path}"
                return EXIT_SOME_FAILED
            self._message = "all prompts done" + (" and uploaded" if config.s3 else "")
            return EXIT_DONE
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            self._write_status()
            _log(f"{self._state}: {self._message}")

    def stop(self) -> None:
        """Stop gracefully: no new requests, completed results made durable, status 'stopped'."""
        if not self._stopping:
            self._stopping = True
            self._dispatcher.stop()

    def _fail(self, message: str, code: int) -> int:
        self._state = "failed"
        self._message = message
        return code

    def _todo_count(self) -> int:
        prompts, done = self.config.prompts, self._done
        return sum(1 for i in range(len(prompts)) if prompts.is_valid(i) and i not in done)

    def _pending(self) -> Iterator[int]:
        prompts, done = self.config.prompts, self._done
        return (i for i in range(len(prompts)) if prompts.is_valid(i) and i not in done)

    def _reconcile_s3(self, s3: S3Sink, missing_local: tuple[int, ...]) -> list[int]:
        """Committed local shards the bucket lacks (not in the manifest, or object gone)."""
        self._manifest = s3.load_manifest()
        objects = s3.list_shard_keys()
        local = self._store.local_shards()
        uploads = []
        for number in sorted(self._done.shards):
            name = self._store.path(number).name
            entry = self._manifest.get(name)
            if entry is not None and objects.get(entry.key) == entry.bytes:
                continue
            if number in local:
                self._manifest.pop(name, None)
                uploads.append(number)
            elif entry is not None:
                _log(f"warning: {entry.key} is in the manifest, missing in S3 and locally")
        if missing_local:
            _log(f"warning: committed shards missing locally: {list(missing_local)[:10]}")
        return uploads

    def _on_result(self, index: int, line: bytes, tokens: int) -> None:
        if index in self._done or index in self._unwritten:
            return  # defensive: never let one index reach the output twice
        if not self._buffer:
            self._buffer_since = time.monotonic()
        self._buffer.append(line)
        self._buffer_indices.append(index)
        self._unwritten.add(index)
        self._meter.record(tokens)
        if len(self._buffer) >= self.config.shard_size:
            self._flush()

    def _on_failed(self, index: int, reason: str, attempts: int) -> None:
        self._failed += 1
        self._message = f"prompt {index} failed after {attempts} attempt(s): {reason}"
        record = {"index": index, "reason": reason, "attempts": attempts, "at": time.time()}
        with open(self._store.failures_path, "a") as handle:
            handle.write(json.dumps(record) + "\n")

    def _flush(self) -> None:
        if not self._buffer:
            return
        number = self._next_shard
        self._next_shard += 1
        self._write_queue.put_nowait((number, self._buffer_indices, self._buffer))
        self._buffer, self._buffer_indices = [], []

    async def _flush_timer(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            age = time.monotonic() - self._buffer_since
            if self._buffer and age >= self.config.flush_interval_s:
                self._flush()

    async def _writer(self) -> None:
        while True:
            number, indices, lines = await self._write_queue.get()
            try:
                await asyncio.to_thread(self._store.commit, self._done, number, indices, lines)
                self._unwritten.difference_update(indices)
                if self.config.s3 is not None:
                    self._queue_upload(number)
            finally:
                self._write_queue.task_done()

    async def _uploader(self) -> None:
        s3 = self.config.s3
        if s3 is None:
            return
        while True:
            number = await self._upload_queue.get()
            path = self._store.path(number)
            delay = 0.5
            while True:
                try:
                    entry = await asyncio.to_thread(s3.upload, path)
                    self._manifest[entry.name] = entry
                    await asyncio.to_thread(s3.save_manifest, dict(self._manifest))
                    break
                except Exception as exc:  # any S3 failure: keep the shard, back off, retry
                    self._message = f"upload of {path.name} failed ({exc}); retrying in {delay:g}s"
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 10.0)
            self._upload_pending -= 1

    async def _drain_uploads(self) -> None:
        """Wait for every upload, then check the bucket agrees; repeat until it does.

        The final check re-reads the manifest and the object list, so a manifest that an outage
        or a concurrent writer left stale is repaired before the run reports success.
        """
        s3 = self.config.s3
        if s3 is None:
            return
        delay = 0.5
        while not self._stopping:
            # Polled: uploads take seconds, and a stop must be able to interrupt the wait.
            while not self._stopping and self._upload_pending:
                await asyncio.sleep(0.05)
            if self._stopping:
                return
            try:
                missing = await asyncio.to_thread(self._reconcile_s3, s3, ())
            except Exception as exc:  # S3 unreachable at the end: keep trying
                self._message = f"final S3 check failed ({exc}); retrying in {delay:g}s"
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            if not missing:
                return
            for number in missing:
                self._queue_upload(number)

    def _queue_upload(self, number: int) -> None:
        self._upload_pending += 1
        self._upload_queue.put_nowait(number)

    async def _status_loop(self) -> None:
        while True:
            self._write_status()
            await asyncio.sleep(1.0)

    def _write_status(self) -> None:
        rate_1m, rate_10m = self._meter.rate(60), self._meter.rate(600)
        total = self.config.prompts.valid_count
        remaining = max(total - len(self._done) - self._failed, 0)
        recent = rate_1m.requests_per_s or rate_10m.requests_per_s
        status = PipelineStatus(
            schema=SCHEMA_VERSION,
            state=self._state,
            pid=os.getpid(),
            started_at=self._started_at,
            updated_at=time.time(),
            total=total,
            done=len(self._done),
            failed=self._failed,
            in_flight=self._dispatcher.in_flight,
            rate_1m=rate_1m,
            rate_10m=rate_10m,
            eta_s=remaining / recent if recent > 0 else (0.0 if remaining == 0 else None),
            servers=tuple(
                ServerShare(s.url, s.done, s.failed, s.in_flight, s.healthy, s.output_tokens)
                for s in self._dispatcher.servers
            ),
            uploaded_shards=len(self._manifest),
            pending_uploads=self._upload_pending,
            message=self._message,
        )
        try:
            write_status(self.config.status_path, status)
        except OSError as exc:
            _log(f"cannot write status {self.config.status_path}: {exc}")
