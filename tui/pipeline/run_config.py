"""What one run of ``gpufleet generate`` needs, as the command line built it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tui.pipeline.prompts import PromptFile

if TYPE_CHECKING:  # boto3 is imported only by runs that upload (it costs 0.1 s at start)
    from tui.pipeline.s3_sink import S3Sink

S3_LEASE_TTL_S = 120.0
"""How long an S3 prefix's lease lasts after each renewal, by default (renewed every 30 s)."""
S3_LEASE_TTL_RANGE = (5.0, 86400.0)
"""Allowed ``--s3-lease-ttl``."""


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
    s3_wait_s: float = 3600.0
    """How long to keep retrying an S3 that cannot be reached at start (generation goes on)."""
    s3_lease_ttl_s: float = S3_LEASE_TTL_S
    """How long the prefix's lease lasts after each renewal (``tui.pipeline.s3_lease``)."""
    by_id: bool = False
    """Accept a prompts file whose ids changed since the job started (``--resume-by-id``)."""
    router: str | None = None
    """Send every request to this router (``sglang-router``); ``servers`` are then its workers,
    kept registered by ``tui.pipeline.router``."""
    router_agents: tuple[tuple[str, str], ...] = ()
    """With a router: the nodes' agents (base URL, the host of its servers) to take the
    workers from, instead of probing ``servers``."""
    agent_token: str = ""
    """The agents' bearer token."""
