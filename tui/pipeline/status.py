"""The pipeline's status document: a small JSON file, atomically replaced about once a second.

Any script can publish the same document and the console's generation pane will show it. The
schema is documented in docs/pipeline.md ("Pipeline status document").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tui.inputs import STATUS_LIMIT, read_bytes, read_json
from tui.outputs import make_dir, replace_file, writing

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Rate:
    """Throughput over one trailing window."""

    window_s: float
    """Window length in seconds (60 or 600), or less while the run is younger than that."""
    requests_per_s: float
    """Completed requests per second over the window."""
    output_tokens_per_s: float
    """Output tokens per second over the window."""


@dataclass(frozen=True, slots=True)
class ServerShare:
    """One server's part of the work."""

    url: str
    """Base URL of the server."""
    done: int
    """Requests this server completed in this run."""
    failed: int
    """Request attempts that failed on this server (each may have been retried elsewhere)."""
    in_flight: int
    """Requests outstanding on it now."""
    healthy: bool
    """Whether the dispatcher is sending it work."""
    output_tokens: int = 0
    """Output tokens it produced in this run."""
    cordoned: bool = False
    """Whether a cordon closes it to new work (``tui.state.cordons``); in-flight requests go on."""


@dataclass(frozen=True, slots=True)
class PipelineStatus:
    """The status document."""

    schema: int
    """SCHEMA_VERSION of the writer."""
    state: str
    """'running', 'finished', 'stopped' or 'failed'."""
    pid: int
    """Pipeline process id (the console uses it to stop the pipeline)."""
    started_at: float
    """time.time() when this run started."""
    updated_at: float
    """time.time() of this document."""
    total: int
    """Prompts in the job."""
    done: int
    """Prompts durably done (including those done by earlier runs)."""
    failed: int
    """Prompts recorded as failed after exhausting retries."""
    in_flight: int
    """Requests outstanding now."""
    rate_1m: Rate
    """Rate over the last minute."""
    rate_10m: Rate
    """Rate over the last ten minutes."""
    eta_s: float | None
    """Seconds to finish at the recent rate; None when the rate is zero or unknown."""
    servers: tuple[ServerShare, ...] = field(default_factory=tuple)
    """Per-server share."""
    uploaded_shards: int = 0
    """Shards confirmed in S3 (0 without S3)."""
    pending_uploads: int = 0
    """Durable local shards not yet uploaded."""
    message: str = ""
    """Last notable event in plain words (e.g. an upload being retried)."""
    no_server_since: float | None = None
    """time.time() since when no server has been healthy (the run waits for one, e.g. through
    a full-fleet relaunch); None while one is."""

    def to_json(self) -> dict[str, Any]:
        """The document as JSON-ready data."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PipelineStatus:
        """Parse a document; raises KeyError/TypeError/ValueError on a malformed one."""
        fields = dict(data)
        fields["rate_1m"] = Rate(**fields["rate_1m"])
        fields["rate_10m"] = Rate(**fields["rate_10m"])
        fields["servers"] = tuple(ServerShare(**s) for s in fields.get("servers", ()))
        return cls(**fields)


def write_status(path: Path, status: PipelineStatus) -> None:
    """Atomically replace the status document (``tui.outputs.replace_file``: a temporary file,
    renamed; never through a link). Rewritten every second, so not fsynced: a reader on this
    host never sees half of one, and the next second's replaces a lost one.

    Raises:
        WriteFailed: it could not be written (naming it; the old document stays).
    """
    replace_json(path, status.to_json())


def replace_json(path: Path, data: Any, durable: bool = False) -> None:
    """Atomically replace ``path`` with ``data`` as JSON through the one door for writes
    (``tui.outputs.replace_file``: a temporary file beside it, renamed; never through a link):
    the status document, the job's energy ledger.

    Raises:
        WriteFailed: it could not be written (naming it; the old document stays).
    """
    with writing(path):
        make_dir(path.parent)
        replace_file(path, json.dumps(data).encode(), durable=durable)


def read_status(path: Path) -> PipelineStatus | None:
    """Read the status document, or None when it is missing or malformed.

    Read through the one door (``tui.inputs``): a FIFO, a device or a directory in its place,
    or a file over ``STATUS_LIMIT``, reads as None at once instead of blocking or filling memory
    (commands that name the file check it first and say so: ``check_status_path``).
    """
    try:
        return PipelineStatus.from_json(read_json(path, STATUS_LIMIT, "a status document"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_status_path(path: Path) -> None:
    """Refuse now a ``--status`` path that exists but is no status document to read.

    Raises:
        InputError: a FIFO, a device, a directory, a file over ``STATUS_LIMIT`` or unreadable
            (one line naming it). A missing file passes: the job writes it when it starts.
    """
    try:
        read_bytes(path, STATUS_LIMIT, "a status document")
    except FileNotFoundError:
        return
