"""Numbered output shards in the output directory, written so a kill -9 never leaves a half shard.

A shard is written to ``.shard-NNNNNN.jsonl.tmp``, flushed, fsynced, renamed to
``shard-NNNNNN.jsonl`` and the directory fsynced; only then is its batch appended to the done
record. The crash windows and how :meth:`ShardStore.reconcile` closes them on resume:

* killed while writing the temporary file: the temporary file is deleted, its indices are not in
  the done record and are generated again;
* killed after the rename but before the done record's append (or during a torn append): the
  shard's number is not among the record's committed shards, so the file is deleted and its
  indices are generated again into a new shard, never written twice;
* killed after the append: the shard is committed; only its upload may be outstanding.

A write that fails (a full disk) raises ``tui.outputs.WriteFailed`` naming the file; the partial
temporary file is removed at once (it would only hold the space the run needs), and nothing is
committed: the run stops, and a resume redoes the shard. Every file here is written through the
one door for writes (``tui.outputs``): a link planted in the output directory is never followed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from tui.outputs import create_new, fsync_dir, make_dir, write_all, writing
from tui.pipeline.done_record import DoneRecord

_SHARD_RE = re.compile(r"^shard-(\d{6,})\.jsonl$")


def shard_name(number: int) -> str:
    """File name of shard ``number``."""
    return f"shard-{number:06d}.jsonl"


@dataclass(frozen=True, slots=True)
class Reconciled:
    """What resume found in the output directory."""

    removed_temporary: tuple[str, ...]
    """Temporary files of shards that were being written when the last run died."""
    removed_uncommitted: tuple[str, ...]
    """Renamed shards whose done-record batch never landed (their indices are redone)."""
    missing_committed: tuple[int, ...]
    """Committed shards with no local file (deleted by hand; S3 may still hold them)."""


class ShardStore:
    """The output directory: shards, the done record and the failures file."""

    def __init__(self, out_dir: Path) -> None:
        """Args: out_dir: the output directory (created if missing)."""
        make_dir(out_dir)
        self.out_dir = out_dir
        """The output directory."""

    @property
    def done_path(self) -> Path:
        """The done record's journal."""
        return self.out_dir / "done_record.bin"

    @property
    def failures_path(self) -> Path:
        """JSON lines of prompts that exhausted their retries."""
        return self.out_dir / "failures.jsonl"

    def path(self, number: int) -> Path:
        """Path of shard ``number``."""
        return self.out_dir / shard_name(number)

    def local_shards(self) -> dict[int, Path]:
        """Final-named shard files on disk, by number."""
        found: dict[int, Path] = {}
        for entry in os.scandir(self.out_dir):
            match = _SHARD_RE.match(entry.name)
            if match:
                found[int(match.group(1))] = Path(entry.path)
        return found

    def reconcile(self, done: DoneRecord) -> Reconciled:
        """Bring the directory in line with the done record (see the module docstring).

        Args:
            done: the loaded done record.

        Returns:
            What was removed or is missing.
        """
        temporary = []
        for entry in os.scandir(self.out_dir):
            if entry.name.startswith(".shard-") and entry.name.endswith(".tmp"):
                os.unlink(entry.path)
                temporary.append(entry.name)
        local = self.local_shards()
        uncommitted = []
        for number, path in sorted(local.items()):
            if number not in done.shards:
                path.unlink()
                uncommitted.append(path.name)
        if temporary or uncommitted:
            fsync_dir(self.out_dir)
        missing = tuple(sorted(n for n in done.shards if n not in local))
        return Reconciled(tuple(temporary), tuple(uncommitted), missing)

    def next_number(self, done: DoneRecord) -> int:
        """The number for the next new shard (after every committed one)."""
        return max(done.shards, default=0) + 1

    def write(self, number: int, lines: list[bytes]) -> Path:
        """Durably write one shard: temporary file, flush, fsync, rename, fsync the directory.

        Args:
            number: the shard number.
            lines: JSON records, each ending in a newline.

        Returns:
            The final path.

        Raises:
            WriteFailed: it could not be written (naming the shard; nothing is left of it).
        """
        final = self.path(number)
        temporary = self.out_dir / f".{final.name}.tmp"
        with writing(temporary):  # O_EXCL: a name planted there is refused, never followed
            fd = create_new(temporary, 0o644)
        with writing(final):
            try:
                try:
                    write_all(fd, b"".join(lines))
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(temporary, final)
            except BaseException:
                temporary.unlink(missing_ok=True)
                raise
            fsync_dir(self.out_dir)
        return final

    def commit(self, done: DoneRecord, number: int, indices: list[int], lines: list[bytes]) -> Path:
        """Write a shard durably, then record its indices as done (in that order).

        Args:
            done: the done record to append to.
            number: the shard number.
            indices: the indices the shard holds.
            lines: their JSON records.

        Returns:
            The shard's path.

        Raises:
            WriteFailed: the shard or the done record could not be written (naming it).
        """
        path = self.write(number, lines)
        done.append(number, indices)
        return path
