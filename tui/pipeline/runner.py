"""One run of the generation pipeline: resume, dispatch, durable shards, uploads, status.

At start the output directory is locked and the prompts file matched to the job's ids
(``tui.pipeline.job``); a refusal there exits 2 and writes nothing, not even the status document
(another pipeline may own it). Order of events per shard: results collect in memory; a full
buffer (or one older than ``flush_interval_s``) becomes the next numbered shard, written and
committed to the done record by one writer task in a thread; committed shards queue for upload;
after each upload the manifest is rewritten. A kill at any moment loses only the in-memory
buffer and requests in flight. Failure records take the same writer (appended whole, fsynced,
then counted: ``tui.pipeline.failures``).

A write that fails (a full disk, a quota) stops the job cleanly: nothing more is written or
sent, the status document says ``failed: no space left on PATH``, one line says so on stderr and
the exit status is 1; what was committed stays, and a resume goes on from it. So does a prompts
file rewritten while the job runs (checked every second, and whenever a prompt read back is not
the one scanned): nothing is recorded as failed for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx

from tui.gpu.source import open_gpu_source
from tui.outputs import WriteFailed
from tui.pipeline.batch_output import error_record, output_record
from tui.pipeline.dispatch import CORDON_RECHECK_S, Answer, Dispatcher, server_address
from tui.pipeline.energy import SAMPLE_S, JobEnergy, JobMeter, ledger_path
from tui.pipeline.job import Job, JobRefused, open_job
from tui.pipeline.prompts import PromptFileError
from tui.pipeline.rates import RateMeter, eta_seconds
from tui.pipeline.run_config import GenerateConfig
from tui.pipeline.status import SCHEMA_VERSION, PipelineStatus, ServerShare, write_status
from tui.pipeline.writer import OutputWriter
from tui.state.cordon_acks import AckWriter

if TYPE_CHECKING:  # boto3 is imported only by runs that upload (it costs 0.1 s at start)
    from tui.pipeline.uploads import Uploads

__all__ = ["GenerateConfig", "Pipeline"]  # GenerateConfig: where bench_dispatch imports it

EXIT_DONE = 0
EXIT_FAILED_RUN = 1
EXIT_BAD_INPUT = 2
EXIT_SOME_FAILED = 3
EXIT_STOPPED = 143


def _log(message: str) -> None:
    print(f"gpufleet generate: {message}", file=sys.stderr, flush=True)


class Pipeline:
    """Runs one generation job to completion, to a graceful stop, or to a clear failure."""

    def __init__(self, config: GenerateConfig) -> None:
        """Args: config: the run's settings."""
        self.config = config
        self._meter = RateMeter()
        routed = config.router is not None
        self._dispatcher = Dispatcher(
            [config.router] if config.router is not None else list(config.servers),
            config.prompts,
            # Through a router, one "server" carries every worker's share (updated as workers
            # come and go, see _sync_router).
            per_server_inflight=config.per_server_inflight
            * (max(1, len(config.servers)) if routed else 1),
            gateway=routed,
            model=config.model,
            max_tokens=config.max_tokens,
            max_retries=config.max_retries,
            on_result=self._on_result,
            on_failed=self._on_failed,
            on_input_changed=self._input_changed,
            request_timeout=config.request_timeout_s,
        )
        self._buffer: list[bytes] = []
        self._buffer_indices: list[int] = []
        self._buffer_since = 0.0
        self._unwritten: set[int] = set()
        self._next_shard = 1
        self._writer: OutputWriter | None = None
        self._uploads: Uploads | None = None
        self._job: Job | None = None
        self._done_in_file = 0
        self._cordon_error: str | None = None
        self._fatal: tuple[str, int] | None = None
        self._state = "running"
        self._message = ""
        self._started_at = time.time()
        self._no_server_since: float | None = None
        self._stopping = False
        self._status_problem = ""

    async def run(self) -> int:
        """Run the job; returns the process exit status."""
        try:
            try:
                self._job = open_job(
                    self.config.out_dir, self.config.prompts, by_id=self.config.by_id
                )
            except JobRefused as exc:
                _log(str(exc))
                return EXIT_BAD_INPUT
            try:
                return await self._run(self._job)
            finally:
                self._job.failures.close()
                self._job.lock.release()
        finally:
            await self._dispatcher.aclose()
            self.config.prompts.close()

    async def _run(self, job: Job) -> int:
        config = self.config
        for note in job.notes:
            _log(note)
        self._store, self._done, self._done_in_file = job.store, job.done, job.done_in_file
        self._writer = writer = OutputWriter(
            job.store,
            job.done,
            job.failures,
            on_committed=self._committed,
            on_broken=self._write_failed,
        )
        if config.s3 is not None:
            from tui.pipeline.uploads import Uploads

            self._uploads = Uploads(
                config.s3,
                self._store,
                self._done,
                job_id=job.job_id,
                wait_s=config.s3_wait_s,
                notify=self._notify,
                fatal=self._s3_fatal,
                lease_ttl_s=config.s3_lease_ttl_s,
            )
        found = self._store.reconcile(self._done)
        if found.removed_temporary or found.removed_uncommitted:
            _log(
                f"resume: removed {len(found.removed_temporary)} partial and "
                f"{len(found.removed_uncommitted)} uncommitted shard file(s); redoing them"
            )
        self._next_shard = self._store.next_number(self._done)
        workers: list[asyncio.Task[None]] = []
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):  # before anything that can take time
            loop.add_signal_handler(sig, self.stop)
        if self._uploads is not None:
            from tui.pipeline.s3_sink import S3Error

            try:
                retrying = await self._uploads.connect(found.missing_committed)
            except S3Error as exc:
                self._fail(str(exc), EXIT_BAD_INPUT)
                self._write_status()
                _log(str(exc))
                return EXIT_BAD_INPUT
            workers.append(asyncio.create_task(self._uploads.run()))
            workers.append(asyncio.create_task(self._uploads.keep_lease()))
            if retrying is not None:
                workers.append(retrying)
        todo = len(config.prompts) - self._done_in_file
        pending = self._uploads.pending if self._uploads is not None else 0
        _log(f"{self._done_in_file} done, {todo} to generate, {pending} to upload")
        workers += [
            asyncio.create_task(writer.run()),
            asyncio.create_task(self._status_loop()),
            asyncio.create_task(self._energy_loop(job.job_id)),
        ]
        # A stop waits for this job to say it sends nothing new to the server it cordoned.
        acks = AckWriter((server_address(u) for u in config.servers), "gpufleet generate")
        if config.router is not None:
            workers.append(asyncio.create_task(self._sync_router(config.router, acks)))
        else:
            workers.append(asyncio.create_task(self._watch_cordons(acks)))
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
            await writer.join()
            if self._fatal is None and not self._stopping and self._uploads is not None:
                await self._uploads.drain(lambda: self._stopping)
            if self._fatal is not None:
                return self._fail(*self._fatal)
            if self._stopping:  # a signal (a failure sets _fatal first)
                self._state = "stopped"
                self._message = "stopped by signal; durable shards kept, resume to continue"
                return EXIT_STOPPED
            self._state = "finished"
            if writer.failed:
                self._message = f"{writer.failed} prompt(s) failed; see {self._store.failures_path}"
                return EXIT_SOME_FAILED
            self._message = "all prompts done" + (" and uploaded" if config.s3 else "")
            return EXIT_DONE
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            acks.close()
            if self._uploads is not None:
                await self._uploads.release()
            self._write_status()
            _log(f"{self._state}: {self._message}")

    async def _watch_cordons(self, acks: AckWriter) -> None:
        """Read the cordons a few times a second, and say which servers get nothing new: the
        dispatcher reads them before each dispatch, but not while every server is busy."""
        self._dispatcher.on_closed = acks.acknowledge
        while True:
            self._dispatcher.refresh_cordons()
            await asyncio.sleep(CORDON_RECHECK_S)

    async def _sync_router(self, router: str, acks: AckWriter) -> None:
        """Keep the router's workers equal to the fleet's ready servers (until cancelled)."""
        from tui.pipeline.router import WorkerSync, agents_source, servers_source

        config = self.config
        routed = self._dispatcher.servers[0]

        def capacity(count: int) -> None:
            routed.capacity = config.per_server_inflight * max(1, count)

        async with httpx.AsyncClient() as client:
            source = (
                agents_source(config.router_agents, config.agent_token, client)
                if config.router_agents
                else servers_source(list(config.servers), client)
            )
            workers = {server_address(u) for u in config.servers}

            def synced(routed: frozenset[str]) -> None:
                # Through the router, a server gets nothing new once it is off its list.
                acks.acknowledge(workers - {server_address(u) for u in routed})

            await WorkerSync(router.rstrip("/"), source, client, capacity, synced).run()

    def stop(self) -> None:
        """Stop gracefully: no new requests, completed results made durable, status 'stopped'."""
        if not self._stopping:
            self._stopping = True
            self._dispatcher.stop()

    def _notify(self, message: str) -> None:
        self._message = message

    def _s3_fatal(self, message: str, bad_input: bool) -> None:
        """S3 cannot be used after all (found once it answered, or never answered): stop. The
        first cause is the one told (a lease lost makes the uploads fail next), in the run's
        last line."""
        if self._fatal is None:
            self._fatal = (message, EXIT_BAD_INPUT if bad_input else EXIT_FAILED_RUN)
        self.stop()

    def _fail(self, message: str, code: int) -> int:
        self._state = "failed"
        self._message = message
        return code

    def _serial_of(self, position: int) -> int:
        assert self._job is not None
        return self._job.index.serial_of(position)

    def _pending(self) -> Iterator[int]:
        done, serial_of = self._done, self._serial_of
        return (p for p in range(len(self.config.prompts)) if serial_of(p) not in done)

    def _on_result(self, answer: Answer) -> int:
        serial = self._serial_of(answer.position)
        line, tokens = output_record(
            answer.prompt, serial, answer.content, answer.server, answer.started_at, answer.latency
        )
        if serial in self._done or serial in self._unwritten:
            return tokens  # defensive: never let one id reach the output twice
        if not self._buffer:
            self._buffer_since = time.monotonic()
        self._buffer.append(line)
        self._buffer_indices.append(serial)
        self._unwritten.add(serial)
        self._meter.record(tokens)
        if len(self._buffer) >= self.config.shard_size:
            self._flush()
        return tokens

    def _on_failed(self, position: int, reason: str, attempts: int) -> None:
        try:
            custom_id = self.config.prompts.read(position).custom_id
        except PromptFileError as exc:
            self._input_changed(str(exc))  # not the prompt's failure: the file's change
            return
        self._message = f"prompt {custom_id!r} failed after {attempts} attempt(s): {reason}"
        record = error_record(custom_id, self._serial_of(position), reason, attempts)
        assert self._writer is not None
        self._writer.failure(record)  # written with the next flush, then counted

    def _input_changed(self, problem: str) -> None:
        """The prompts file changed under the run: stop, recording nothing as failed."""
        if self._fatal is None:
            self._fatal = (
                f"{problem}: stopped; the done outputs are kept (run again to resume, with "
                "--resume-by-id if its ids changed)",
                EXIT_FAILED_RUN,
            )
        self.stop()

    def _write_failed(self, exc: Exception) -> None:
        """A write failed: stop the job; nothing more is written (the first failure is told)."""
        if self._fatal is None:
            what = str(exc) if isinstance(exc, WriteFailed) else f"{type(exc).__name__}: {exc}"
            self._fatal = (
                f"{what}; the committed shards are kept: run again to resume once it can be "
                "written",
                EXIT_FAILED_RUN,
            )
        self.stop()

    def _flush(self) -> None:
        assert self._writer is not None
        if not self._buffer:
            self._writer.flush_failures()
            return
        number = self._next_shard
        self._next_shard += 1
        self._writer.shard(number, self._buffer_indices, self._buffer)
        self._buffer, self._buffer_indices = [], []

    async def _flush_timer(self) -> None:
        assert self._writer is not None
        while True:
            await asyncio.sleep(1.0)
            age = time.monotonic() - self._buffer_since
            if self._buffer and age >= self.config.flush_interval_s:
                self._flush()
            self._writer.flush_failures()

    def _committed(self, number: int, indices: list[int]) -> None:
        self._unwritten.difference_update(indices)
        self._done_in_file += len(indices)
        if self._uploads is not None:
            self._uploads.committed(number)

    async def _energy_loop(self, job: str) -> None:
        """Meter the node's GPUs while the job runs, into the ledger beside the status document
        (``tui.pipeline.energy``); a last sample when the run ends. A ledger that cannot be
        written stops the metering, said once, never the job."""
        source = await asyncio.to_thread(open_gpu_source)
        if source.kind == "none":
            return
        meter = JobMeter(ledger_path(self.config.status_path), job, source)

        def tokens() -> int:
            return sum(s.output_tokens for s in self._dispatcher.servers)

        pending: asyncio.Future[JobEnergy] | None = None
        try:
            while True:
                current = asyncio.ensure_future(asyncio.to_thread(meter.sample, tokens()))
                pending = current
                await asyncio.shield(current)
                await asyncio.sleep(SAMPLE_S)
        except OSError as exc:
            _log(f"cannot write the energy ledger {meter.path}: {exc}; energy not metered")
        finally:
            with contextlib.suppress(Exception):  # the sample in flight, then the last one
                if pending is not None:
                    await pending
                await asyncio.to_thread(meter.sample, tokens())
            await asyncio.to_thread(source.close)

    async def _status_loop(self) -> None:
        while True:
            changed = self.config.prompts.changed()
            if changed is not None:
                self._input_changed(changed)
            self._write_status()
            await asyncio.sleep(1.0)

    def _write_status(self) -> None:
        rate_1m, rate_10m = self._meter.rate(60), self._meter.rate(600)
        # Observed at the status cadence: a whole-fleet outage lasts seconds at least (a relaunch).
        if self._dispatcher.any_healthy:
            self._no_server_since = None
        elif self._no_server_since is None:
            self._no_server_since = time.time()
        self._dispatcher.refresh_cordons()
        error = self._dispatcher.cordons.error
        if error is not None and error != self._cordon_error:
            self._message = f"cordon file unreadable, keeping the last cordons read: {error}"
        self._cordon_error = error
        total = self.config.prompts.valid_count
        failed = self._writer.failed if self._writer is not None else 0
        remaining = max(total - self._done_in_file - failed, 0)
        status = PipelineStatus(
            schema=SCHEMA_VERSION,
            state=self._state,
            pid=os.getpid(),
            started_at=self._started_at,
            updated_at=time.time(),
            total=total,
            done=self._done_in_file,
            failed=failed,
            in_flight=self._dispatcher.in_flight,
            rate_1m=rate_1m,
            rate_10m=rate_10m,
            eta_s=eta_seconds(remaining, rate_1m, rate_10m),
            servers=tuple(
                ServerShare(
                    s.url, s.done, s.failed, s.in_flight, s.healthy, s.output_tokens, s.cordoned
                )
                for s in self._dispatcher.servers
            ),
            uploaded_shards=len(self._uploads.keeper.entries) if self._uploads else 0,
            pending_uploads=self._uploads.pending if self._uploads else 0,
            message=self._message,
            no_server_since=self._no_server_since if self._state == "running" else None,
        )
        try:
            write_status(self.config.status_path, status)
        except OSError as exc:
            problem = f"status document not written: {exc}"
            if problem != self._status_problem:  # once, not every second
                _log(problem)
            self._status_problem = problem
        else:
            self._status_problem = ""
