"""The run's view of the bucket manifest: its entries, generation and ETag, and how to publish it.

One keeper per run. Publishing is a conditional write (see ``tui.pipeline.s3_sink``): when the
bucket holds a manifest the keeper does not know, the write fails, the keeper re-reads it, keeps
every entry of both (shard names are never reused for other content: a shard is uploaded only
once committed, and committed numbers are never reissued) and writes again with a higher
generation. So a stale manifest never replaces a newer one, and no entry is lost to a race.
Every method blocks (boto3); callers run them in a thread, one at a time.
"""

from __future__ import annotations

import uuid

from tui.pipeline.s3_sink import Manifest, ManifestConflict, ManifestEntry, S3Error, S3Sink

_CONFLICT_RETRIES = 8


class ManifestKeeper:
    """Entries this run believes are uploaded, plus the generation/ETag it last saw."""

    def __init__(self, job_id: str = "") -> None:
        """Start empty; :meth:`adopt` the bucket's manifest before publishing.

        Args:
            job_id: The job's id (``tui.pipeline.job_id``), written into each manifest.
        """
        self.job_id = job_id
        """The job whose outputs the manifest lists."""
        self.entries: dict[str, ManifestEntry] = {}
        """Uploaded shards by name."""
        self.generation = 0
        """Generation of the manifest last read or written."""
        self.etag: str | None = None
        """ETag of the manifest last read or written (None: none in the bucket)."""
        self.run_id = uuid.uuid4().hex
        """This run's identity, written into each manifest."""
        self.writes = 0
        """Manifest writes made (for tests and cost reports)."""

    def check_owner(self, s3: S3Sink, remote: Manifest) -> None:
        """Refuse a prefix whose manifest belongs to another job.

        Raises:
            S3Error: it does (one line naming the prefix and both jobs).
        """
        if remote.job_id and self.job_id and remote.job_id != self.job_id:
            where = f"s3://{s3.bucket}/{s3.manifest_key}"
            raise S3Error(
                f"--s3-prefix={s3.prefix}: {where} lists another job's outputs (job "
                f"{remote.job_id[:12]}, this --out is job {self.job_id[:12]}); shard names would "
                "collide: give each job its own prefix"
            )

    def adopt(self, remote: Manifest) -> None:
        """Take the bucket's manifest as the starting point (at resume)."""
        self.entries = dict(remote.entries)
        self.generation = remote.generation
        self.etag = remote.etag

    def add(self, entry: ManifestEntry) -> None:
        """Record one uploaded shard (published by the next :meth:`publish`)."""
        self.entries[entry.name] = entry

    def in_sync_with(self, remote: Manifest) -> bool:
        """Whether the bucket's manifest is the one this run last wrote, with the same entries."""
        return remote.etag == self.etag and remote.entries == self.entries

    def publish(self, s3: S3Sink) -> None:
        """Write the manifest, merging with a newer one found in the bucket.

        Raises:
            S3Error: it kept changing under us (another writer racing without end).
            Exception: boto3's errors when S3 fails (the caller retries).
        """
        for _ in range(_CONFLICT_RETRIES):
            generation = self.generation + 1
            try:
                self.etag = s3.write_manifest(
                    self.entries, generation, self.run_id, self.etag, self.job_id
                )
                self.generation = generation
                self.writes += 1
                return
            except ManifestConflict:
                remote = s3.read_manifest()
                self.check_owner(s3, remote)
                if remote.run_id == self.run_id and remote.generation == generation:
                    # Our own write landed (a retried PUT saw its own result): nothing to merge.
                    self.etag, self.generation = remote.etag, generation
                    self.writes += 1
                    return
                self.entries = {**remote.entries, **self.entries}
                self.generation = max(self.generation, remote.generation)
                self.etag = remote.etag
        raise S3Error(f"{s3.manifest_key}: changed {_CONFLICT_RETRIES} times while writing it")
