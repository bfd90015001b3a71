"""The journal: one JSON line per apply (and, later, per canary or rollout), fsynced.

Appends are single ``write`` calls of a whole line followed by ``fsync``, so a crash can at worst
leave a torn last line; ``read_journal`` skips lines that do not parse (and says how many).
Every entry carries a ``type`` ('apply', 'canary', 'rollout', ...) and a ``schema`` number.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tui import paths
from tui.retune.events import ApplyResult

SCHEMA = 1
"""Version of the entry layout."""


class JournalError(OSError):
    """The journal path holds something that is not a journal (a directory, a device)."""


@dataclass(frozen=True, slots=True)
class JournalRead:
    """The entries of a journal, and how many lines could not be read."""

    entries: tuple[dict[str, Any], ...]
    """Parsed entries, oldest first."""
    skipped: int
    """Lines that were not valid JSON objects (a torn last line after a crash)."""


def append_entry(entry: dict[str, Any], path: Path | None = None) -> Path:
    """Append one entry as a JSON line and fsync it.

    Args:
        entry: A JSON-serialisable mapping with a 'type' key.
        path: Journal file; defaults to ``tui.paths.journal_file()``.

    Returns:
        The journal path.
    """
    if "type" not in entry:
        raise ValueError("journal entry needs a 'type' field ('apply', 'canary', 'rollout', ...)")
    target = path or paths.journal_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"schema": SCHEMA, **entry}, sort_keys=False, default=str)
    data = (line + "\n").encode()
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        # A torn previous line (crash mid-write) must not swallow this entry: start on a new line.
        size = os.fstat(fd).st_size
        if size > 0 and _last_byte(target) != b"\n":
            data = b"\n" + data
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return target


def _last_byte(path: Path) -> bytes:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1)


def apply_entry(result: ApplyResult) -> dict[str, Any]:
    """The journal entry of one apply."""
    return {
        "type": "apply",
        "profile": result.profile,
        "previous_profiles": {str(k): v for k, v in result.previous_profiles.items()},
        "gpus": list(result.gpus),
        "ok": result.ok,
        "refused": list(result.refused),
        "diff": list(result.diff),
        "reports": [{**asdict(r), "capped": r.capped} for r in result.reports],
        "throughput": {**asdict(result.throughput), "summary": result.throughput.describe()},
        "verdict": result.throughput.verdict,
        "started_at": result.started_at,
        "finished_at": result.finished_at,
    }


def record_apply(result: ApplyResult, path: Path | None = None) -> Path:
    """Append one apply's entry to the journal; returns the journal path."""
    return append_entry(apply_entry(result), path)


def read_journal(path: Path | None = None) -> JournalRead:
    """Read every entry; unreadable lines (a torn last line) are counted, not fatal.

    Args:
        path: Journal file; defaults to ``tui.paths.journal_file()``.

    Returns:
        The entries oldest first and the number of skipped lines (empty when no journal exists).
    """
    target = path or paths.journal_file()
    try:
        if not stat.S_ISREG(os.stat(target).st_mode):  # /dev/zero would never end
            raise JournalError(f"{target}: not a regular file, not a journal")
        raw = target.read_bytes()
    except FileNotFoundError:
        return JournalRead((), 0)
    entries: list[dict[str, Any]] = []
    skipped = 0
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (UnicodeDecodeError, ValueError, RecursionError):
            skipped += 1
            continue
        if isinstance(value, dict):
            entries.append(value)
        else:
            skipped += 1
    return JournalRead(tuple(entries), skipped)


def journal_marks(path: Path | None = None) -> list[float]:
    """When each retune happened (``started_at`` of every entry that changed the fleet).

    The console's generation pane marks these on its throughput history; refused applies
    stopped nothing and are left out.

    Args:
        path: Journal file; defaults to ``tui.paths.journal_file()``.

    Returns:
        time.time() values, oldest first (empty when there is no journal).
    """
    marks = []
    for entry in read_journal(path).entries:
        started = entry.get("started_at")
        if entry.get("refused") or not isinstance(started, int | float):
            continue
        marks.append(float(started))
    return sorted(marks)
