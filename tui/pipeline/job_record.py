"""Which process is a detached pipeline job, and how to start it again: a record in the state
directory, and the job's id in the job's environment.

``gpufleet generate --detach``, the console's ``p`` and the agent's start run a job through one
door (``tui.pipeline.detach.start_detached``): it draws a job id, writes a record (the id, the
``generate`` options, the directory they are relative to, the status document and the log) into
the user's own state directory (0700; the file 0600, replaced atomically, never written through
a link), and starts the job with ``GPUFLEET_JOB_ID`` in its environment, as the servers carry
``GPUFLEET_LAUNCH_ID``.

The job of a status document is then a process of this user (effective uid) whose environment
carries the record's id and whose command line is a ``generate`` run: nothing else is ever
signalled. A record is read only when it is a regular file of this user that nobody else can
read or write, opened without following a link. Why: the agent took as the job any process
whose command line read ``gpufleet generate ... --status S``, whoever owned it: ``stop``
signalled another user's process, and ``start`` ran, as root, ``python -m tui generate`` with
that user's options in that user's directory. Options are never read from another process.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from tui import paths
from tui.servers.procinfo import read_launch_id
from tui.state.files import write_document

JOB_ID_ENV = "GPUFLEET_JOB_ID"
"""Environment variable that names a detached job's process (and its children)."""
MAX_RECORD_BYTES = 256 * 1024
"""A job record larger than this is not one."""


class JobRecordError(ValueError):
    """A job record that may not be used (the message names the file and why, one line)."""


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A detached job as its launcher recorded it."""

    job_id: str
    """32 hex digits, in the job's environment as ``GPUFLEET_JOB_ID``."""
    options: tuple[str, ...]
    """Its ``generate`` options (without ``--detach``)."""
    cwd: str
    """The directory it runs in (its relative paths are relative to it)."""
    status_path: str
    """Its status document, absolute."""
    log_path: str
    """Its output, appended."""
    started_at: float
    """``time.time()`` of the start."""

    def to_json(self) -> dict[str, Any]:
        """The record's document."""
        return {**asdict(self), "options": list(self.options), "version": 1}


def record_file(status_path: Path) -> Path:
    """Where the record of the job writing ``status_path`` is kept (one per status document)."""
    digest = hashlib.sha256(os.path.abspath(status_path).encode()).hexdigest()[:32]
    return paths.job_records_dir() / f"{digest}.json"


def new_record(options: list[str], status_path: Path, log_path: Path) -> JobRecord:
    """A record for a job about to start here, with a new id (paths made absolute)."""
    return JobRecord(
        job_id=uuid.uuid4().hex,
        options=tuple(options),
        cwd=os.getcwd(),
        status_path=os.path.abspath(status_path),
        log_path=os.path.abspath(log_path),
        started_at=time.time(),
    )


def write_record(record: JobRecord) -> None:
    """Keep ``record`` (0600 in the private state directory; atomic; a link in its place is
    replaced, never followed)."""
    write_document(record_file(Path(record.status_path)), record.to_json())


def _parse(doc: Any) -> JobRecord:
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise ValueError("not a job record of this gpufleet (version 1)")
    options = doc["options"]
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise ValueError("options must be a list of strings")
    job_id = str(doc["job_id"])
    if len(job_id) != 32 or any(c not in "0123456789abcdef" for c in job_id):
        raise ValueError("job_id must be 32 hex digits")
    return JobRecord(
        job_id=job_id,
        options=tuple(options),
        cwd=str(doc["cwd"]),
        status_path=str(doc["status_path"]),
        log_path=str(doc["log_path"]),
        started_at=float(doc["started_at"]),
    )


def read_record(status_path: Path) -> JobRecord | None:
    """The record of the job writing ``status_path``, or None when there is none.

    Raises:
        JobRecordError: it is a link, not a regular file, another user's, readable or
            writable by others, too large or damaged: never used.
    """
    path = record_file(status_path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        why = "is a link" if error.errno == errno.ELOOP else f"cannot be read ({error.strerror})"
        raise JobRecordError(f"{path}: {why}: not a job record") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise JobRecordError(f"{path}: is not a regular file: not a job record")
        if info.st_uid != os.geteuid():
            raise JobRecordError(f"{path}: is owned by uid {info.st_uid}, not this user")
        if stat.S_IMODE(info.st_mode) & 0o077:
            mode = stat.S_IMODE(info.st_mode)
            raise JobRecordError(f"{path}: is {mode:04o}: other users could write it")
        raw = handle.read(MAX_RECORD_BYTES + 1)
    if len(raw) > MAX_RECORD_BYTES:
        raise JobRecordError(f"{path}: is larger than {MAX_RECORD_BYTES} bytes")
    try:
        record = _parse(json.loads(raw))
    except (ValueError, KeyError, TypeError) as error:
        raise JobRecordError(f"{path}: is damaged ({error})") from None
    if Path(record.status_path) != Path(os.path.abspath(status_path)):
        raise JobRecordError(f"{path}: records the job of {record.status_path}, not this one")
    return record


def _is_generate(cmdline: list[str]) -> bool:
    if "generate" not in cmdline:
        return False
    head = cmdline[: cmdline.index("generate")]
    return any(a == "tui" or Path(a).name == "gpufleet" for a in head)


def job_processes(record: JobRecord) -> list[psutil.Process]:
    """The running processes of ``record``'s job: this user's (effective uid), carrying its id,
    running ``generate``. Blocking (reads every process's environment of this user)."""
    found = []
    me = os.geteuid()
    for proc in psutil.process_iter(["uids", "cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            uids, cmdline = proc.info["uids"], proc.info["cmdline"]
            if uids is None or uids.effective != me or uids.real != me:
                continue
            if proc.info["status"] == psutil.STATUS_ZOMBIE or not _is_generate(cmdline or []):
                continue
            read = read_launch_id(proc.pid, variable=JOB_ID_ENV)
            if read.problem is None and read.launch_id == record.job_id:
                found.append(proc)
    return found
