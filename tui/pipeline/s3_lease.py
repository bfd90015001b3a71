"""One job per S3 prefix: a lease object, taken with a conditional write and renewed while the job
runs.

Two jobs on one prefix number their shards from 1 each and overwrite each other's objects: the red
team's second job exited 0 ``all prompts done and uploaded`` while ``shard-000001.jsonl`` held the
first job's records. The manifest's job id catches that only once a manifest exists; two jobs
started together both found none. So a job holds ``PREFIX/lease.json`` before it uploads:

* it is taken with ``If-None-Match: *`` (no lease yet) or ``If-Match`` the ETag of the lease it
  found free: of two jobs taking it at once, the store lets one write and refuses the other, which
  then reads who holds it and is refused naming that job (its job id, host, pid, start);
* it says when it expires, on the **store's** clock (its ``Date`` header: hosts' clocks may
  differ, the store's is the one both jobs read), ``ttl`` after each renewal; the holder renews
  it every quarter of that, each renewal conditional on the ETag it wrote last, and uploads
  nothing while its lease may have run out (``fresh``);
* a lease is free when it was released (a job that ended lets go of it), when it expired, or when
  its holder ran on this host and is gone (its pid no longer runs with its start ticks in this
  boot: a SIGKILLed run resumed at once need not wait for the expiry); taking over one that was not
  released is said in one line;
* a renewal that finds another job's lease (ours ran out while the store could not be reached,
  and another job took the prefix) stops this job: it must not upload over the other's shards.

Every method blocks (boto3); the pipeline runs them in a thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any

from tui.pipeline.s3_sink import NoConditionalWrites, ObjectChanged, S3Error, S3Sink
from tui.servers.procinfo import boot_id, start_ticks

_TAKE_TRIES = 4


class LeaseHeld(S3Error):
    """Another job holds the prefix (the message names it)."""


class LeaseLost(S3Error):
    """This job's lease was taken by another job (the message names it): it must stop."""


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    """What a lease object says about its job."""

    job_id: str
    """The job (``tui.pipeline.job_id``)."""
    run_id: str
    """The run of that job holding it."""
    host: str
    """Where it runs."""
    pid: int
    """Its process id there."""
    boot_id: str
    """That host's boot (with the start ticks: the process, whatever the clock did)."""
    start_ticks: int
    """Its start in clock ticks since boot."""
    started_at: float
    """When it took the lease (its own clock, for display)."""
    renewed_at: float
    """Its last renewal, on the store's clock."""
    expires_at: float
    """When the lease runs out unless renewed, on the store's clock."""
    released: bool = False
    """The job ended and let go of it."""

    @classmethod
    def from_json(cls, raw: bytes) -> LeaseHolder:
        """Parse a lease object; raises ValueError when it is not one."""
        try:
            data: dict[str, Any] = json.loads(raw)
            return cls(
                str(data["job_id"]),
                str(data["run_id"]),
                str(data["host"]),
                int(data["pid"]),
                str(data["boot_id"]),
                int(data["start_ticks"]),
                float(data["started_at"]),
                float(data["renewed_at"]),
                float(data["expires_at"]),
                bool(data.get("released", False)),
            )
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"not a gpufleet lease ({exc})") from None

    def describe(self) -> str:
        """'job 1a2b3c4d5e6f (pid 4242 on host gpu-7, started 2026-05-09 12:00:03)'."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_at))
        return f"job {self.job_id[:12]} (pid {self.pid} on host {self.host}, started {when})"

    def gone_from_this_host(self) -> bool:
        """Whether it ran on this host and no longer runs (another boot, or its pid is another
        process or none)."""
        if self.host != socket.gethostname():
            return False
        return self.boot_id != boot_id() or start_ticks(self.pid) != self.start_ticks


class S3Lease:
    """This job's hold on one prefix."""

    def __init__(self, s3: S3Sink, job_id: str, run_id: str, ttl_s: float) -> None:
        """Args: the prefix's sink, this job's id and run id, how long the lease lasts after
        each renewal (``--s3-lease-ttl``)."""
        self.s3 = s3
        """The bucket and prefix."""
        self.ttl_s = ttl_s
        """How long the lease lasts after each renewal."""
        self.enforced = True
        """False when the store has no conditional writes: nothing is held (said once)."""
        self._job_id = job_id
        self._run_id = run_id
        self._etag: str | None = None
        self._started = time.time()
        self._renewed_mono = 0.0
        self._clock_offset = 0.0

    @property
    def held(self) -> bool:
        """Whether this job holds the lease (or the store cannot enforce one)."""
        return self._etag is not None or not self.enforced

    @property
    def renew_every_s(self) -> float:
        """How often the holder renews it."""
        return self.ttl_s / 4

    def fresh(self) -> bool:
        """Whether the lease is surely still this job's: renewed within half its length (the
        other half is the margin for a renewal that is slow to answer)."""
        if not self.enforced:
            return True
        return self._etag is not None and time.monotonic() - self._renewed_mono < self.ttl_s / 2

    def acquire(self) -> str:
        """Take the lease.

        Returns:
            A line to tell the user when a lease left by another run was taken over ("" else).

        Raises:
            LeaseHeld: another job holds it (naming it), or it is not a gpufleet lease.
            Exception: boto3's errors when S3 fails (the caller retries).
        """
        for _ in range(_TAKE_TRIES):
            found, now = self.s3.read_object(self.s3.lease_key)
            self._clock_offset = now - time.time()
            if found is None:
                if self._write(None):
                    return ""
                continue
            try:
                holder = LeaseHolder.from_json(found.body)
            except ValueError as exc:
                raise LeaseHeld(
                    f"{self._where()}: {exc}; delete it if no job uses --s3-prefix={self.s3.prefix}"
                ) from None
            if holder.run_id == self._run_id:  # our own write, seen again
                self._etag, self._renewed_mono = found.etag, time.monotonic()
                return ""
            why = _free(holder, now)
            if why is None:
                left = holder.expires_at - now
                raise LeaseHeld(
                    f"--s3-prefix={self.s3.prefix}: held by {holder.describe()}, renewed "
                    f"{max(0.0, now - holder.renewed_at):.0f} s ago (expires in {left:.0f} s "
                    f"unless renewed): one job per prefix; give this job its own --s3-prefix"
                )
            if self._write(found.etag):
                if holder.released:
                    return ""
                return f"took over the S3 lease of {holder.describe()}: {why}"
        raise LeaseHeld(f"{self._where()}: changed {_TAKE_TRIES} times while taking it")

    def renew(self) -> None:
        """Renew the lease (conditional on the ETag this job wrote last).

        Raises:
            LeaseLost: another job holds it now (naming it): this job must stop uploading.
            Exception: boto3's errors when S3 fails (try again at the next renewal).
        """
        if not self.enforced:
            return
        if self._etag is None:
            raise LeaseLost(f"{self._where()}: this job does not hold it")
        if self._write(self._etag):
            return
        found, _ = self.s3.read_object(self.s3.lease_key)
        taker = "nobody (it is gone)"
        if found is not None:
            try:
                holder = LeaseHolder.from_json(found.body)
            except ValueError as exc:
                taker = str(exc)
            else:
                if holder.run_id == self._run_id:  # our own write landed after all
                    self._etag, self._renewed_mono = found.etag, time.monotonic()
                    return
                taker = holder.describe()
        self._etag = None
        raise LeaseLost(
            f"{self._where()}: taken by {taker} while this job could not renew it: stopped "
            "(its shards in S3 may be the other job's now; give each job its own --s3-prefix)"
        )

    def release(self) -> None:
        """Let go of the lease (best effort: it expires anyway)."""
        if self._etag is None or not self.enforced:
            return
        with contextlib.suppress(Exception):  # an unreleased lease expires: the end goes on
            self._write(self._etag, released=True)
        self._etag = None

    def _where(self) -> str:
        return f"s3://{self.s3.bucket}/{self.s3.lease_key}"

    def _write(self, expect: str | None, *, released: bool = False) -> bool:
        """Write this job's lease if the object is still ``expect``; False when it is not."""
        now = time.time() + self._clock_offset
        holder = LeaseHolder(
            self._job_id,
            self._run_id,
            socket.gethostname(),
            os.getpid(),
            boot_id(),
            start_ticks(os.getpid()) or 0,
            self._started,
            now,
            now + self.ttl_s,
            released,
        )
        body = json.dumps({"schema": 1, **asdict(holder)}, indent=1).encode()
        try:
            etag, server = self.s3.put_if(self.s3.lease_key, body, expect)
        except ObjectChanged:
            return False
        except NoConditionalWrites:
            self.enforced = False
            return True
        self._clock_offset = server - time.time()
        self._etag, self._renewed_mono = etag, time.monotonic()
        return True


def _free(holder: LeaseHolder, now: float) -> str | None:
    """Why ``holder``'s lease may be taken (None: it is held)."""
    if holder.released:
        return "it was released"
    if now > holder.expires_at:
        return f"it expired {now - holder.expires_at:.0f} s ago"
    if holder.gone_from_this_host():
        return f"its pid {holder.pid} on this host is not running"
    return None
