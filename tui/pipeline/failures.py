"""``failures.jsonl``: the prompts that used up their retries, one OpenAI Batch error record a line.

Every record is appended whole or not at all (``tui.outputs.append_record``: a write cut short by
a full disk is cut back off), the file is fsynced, and only then are the records counted: the
status document's ``failed`` is what the file holds. A file that ends in half a line (a run killed
mid-write, or written by a gpufleet before this one) is repaired when a run opens it: the torn
tail is cut off and the run says how many bytes went, so the next record starts on its own line
instead of continuing invalid JSON. The file is written through the one door for writes: a link
in its place is refused, never followed.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from tui.outputs import append_record, open_writable, writing

_TAIL_SCAN = 1 << 20
"""How far back from the end a torn tail is looked for (a record is a few hundred bytes)."""


class FailureLog:
    """The failures file of one output directory, open for this run."""

    def __init__(self, path: Path, fd: int, repaired: int) -> None:
        """Use :meth:`open`."""
        self.path = path
        """The file."""
        self.repaired = repaired
        """Bytes of a torn last line cut off when it was opened (0: it ended whole)."""
        self.count = 0
        """Records appended (and fsynced) by this run."""
        self._fd = fd

    @classmethod
    def open(cls, path: Path) -> FailureLog:
        """Open (or create) the file to append to, cutting off a torn last line.

        Raises:
            WriteFailed: it cannot be opened or repaired (naming it).
        """
        with writing(path):
            fd = open_writable(path, append=True, mode=0o644)
            try:
                repaired = _cut_torn_tail(fd)
            except BaseException:
                os.close(fd)
                raise
        return cls(path, fd, repaired)

    def append(self, records: list[bytes]) -> None:
        """Append ``records`` (each a whole line), fsync, then count them (``count``).

        Raises:
            WriteFailed: they could not all be written: the ones before the failing one are
                in the file (and counted), whole; nothing of that one or after.
        """
        written = 0
        try:
            with writing(self.path):
                for record in records:
                    append_record(self._fd, record)
                    written += 1
                os.fsync(self._fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)  # what is in the file is whole: count it once it is durable
            raise
        finally:
            self.count += written

    def close(self) -> None:
        """Close the file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _cut_torn_tail(fd: int) -> int:
    """Cut the file back to its last newline; returns the bytes cut."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return 0
    start = max(0, size - _TAIL_SCAN)
    tail = os.pread(fd, size - start, start)
    cut = tail.rfind(b"\n")
    keep = start + cut + 1 if cut >= 0 else (0 if start == 0 else size)
    if keep == size:
        return 0  # a line longer than the scan: not ours to judge; left as it is
    os.ftruncate(fd, keep)
    os.fsync(fd)
    return size - keep
