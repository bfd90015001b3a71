"""Opening a run's output directory: its lock, its job index and its done record, in that order.

Nothing in the directory is changed before its lock is held (another pipeline may be writing
it), and no prompt is dispatched before the prompts file has been matched to the job's ids: a
file whose ids changed is refused unless ``--resume-by-id`` was given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tui.outputs import UnsafePath, write_reason
from tui.pipeline import job_index
from tui.pipeline.done_record import DoneRecord
from tui.pipeline.failures import FailureLog
from tui.pipeline.inputs import InputError, output_dir
from tui.pipeline.job_id import job_id
from tui.pipeline.job_index import JobIndex, JobIndexDamaged, JobIndexError
from tui.pipeline.out_lock import OutDirBusy, OutDirLock
from tui.pipeline.prompts import PromptFile
from tui.pipeline.shards import ShardStore


class JobRefused(Exception):
    """This run cannot use the output directory (the one-line message names the input)."""


@dataclass(slots=True)
class Job:
    """An output directory held by this run."""

    store: ShardStore
    """Shards, done record and failures."""
    done: DoneRecord
    """The done record (serials of the job index)."""
    index: JobIndex
    """Positions of the prompts file -> serials."""
    lock: OutDirLock
    """Held until the run ends."""
    done_in_file: int
    """Prompts of the current file that are done (ids removed from it are not counted)."""
    job_id: str
    """The directory's job id (``tui.pipeline.job_id``): the bucket's manifest carries it."""
    failures: FailureLog
    """``failures.jsonl``, open to append (a torn last line already cut off)."""
    notes: list[str] = field(default_factory=list)
    """What the run should tell the user at start (a lock taken over, a change accepted)."""


def _legacy(out: Path, prompts: PromptFile, done: DoneRecord) -> str:
    """Adopt an output directory of a gpufleet that numbered prompts by line; returns a note.

    Its done record's indices are line numbers - 1: they are this file's positions only when
    every line of the file is a prompt.
    """
    if prompts.lines != len(prompts) or done.highest() >= len(prompts):
        raise JobRefused(
            f"--out={out}: was written by an older gpufleet that numbered prompts by line, and "
            f"--prompts={prompts.path} has {prompts.lines - len(prompts)} skipped line(s) or fewer "
            "lines than it had: its done prompts cannot be matched to ids; use a new --out"
        )
    job_index.create(out, prompts.ids, prompts.digest)
    return (
        f"{out} was written by an older gpufleet (prompts numbered by line): its ids are now "
        "taken from this prompts file, assumed unchanged since that run"
    )


def _index(out: Path, prompts: PromptFile, done: DoneRecord, by_id: bool) -> tuple[JobIndex, str]:
    if not job_index.exists(out):
        if len(done):
            return job_index.JobIndex(len(prompts), None), _legacy(out, prompts, done)
        return job_index.create(out, prompts.ids, prompts.digest), ""
    try:
        index = job_index.resolve(out, prompts.ids, prompts.digest, done, by_id=by_id)
    except JobIndexError as exc:
        if not len(done) and not done.shards:
            # Nothing done yet, so no output to protect: the job follows the file as it is now.
            note = f"nothing was done yet: the job now follows the changed --prompts ({exc})"
            return job_index.create(out, prompts.ids, prompts.digest), note
        if isinstance(exc, JobIndexDamaged):
            raise JobRefused(f"--out={out}: {exc}; its done prompts cannot be matched") from None
        raise JobRefused(
            f"--prompts={prompts.path}: {exc}; nothing was generated. Pass --resume-by-id to "
            f"skip the done ids and generate the new ones, or use a new --out (not {out})"
        ) from None
    note = ""
    if index.change is not None and (index.change.added or index.change.removed):
        removed = index.change.removed_examples
        where = (
            f"; outputs of removed ids keep their index, e.g. {list(removed)}" if removed else ""
        )
        note = f"resume by id: {index.change.describe()}{where}"
    return index, note


def open_job(out: Path, prompts: PromptFile, *, by_id: bool) -> Job:
    """Hold ``out`` for this run and match ``prompts`` to its job.

    Args:
        out: the output directory (created if missing).
        prompts: the opened prompts file.
        by_id: accept a prompts file whose ids changed (``--resume-by-id``).

    Returns:
        The job; release ``job.lock`` when the run ends.

    Raises:
        JobRefused: the directory is unusable, held by another pipeline, or its job does not
            match the prompts file.
    """
    try:
        output_dir(out)
        lock = OutDirLock.acquire(out)
    except InputError as exc:
        raise JobRefused(str(exc)) from None
    except OutDirBusy as exc:
        raise JobRefused(f"--out={out}: {exc}") from None
    except UnsafePath as exc:
        raise JobRefused(f"--out={out}: {exc}") from None
    except OSError as exc:
        raise JobRefused(f"--out={out}: cannot create its lock ({write_reason(exc)})") from None
    try:
        store = ShardStore(out)
        try:
            done = DoneRecord.load(store.done_path)
        except (ValueError, OSError) as exc:
            raise JobRefused(f"--out={out}: {exc}") from None
        try:
            identity = job_id(out)
        except (ValueError, OSError) as exc:
            raise JobRefused(f"--out={out}: {exc}") from None
        try:
            index, note = _index(out, prompts, done, by_id)
        except OSError as exc:  # a full disk at start: refused, nothing generated
            raise JobRefused(f"--out={out}: {exc}") from None
        if done.highest() >= index.serials:
            raise JobRefused(
                f"--out={out}: its done record names prompt {done.highest()} but its job index "
                f"has {index.serials}: they belong to different jobs; use a new --out"
            )
        if index.change is None:
            done_in_file = done.count_below(len(prompts))
        else:  # every done serial is in the file but the removed ones (new ids are not done)
            done_in_file = len(done) - index.change.removed_done
        try:
            failures = FailureLog.open(store.failures_path)
        except OSError as exc:
            raise JobRefused(f"--out={out}: {exc}") from None
    except BaseException:
        lock.release()
        raise
    notes = [note] if note else []
    if failures.repaired:
        notes.append(
            f"{failures.path}: cut off a torn last line ({failures.repaired} bytes, written "
            "by a run that was killed or ran out of space)"
        )
    if lock.took_over is not None:
        notes.insert(0, f"took over the lock of {lock.took_over.describe()}: it is not running")
    return Job(store, done, index, lock, done_in_file, identity, failures, notes)
