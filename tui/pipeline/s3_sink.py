"""S3 side of the pipeline: shard uploads with boto3's managed transfer, and the manifest.

Objects: ``PREFIX/shards/shard-NNNNNN.jsonl``, ``PREFIX/manifest.json`` and ``PREFIX/lease.json``
(``tui.pipeline.s3_lease``). The manifest lists every uploaded shard with its key, record count,
first/last index, size, sha256 and the ETag the store gave it; it is rewritten after each upload,
so an object missing from it is re-uploaded on resume and an entry whose object is gone is
re-uploaded from the local shard. Every method blocks (boto3): the
pipeline calls them with ``asyncio.to_thread``.

Each manifest carries a ``generation`` (one more than the manifest it replaces, across runs) and
is written with a conditional PUT (``If-Match`` the ETag the writer last saw, ``If-None-Match: *``
for the first one), so a stale write (a PUT that timed out client-side and lands late, a retry,
another pipeline) can never replace a newer manifest: it fails with :class:`ManifestConflict`
and the writer re-reads and merges. Stores without conditional writes fall back to plain PUTs.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from tui.inputs import open_stream

MANIFEST_SCHEMA = 1


class S3Error(Exception):
    """The bucket cannot be used (missing, forbidden, unreachable)."""


class S3Unreachable(S3Error):
    """S3 cannot be reached now (connection refused, timeout, 5xx): worth retrying."""


class ObjectChanged(Exception):
    """A conditional write found the object changed since the writer last saw it (or present
    where it expected none); nothing was written."""


class ManifestConflict(ObjectChanged):
    """The manifest changed since the writer last read or wrote it; nothing was written."""


class NoConditionalWrites(S3Error):
    """The store does not implement conditional writes (``If-None-Match``/``If-Match``)."""


def _failed_precondition(exc: ClientError) -> bool:
    """Whether a conditional write was refused because the object is not the one expected."""
    code = exc.response.get("Error", {}).get("Code", "")
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412)


def _server_time(response: Any) -> float:
    """The store's clock from a response's ``Date`` header (this host's when it has none)."""
    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    try:
        return parsedate_to_datetime(date).timestamp() if date else time.time()
    except (TypeError, ValueError):
        return time.time()


def bare_etag(etag: str | None) -> str:
    """An ETag without its quotes (stores differ in whether they send them)."""
    return (etag or "").strip('"')


@dataclass(frozen=True, slots=True)
class StoredObject:
    """A small object as read, with what a conditional write of it needs."""

    body: bytes
    """Its bytes."""
    etag: str
    """Its ETag (for ``If-Match``)."""
    server_time: float
    """The store's clock when it answered (its ``Date`` header)."""


def is_transient(exc: BaseException) -> bool:
    """Whether an S3 failure says "cannot reach it now" rather than "this cannot work"."""
    if isinstance(exc, BotoCoreError):
        return True
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return int(status) >= 500 or exc.response.get("Error", {}).get("Code") == "SlowDown"
    return False


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One uploaded shard."""

    name: str
    """Shard file name."""
    key: str
    """Object key."""
    count: int
    """Records in the shard."""
    first_index: int
    """Smallest prompt index in it."""
    last_index: int
    """Largest prompt index in it."""
    bytes: int
    """Object size."""
    sha256: str
    """Hex sha256 of the object's bytes."""
    etag: str = ""
    """The object's ETag when it was uploaded ("": listed by an older gpufleet). Any rewrite of
    the object changes it; S3 lists it with every object, so resume compares it for free."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """The manifest as read from the bucket."""

    entries: dict[str, ManifestEntry]
    """Uploaded shards by name."""
    generation: int = 0
    """Write counter (0: no manifest yet, or one written before generations existed)."""
    run_id: str = ""
    """Identity of the run that wrote it."""
    job_id: str = ""
    """The job whose outputs it lists ("": written before job ids)."""
    etag: str | None = None
    """The object's ETag (None: no manifest object)."""


def describe_shard(path: Path) -> tuple[int, int, int, int, str]:
    """Read a shard once: (count, first index, last index, size, sha256 hex)."""
    digest = hashlib.sha256()
    count, first, last, size = 0, -1, -1, 0
    with open_stream(path, "a shard") as handle:
        for line in handle:
            digest.update(line)
            size += len(line)
            index = json.loads(line)["index"]
            first = index if first < 0 else min(first, index)
            last = max(last, index)
            count += 1
    return count, first, last, size, digest.hexdigest()


class S3Sink:
    """A bucket and prefix the pipeline uploads to."""

    def __init__(self, bucket: str, prefix: str, endpoint_url: str | None = None) -> None:
        """Args: bucket; prefix (slashes trimmed); endpoint_url of an S3-compatible store."""
        self.bucket = bucket
        """Bucket name."""
        self.prefix = prefix.strip("/")
        """Key prefix."""
        # Short timeouts and few botocore retries: the pipeline retries with its own backoff and
        # must notice an outage quickly rather than hang in one call.
        config = Config(
            connect_timeout=3,
            read_timeout=30,
            retries={"max_attempts": 2, "mode": "standard"},
        )
        self._client = boto3.client("s3", endpoint_url=endpoint_url, config=config)
        self._transfer = TransferConfig(multipart_threshold=64 * 1024 * 1024, max_concurrency=4)
        self._conditional = True

    def key(self, name: str) -> str:
        """Object key of a shard file name."""
        return f"{self.prefix}/shards/{name}" if self.prefix else f"shards/{name}"

    @property
    def manifest_key(self) -> str:
        """Object key of the manifest."""
        return f"{self.prefix}/manifest.json" if self.prefix else "manifest.json"

    def check_bucket(self) -> None:
        """Fail early with a clear message when the bucket is missing or forbidden.

        Raises:
            S3Unreachable: S3 cannot be reached now (retry later).
            S3Error: the bucket does not exist, access is denied, or another permanent error.
        """
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except (ClientError, BotoCoreError) as exc:
            if is_transient(exc):
                raise S3Unreachable(f"--s3-bucket={self.bucket}: cannot reach S3 ({exc})") from None
            assert isinstance(exc, ClientError)
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("404", "NoSuchBucket", "NotFound"):
                raise S3Error(f"--s3-bucket={self.bucket}: the bucket does not exist") from None
            if code in ("403", "AccessDenied", "Forbidden"):
                raise S3Error(f"--s3-bucket={self.bucket}: access denied (credentials?)") from None
            raise S3Error(f"--s3-bucket={self.bucket}: {exc}") from None

    def load_manifest(self) -> dict[str, ManifestEntry]:
        """The manifest's entries by shard name (empty when there is no manifest yet)."""
        return self.read_manifest().entries

    def read_manifest(self) -> Manifest:
        """The manifest with its generation and ETag (empty when there is none yet)."""
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=self.manifest_key)
            data = json.loads(response["Body"].read())
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return Manifest({})
            raise
        entries = {e["name"]: ManifestEntry(**e) for e in data.get("shards", [])}
        generation = int(data.get("generation", 0))
        return Manifest(
            entries,
            generation,
            str(data.get("run_id", "")),
            str(data.get("job_id", "")),
            response.get("ETag"),
        )

    def write_manifest(
        self,
        entries: dict[str, ManifestEntry],
        generation: int,
        run_id: str,
        expect_etag: str | None,
        job_id: str = "",
    ) -> str | None:
        """Replace the manifest only if it is still the one the writer knows.

        Args:
            entries: the shards to list.
            generation: the new manifest's generation (the known one's plus one).
            run_id: the writing run.
            expect_etag: ETag of the manifest the writer last read or wrote; None: there is none.
            job_id: the job whose outputs it lists.

        Returns:
            The new manifest's ETag.

        Raises:
            ManifestConflict: the bucket holds a different manifest (nothing written).
        """
        document: dict[str, Any] = {
            "schema": MANIFEST_SCHEMA,
            "generation": generation,
            "run_id": run_id,
            "job_id": job_id,
            "updated_at": time.time(),
            "records": sum(e.count for e in entries.values()),
            "shards": [asdict(entries[name]) for name in sorted(entries)],
        }
        body = json.dumps(document, indent=1).encode()
        condition: dict[str, str] = {}
        if self._conditional:
            condition = {"IfMatch": expect_etag} if expect_etag else {"IfNoneMatch": "*"}
        try:
            response = self._client.put_object(
                Bucket=self.bucket,
                Key=self.manifest_key,
                Body=body,
                ContentType="application/json",
                **condition,
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if _failed_precondition(exc):
                raise ManifestConflict(f"{self.manifest_key} changed ({code})") from None
            if code in ("NoSuchKey", "NotImplemented") and condition:
                # A store without conditional writes (or If-Match on a vanished object): plain
                # PUTs from now on; the final check still repairs a stale manifest.
                self._conditional = code != "NotImplemented"
                if code == "NoSuchKey":
                    raise ManifestConflict(f"{self.manifest_key} vanished") from None
                return self.write_manifest(entries, generation, run_id, expect_etag, job_id)
            raise
        etag: str | None = response.get("ETag")
        return etag

    @property
    def lease_key(self) -> str:
        """Object key of the prefix's lease (``tui.pipeline.s3_lease``)."""
        return f"{self.prefix}/lease.json" if self.prefix else "lease.json"

    def read_object(self, key: str) -> tuple[StoredObject | None, float]:
        """A small object and the store's clock, or (None, the clock) when there is none."""
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None, _server_time(exc.response)
            raise
        when = _server_time(response)
        return StoredObject(response["Body"].read(), bare_etag(response.get("ETag")), when), when

    def put_if(self, key: str, body: bytes, etag: str | None) -> tuple[str, float]:
        """PUT ``body`` only if the object is still ``etag`` (None: only if there is none).

        Returns:
            The new ETag and the store's clock.

        Raises:
            ObjectChanged: it is not (nothing written).
            NoConditionalWrites: the store does not implement conditional writes.
        """
        condition = {"IfMatch": f'"{etag}"'} if etag else {"IfNoneMatch": "*"}
        try:
            response = self._client.put_object(
                Bucket=self.bucket, Key=key, Body=body, ContentType="application/json", **condition
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if _failed_precondition(exc) or code == "NoSuchKey":
                raise ObjectChanged(f"{key} changed ({code})") from None
            if code == "NotImplemented":
                raise NoConditionalWrites(f"{key}: the store has no conditional writes") from None
            raise
        return bare_etag(response.get("ETag")), _server_time(response)

    def list_shard_keys(self) -> dict[str, tuple[int, str]]:
        """Shard objects in the bucket: key -> (size, ETag)."""
        found: dict[str, tuple[int, str]] = {}
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.key("")):
            for item in page.get("Contents", []):
                found[item["Key"]] = (item["Size"], bare_etag(item.get("ETag")))
        return found

    def upload(self, path: Path) -> ManifestEntry:
        """Upload one local shard with the managed transfer; returns its manifest entry, with
        the ETag the store gave the object (checked to be the bytes uploaded: its sha256)."""
        count, first, last, size, sha = describe_shard(path)
        key = self.key(path.name)
        self._client.upload_file(
            str(path),
            self.bucket,
            key,
            ExtraArgs={"Metadata": {"sha256": sha}},
            Config=self._transfer,
        )
        etag, stored = self.stored_sha256(key)
        if stored != sha:
            raise S3Unreachable(f"{key}: changed while it was uploaded (sha256 {stored[:12]})")
        return ManifestEntry(path.name, key, count, first, last, size, sha, etag)

    def stored_sha256(self, key: str) -> tuple[str, str]:
        """An object's ETag and the sha256 its uploader recorded ("" when none)."""
        head = self._client.head_object(Bucket=self.bucket, Key=key)
        return bare_etag(head.get("ETag")), str(head.get("Metadata", {}).get("sha256", ""))

    def get_bytes(self, key: str) -> bytes:
        """An object's bytes (used by checks and tests)."""
        data: bytes = self._client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return data
