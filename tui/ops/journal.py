"""The journal: one JSON line per operation that changed (or tried to change) the fleet.

Every operation of the operations core is journalled through ``append``, with the same header:
what it was (``type``), when, on which GPUs, from which profile to which, by whom, whether it
worked, and a one-line summary; operation-specific detail (verify reports, the throughput
comparison, the canary's estimate, ...) goes under ``detail``. Appends are one ``write`` of a
whole line followed by ``fsync``, so a crash can at worst leave a torn last line. ``read_journal``
never fails on a bad line: a line that is not JSON, or whose header has the wrong shape, is
skipped and counted, so neither the CLI nor the console can be brought down by the journal.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui import paths
from tui.inputs import JOURNAL_LIMIT, InputError, parse_json, read_tail
from tui.outputs import UnsafePath, append_record, open_writable, write_reason
from tui.state.private import ensure_private_dir

SCHEMA = 2

ROTATE_BYTES = 128 << 20
"""A journal this large is moved aside (``journal.jsonl.1``) before the next append, so every
reader reads it whole (``JOURNAL_LIMIT`` is 256 MiB): ~500 weeks of a 41-hour job's entries."""
MAX_JOURNAL_LINE = 4 << 20
"""A line longer than this is damage, not an entry (a 7-GPU apply is a few KB)."""


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One operation, as journalled."""

    type: str
    """apply, canary, rollout, rollout-step, rollback, relaunch, kill, stop-fleet, start,
    pipeline-start, pipeline-stop, autotune-..."""
    started_at: float
    """time.time() at its start."""
    finished_at: float
    """time.time() at its end."""
    ok: bool
    """It did everything it set out to do."""
    gpus: tuple[int, ...] = ()
    """GPUs it touched."""
    source: str | None = None
    """Profile the GPUs ran before ('a, b' when they differed; None: unknown or not a change)."""
    target: str | None = None
    """Profile they run after (None: not a change of profile)."""
    by: str = ""
    """Who asked: 'console', 'cli', 'autotune'."""
    summary: str = ""
    """One line, for the list views."""
    verdict: str | None = None
    """better / worse / no measurable difference / not measured, when it measured one."""
    refused: tuple[str, ...] = ()
    """Why it was refused before anything was stopped."""
    failed: tuple[int, ...] = ()
    """GPUs on which it failed."""
    lost_gpu_seconds: float | None = None
    """Throughput it cost the fleet, when measured."""
    lost_in_flight: int | None = None
    """Requests its stops dropped in flight (a drain that ran past its deadline, or a
    terminate/kill): 0 when every stop drained; None when it stopped nothing, or when requests
    were lost and how many is unknown (the summary says which)."""
    client_still_sending: bool = False
    """A stop's drain ended while a client was still sending (SGLang accepts requests while it
    drains; its exit drops what came after its last check): requests may have been lost that
    ``lost_in_flight`` cannot count."""
    arrived_during_drain: int | None = None
    """Requests that reached the stopped servers after their SIGTERM, summed (None: none
    counted)."""
    detail: Mapping[str, Any] = field(default_factory=dict)
    """Operation-specific record (read defensively: older or damaged entries may lack keys)."""

    def to_json(self) -> dict[str, Any]:
        """The journal line's object."""
        return {
            "schema": SCHEMA,
            "type": self.type,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "ok": self.ok,
            "gpus": list(self.gpus),
            "source": self.source,
            "target": self.target,
            "by": self.by,
            "summary": self.summary,
            "verdict": self.verdict,
            "refused": list(self.refused),
            "failed": list(self.failed),
            "lost_gpu_seconds": self.lost_gpu_seconds,
            "lost_in_flight": self.lost_in_flight,
            "client_still_sending": self.client_still_sending,
            "arrived_during_drain": self.arrived_during_drain,
            "detail": dict(self.detail),
        }

    @classmethod
    def from_json(cls, data: Any) -> JournalEntry:
        """Parse one line's object (schema 2, or an older entry's fields mapped onto it).

        Raises:
            ValueError: the header has the wrong shape.
        """
        if not isinstance(data, dict):
            raise ValueError("an entry is not an object")
        kind = data.get("type")
        if not isinstance(kind, str) or not kind:
            raise ValueError("no 'type'")
        started = _number(data.get("started_at", data.get("time")), "started_at")
        finished = data.get("finished_at", started)
        detail = data.get("detail")
        if data.get("schema") != SCHEMA:
            detail = {k: v for k, v in data.items() if k not in _HEADER}  # schema 1: flat
        source = data.get("source")
        if source is None and isinstance(data.get("previous_profiles"), dict):
            names = sorted({str(v) for v in data["previous_profiles"].values() if v})
            source = ", ".join(names) or None
        source = source if source is not None else data.get("previous_profile")
        target = data.get("target", data.get("profile"))
        return cls(
            type=kind,
            started_at=started,
            finished_at=_number(finished, "finished_at"),
            ok=bool(data.get("ok", False)),
            gpus=_ints(data.get("gpus", ()), "gpus"),
            source=_text(source, "source"),
            target=_text(target, "target"),
            by=_text(data.get("by"), "by") or "",
            summary=_text(data.get("summary"), "summary") or "",
            verdict=_text(data.get("verdict"), "verdict"),
            refused=tuple(str(r) for r in _list(data.get("refused", ()), "refused")),
            failed=_ints(data.get("failed", ()), "failed"),
            lost_gpu_seconds=(
                None
                if data.get("lost_gpu_seconds") is None
                else _number(data["lost_gpu_seconds"], "lost_gpu_seconds")
            ),
            lost_in_flight=_count(data.get("lost_in_flight"), "lost_in_flight"),
            client_still_sending=data.get("client_still_sending") is True,
            arrived_during_drain=_count(data.get("arrived_during_drain"), "arrived_during_drain"),
            detail=detail if isinstance(detail, dict) else {},
        )


_HEADER = {
    "schema",
    "type",
    "started_at",
    "finished_at",
    "ok",
    "gpus",
    "source",
    "target",
    "by",
    "summary",
    "verdict",
    "refused",
    "failed",
    "lost_gpu_seconds",
    "lost_in_flight",
    "client_still_sending",
    "arrived_during_drain",
}


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} is not a number")
    return float(value)


def _count(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} is not a count")
    return value


def _list(value: Any, name: str) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise ValueError(f"{name} is not a list")
    return value


def _ints(value: Any, name: str) -> tuple[int, ...]:
    items = _list(value, name)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise ValueError(f"{name} holds something other than GPU indices")
    return tuple(int(v) for v in items)


def _text(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str | int | float):
        raise ValueError(f"{name} is not text")
    return str(value)


@dataclass(frozen=True, slots=True)
class JournalRead:
    """What ``read_journal`` found."""

    entries: tuple[JournalEntry, ...]
    """Every readable entry, oldest first."""
    skipped: int
    """Lines that could not be read (torn, not JSON, wrong shape)."""
    first_problem: str = ""
    """The first skipped line's number and why (empty when none was skipped)."""
    unreadable: str = ""
    """Why the journal itself could not be read (not a regular file, no permission): ''."""
    partial: str = ""
    """What was left unread of a journal over ``JOURNAL_LIMIT`` (its newest entries were read),
    in words: ''."""


class JournalError(RuntimeError):
    """The journal cannot be written (the message names it): an operation that could not record
    what it did must not start."""


def _open_for_append(target: Path) -> int:
    """The journal opened to append (created 0600, ``tui.outputs.open_writable``): never a
    link, a FIFO, a device or a directory.

    Raises:
        JournalError: it cannot be opened, or is not a regular file (naming it).
    """
    try:
        ensure_private_dir(target.parent)
        # Read-write: the last byte is read (pread) to tell whether the previous line was torn.
        return open_writable(target, append=True)
    except UnsafePath as exc:
        if exc.path == target and "not a regular file" in exc.problem:
            kind = exc.problem.split(",", 1)[0].removeprefix("is ")
            raise JournalError(f"{target}: is {kind}, not a journal") from None
        raise JournalError(f"{target}: cannot be written ({exc.problem})") from None
    except OSError as exc:
        raise JournalError(f"{target}: cannot be written ({write_reason(exc)})") from None


def rotated(path: Path) -> Path:
    """Where a journal grown past ``ROTATE_BYTES`` is kept: ``journal.jsonl.1``."""
    return path.with_name(path.name + ".1")


def _rotate_if_large(fd: int, target: Path) -> int:
    """Move a journal past ``ROTATE_BYTES`` aside (``journal.jsonl.1``, replacing an older one)
    and open a new one; returns the descriptor to append to (``fd`` itself, or a new one with
    ``fd`` closed).

    Under an ``flock`` of the old file, and only while its name still names it: two appenders
    never rotate twice (the second would put a fresh journal over the kept one). A journal that
    cannot be moved keeps growing; readers read its newest entries.
    """
    if os.fstat(fd).st_size < ROTATE_BYTES:
        return fd
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        if os.fstat(fd).st_ino == os.stat(target).st_ino:
            os.replace(target, rotated(target))
    except OSError:
        return fd
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
    fresh = _open_for_append(target)  # raises with ``fd`` still open: the caller closes it
    os.close(fd)
    return fresh


def check_journal(path: Path | None = None) -> None:
    """Refuse now, before an operation stops anything, a journal it could not append to.

    Args:
        path: Journal file; defaults to ``tui.paths.journal_file()`` (created when missing).

    Raises:
        JournalError: naming the journal and why (a directory, a FIFO, no permission).
    """
    os.close(_open_for_append(path or paths.journal_file()))


def append(entry: JournalEntry, path: Path | None = None) -> Path:
    """Append one entry as a JSON line and fsync it.

    Args:
        entry: The entry.
        path: Journal file; defaults to ``tui.paths.journal_file()``.

    Returns:
        The journal path.

    Raises:
        JournalError: the journal cannot be written (naming it).
    """
    target = path or paths.journal_file()
    data = (json.dumps(entry.to_json(), default=str) + "\n").encode()
    fd = _open_for_append(target)
    try:
        fd = _rotate_if_large(fd, target)
        # A torn previous line (crash mid-write) must not swallow this entry: start on a new line.
        size = os.fstat(fd).st_size
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        append_record(fd, data)
        os.fsync(fd)
    except OSError as exc:
        raise JournalError(f"{target}: cannot be written ({write_reason(exc)})") from None
    finally:
        os.close(fd)
    return target


def read_journal(path: Path | None = None) -> JournalRead:
    """Read every entry; unreadable lines are counted, never fatal.

    Args:
        path: Journal file; defaults to ``tui.paths.journal_file()``.

    Returns:
        The entries oldest first and how many lines were skipped (empty when no journal exists).
    """
    target = path or paths.journal_file()
    try:
        raw, size = read_tail(target, JOURNAL_LIMIT, "a journal")
    except FileNotFoundError:
        return JournalRead((), 0)
    except InputError as exc:
        problem = exc.problem
        if problem.startswith("is ") and "not a journal" in problem:
            problem = f"not a regular file, not a journal ({problem})"
        return JournalRead((), 0, unreadable=f"{target}: {problem}")
    partial = ""
    if size > JOURNAL_LIMIT:
        partial = (
            f"{target} is {size / (1 << 20):.0f} MiB: its newest {JOURNAL_LIMIT >> 20} MiB were "
            f"read, older entries left out (gpufleet now moves it to {rotated(target).name} past "
            f"{ROTATE_BYTES >> 20} MiB)"
        )
    entries: list[JournalEntry] = []
    skipped = 0
    problem = ""
    for number, (start, end) in enumerate(_line_spans(raw), start=1):
        try:
            if end - start > MAX_JOURNAL_LINE:  # measured, never copied: damage can be huge
                raise ValueError(f"line too long ({end - start} bytes)")
            line = raw[start:end]
            if not line.strip():
                continue
            entries.append(JournalEntry.from_json(parse_json(line, finite=False)))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            skipped += 1
            problem = problem or f"{target}:{number}: {exc}"
    return JournalRead(tuple(entries), skipped, problem, partial=partial)


def _line_spans(raw: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each line of ``raw``, without its newline."""
    start = 0
    while start < len(raw):
        end = raw.find(b"\n", start)
        if end < 0:
            end = len(raw)
        yield start, end
        start = end + 1
