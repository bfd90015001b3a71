"""S3 side of the pipeline: shard uploads with boto3's managed transfer, and the manifest.

Objects: ``PREFIX/shards/shard-NNNNNN.jsonl`` and ``PREFIX/manifest.json``. The manifest lists
every uploaded shard with its key, record count, first/last index, size and sha256; it is
rewritten after each upload, so an object missing from it is re-uploaded on resume and an entry
whose object is gone is re-uploaded from the local shard. Every method blocks (boto3): the
pipeline calls them with ``asyncio.to_thread``.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

MANIFEST_SCHEMA = 1


class S3Error(Exception):
    """The bucket cannot be used (missing, forbidden, unreachable)."""


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


def describe_shard(path: Path) -> tuple[int, int, int, int, str]:
    """Read a shard once: (count, first index, last index, size, sha256 hex)."""
    digest = hashlib.sha256()
    count, first, last, size = 0, -1, -1, 0
    with open(path, "rb") as handle:
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

    def key(self, name: str) -> str:
        """Object key of a shard file name."""
        return f"{self.prefix}/shards/{name}" if self.prefix else f"shards/{name}"

    @property
    def manifest_key(self) -> str:
        """Object key of the manifest."""
        return f"{self.prefix}/manifest.json" if self.prefix else "manifest.json"

    def check_bucket(self) -> None:
        """Fail early with a clear message when the bucket is missing, forbidden or unreachable."""
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("404", "NoSuchBucket", "NotFound"):
                raise S3Error(f"--s3-bucket={self.bucket}: the bucket does not exist") from None
            if code in ("403", "AccessDenied", "Forbidden"):
                raise S3Error(f"--s3-bucket={self.bucket}: access denied (credentials?)") from None
            raise S3Error(f"--s3-bucket={self.bucket}: {exc}") from None
        except BotoCoreError as exc:
            raise S3Error(f"--s3-bucket={self.bucket}: cannot reach S3 ({exc})") from None

    def load_manifest(self) -> dict[str, ManifestEntry]:
        """The manifest's entries by shard name (empty when there is no manifest yet)."""
        try:
            body = self._client.get_object(Bucket=self.bucket, Key=self.manifest_key)["Body"]
            data = json.loads(body.read())
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return {}
            raise
        return {e["name"]: ManifestEntry(**e) for e in data.get("shards", [])}

    def save_manifest(self, entries: dict[str, ManifestEntry]) -> None:
        """Replace the manifest with ``entries``."""
        document: dict[str, Any] = {
            "schema": MANIFEST_SCHEMA,
            "updated_at": time.time(),
            "records": sum(e.count for e in entries.values()),
            "shards": [asdict(entries[name]) for name in sorted(entries)],
        }
        self._client.put_object(
            Bucket=self.bucket,
            Key=self.manifest_key,
            Body=json.dumps(document, indent=1).encode(),
            ContentType="application/json",
        )

    def list_shard_keys(self) -> dict[str, int]:
        """Shard objects in the bucket: key -> size."""
        found: dict[str, int] = {}
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.key("")):
            for item in page.get("Contents", []):
                found[item["Key"]] = item["Size"]
        return found

    def upload(self, path: Path) -> ManifestEntry:
        """Upload one local shard with the managed transfer; returns its manifest entry."""
        count, first, last, size, sha = describe_shard(path)
        key = self.key(path.name)
        self._client.upload_file(
            str(path),
            self.bucket,
            key,
            ExtraArgs={"Metadata": {"sha256": sha}},
            Config=self._transfer,
        )
        return ManifestEntry(path.name, key, count, first, last, size, sha)

    def get_bytes(self, key: str) -> bytes:
        """An object's bytes (used by checks and tests)."""
        data: bytes = self._client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return data
