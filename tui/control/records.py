"""The fleet record: who gpufleet launched, so a later console can re-attach and stop safely.

``tui.paths.fleet_file()`` holds one JSON document, ``{"version": 1, "servers": {"<gpu>": {...}}}``,
one entry per GPU. Writers take an exclusive ``fcntl`` lock on a side file for the whole
read-modify-write and replace the document atomically, so concurrent launches on different GPUs
never lose each other's entries and readers never see half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tui.paths import fleet_file

VERSION = 1


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """Identity of one server process gpufleet started (enough to never signal a stranger)."""

    gpu: int
    """GPU index (``CUDA_VISIBLE_DEVICES``)."""
    port: int
    """HTTP port."""
    pid: int
    """Main process id."""
    pgid: int
    """Process group (== pid: each server is a session and group leader)."""
    create_time: float
    """``psutil.Process(pid).create_time()`` at launch: a reused pid has another."""
    cmdline: tuple[str, ...]
    """The command line as the kernel reported it at launch."""
    log_path: str
    """Where its stdout and stderr go."""
    profile: str = ""
    """Name of the profile it was launched from ("" when launched from a bare argv)."""
    host: str = "127.0.0.1"
    """Address it serves on."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = asdict(self)
        data["cmdline"] = list(self.cmdline)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessRecord:
        """Inverse of ``to_json``."""
        return cls(**{**data, "cmdline": tuple(data["cmdline"])})


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _read(path: Path) -> dict[int, ProcessRecord]:
    try:
        doc = json.loads(path.read_text())
        return {int(k): ProcessRecord.from_json(v) for k, v in doc.get("servers", {}).items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        # A damaged record must not block stopping what is visible; treat it as empty.
        return {}


def _write(path: Path, records: dict[int, ProcessRecord]) -> None:
    doc = {"version": VERSION, "servers": {str(k): r.to_json() for k, r in sorted(records.items())}}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(doc, handle, indent=1)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_records(path: Path | None = None) -> dict[int, ProcessRecord]:
    """Every recorded server, by GPU index (empty when there is no record)."""
    return _read(path or fleet_file())


def put_record(record: ProcessRecord, path: Path | None = None) -> None:
    """Record (or replace) the server on ``record.gpu``."""
    path = path or fleet_file()
    with _locked(path):
        records = _read(path)
        records[record.gpu] = record
        _write(path, records)


def remove_record(gpu: int, pid: int | None = None, path: Path | None = None) -> None:
    """Forget the server on ``gpu`` (only if its pid is ``pid``, when given)."""
    path = path or fleet_file()
    with _locked(path):
        records = _read(path)
        current = records.get(gpu)
        if current is not None and (pid is None or current.pid == pid):
            del records[gpu]
            _write(path, records)
