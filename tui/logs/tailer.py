"""Follow one growing log file: return only the complete lines written since the last read.

Every line returned is at most ``LINE_CAP_BYTES`` (``tui.logs.long_lines``): a longer one is its
first 64 KiB and a mark; the rest is skipped as it is read and counted, never held, so a line
of any length (500 MB without a newline) costs the follower its cap, not the line.

Blocking file I/O: call it from a thread worker, never from the event loop.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from tui.inputs import InputError, open_stream
from tui.logs.long_lines import LINE_CAP_BYTES, cap_lines, cut_mark

DEFAULT_ATTACH_BYTES = 4 * 1024 * 1024
"""On first attach, read at most this much of the end of the file."""

DEFAULT_MAX_READ_BYTES = 64 * 1024 * 1024
"""At most this much is read per call, so one call stays bounded; the rest comes next call."""


class LogTailer:
    """Incremental reader of one log file that survives truncation and rotation.

    Line numbers: when the tailer has read the file from its start, :attr:`line_base` is the number
    of complete lines returned before the next batch, so the next line is ``line_base + 1``. When it
    attached mid-file (a large file, only the tail read), earlier lines were never counted and
    :attr:`line_base` is None: events then carry ``line=0`` ("unknown"), never a wrong number. It
    becomes known again after a truncation or a rotation, since the new file is read from its start.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        attach_bytes: int = DEFAULT_ATTACH_BYTES,
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
        line_cap: int = LINE_CAP_BYTES,
    ) -> None:
        """Prepare to follow ``path``; nothing is opened until the first read.

        Args:
            path: The log file; it may not exist yet.
            attach_bytes: On first attach, how much of the file's end to read (>= 1).
            max_read_bytes: Upper bound on bytes read per call (>= 1).
            line_cap: Longest line returned whole (>= 1); the rest of a longer one is skipped.
        """
        if attach_bytes < 1:
            raise ValueError(f"attach_bytes must be >= 1, got {attach_bytes}")
        if max_read_bytes < 1:
            raise ValueError(f"max_read_bytes must be >= 1, got {max_read_bytes}")
        if line_cap < 1:
            raise ValueError(f"line_cap must be >= 1, got {line_cap}")
        self.path = Path(path)
        """The file followed."""
        self.attach_bytes = attach_bytes
        """How much of the end of an existing file the first read returns at most."""
        self.max_read_bytes = max_read_bytes
        """Bytes read per call at most."""
        self.line_cap = line_cap
        """Longest line returned whole."""
        self._file: BinaryIO | None = None
        self._ident: tuple[int, int] | None = None
        self._pos = 0
        self._partial = b""
        self._skipping = 0  # bytes skipped so far of the partial line past the cap (0: none)
        self._dropping = False  # the rest of a line cut by the attach window is not a line
        self._attached = False
        self.line_base: int | None = 0
        """Complete lines returned so far from the current file, or None when attached mid-file."""
        self.truncations = 0
        """How many times the file shrank under us (restarted from its start)."""
        self.rotations = 0
        """How many times the path began naming a new file (rotation, or delete and recreate)."""
        self.lines_cut = 0
        """Lines longer than ``line_cap`` returned cut (their first ``line_cap`` bytes and a
        mark)."""
        self.bytes_skipped = 0
        """Bytes of those lines not kept."""

    @property
    def position(self) -> int:
        """Byte offset in the current file up to which data has been read."""
        return self._pos

    def close(self) -> None:
        """Close the open file, if any; a later read re-attaches from the start of the path."""
        if self._file is not None:
            self._file.close()
        self._file = None
        self._ident = None

    def __enter__(self) -> LogTailer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read_new(self) -> list[str]:
        """Return the complete lines written since the last call (decoded, without newlines).

        Returns:
            The new lines, oldest first; ``[]`` when nothing new or the file does not exist.
        """
        data = self.read_new_bytes()
        if not data:
            return []
        text = data.decode("utf-8", errors="replace")
        return [line.rstrip("\r") for line in text.split("\n")[:-1]]

    def read_new_bytes(self) -> bytes:
        """Return the new complete lines as raw bytes, each ending in ``\\n``.

        Returns:
            The bytes of whole lines; a partial last line is kept until its newline arrives.
        """
        return self.read_new_numbered()[1]

    def read_new_numbered(self) -> tuple[int, bytes]:
        """Return ``(first_line, data)``: the new lines and the 1-based number of the first one.

        Returns:
            ``first_line`` is 0 when line numbers are unknown (attached mid-file) or nothing is new.
        """
        data = self._read_raw()
        base = self.line_base
        if base is None or not data:
            return 0, data
        self.line_base = base + data.count(b"\n")
        return base + 1, data

    # --- internals ------------------------------------------------------------------------

    def _read_raw(self) -> bytes:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            # Renamed or deleted: drain what the old file still holds, then wait for a new one.
            return self._drain_old() if self._file is not None else b""
        ident = (stat.st_dev, stat.st_ino)
        if self._file is not None and ident != self._ident:
            # Rotated: this call returns the rest of the old file (numbered on the old base);
            # the next call opens the new file from its start.
            self.rotations += 1
            return self._drain_old()
        if self._file is None:
            if not self._open(stat.st_size, from_start=self._attached):
                return b""
            self._ident = ident
        elif stat.st_size < self._pos:
            self.truncations += 1
            self._restart()
        assert self._file is not None
        # Read what the stat says is new, not up to max_read_bytes: a buffered read of n bytes
        # allocates n bytes first (64 MiB: an mmap and munmap, 12 us a call at EOF against
        # 0.6 us), and a follower polled every second mostly finds a few KiB or nothing.
        # What was written after the stat comes next call.
        new = stat.st_size - self._pos
        if new <= 0:
            return b""
        chunk = self._file.read(min(new, self.max_read_bytes))
        self._pos += len(chunk)
        return self._complete(chunk)

    def _open(self, size: int, from_start: bool) -> bool:
        try:
            # Kept open across calls on purpose. A FIFO or device at the log's path is not
            # opened (its open or read would block the follower for ever): read as no file yet.
            handle = open_stream(self.path, "a log")
        except (FileNotFoundError, InputError):
            return False
        self._file, self._partial = handle, b""
        self._skipping, self._dropping = 0, False
        first = not self._attached
        self._attached = True
        if first and not from_start and size > self.attach_bytes:
            start = size - self.attach_bytes
            handle.seek(start - 1)
            starts_clean = handle.read(1) == b"\n"
            handle.seek(start)
            self._pos = start
            self.line_base = None
            if not starts_clean:
                # Skip the cut line, its start outside the window: a bounded read at a time
                # (``readline`` would hold a line of any length whole).
                self._pos += self._skip_line(handle)
        else:
            self._pos = 0
            self.line_base = 0
        return True

    def _skip_line(self, handle: BinaryIO) -> int:
        """Read past the rest of the line at ``handle``'s position, up to its newline; returns
        how many bytes that was (the newline included). At the end of the file without one, the
        rest of the line, when it comes, is dropped too."""
        skipped = 0
        while True:
            block = handle.read(min(self.max_read_bytes, 1 << 20))
            if not block:
                self._dropping = True
                return skipped
            newline = block.find(b"\n")
            if newline >= 0:
                handle.seek(newline + 1 - len(block), os.SEEK_CUR)
                return skipped + newline + 1
            skipped += len(block)

    def _restart(self) -> None:
        assert self._file is not None
        self._file.seek(0)
        self._pos = 0
        self._partial = b""
        self._skipping, self._dropping = 0, False
        self.line_base = 0

    def _drain_old(self) -> bytes:
        """Read the rest of a file that is no longer at the path (at most ``max_read_bytes``);
        end its partial line."""
        assert self._file is not None
        rest = self._complete(self._file.read(self.max_read_bytes))
        if self._partial or self._skipping:
            rest += self._end_partial()
        self.close()
        return rest

    def _end_partial(self) -> bytes:
        """The partial line, ended: with its mark when it was past the cap."""
        line = self._partial + (cut_mark(self._skipping) if self._skipping else b"") + b"\n"
        if self._skipping:
            self.lines_cut += 1
            self.bytes_skipped += self._skipping
        self._partial, self._skipping = b"", 0
        return line

    def _complete(self, chunk: bytes) -> bytes:
        head = b""
        if self._dropping:
            newline = chunk.find(b"\n")
            if newline < 0:
                return b""
            self._dropping, chunk = False, chunk[newline + 1 :]
        if self._skipping:
            # Inside a line past the cap: nothing of it is kept until its newline.
            newline = chunk.find(b"\n")
            if newline < 0:
                self._skipping += len(chunk)
                return b""
            self._skipping += newline
            head = self._end_partial()
            chunk = chunk[newline + 1 :]
        data = self._partial + chunk
        cut = data.rfind(b"\n") + 1
        rest = data[cut:]
        if len(rest) > self.line_cap:
            self._partial, self._skipping = rest[: self.line_cap], len(rest) - self.line_cap
        else:
            self._partial = rest
        capped = cap_lines(data[:cut], self.line_cap)
        self.lines_cut += capped.lines_cut
        self.bytes_skipped += capped.bytes_skipped
        return head + capped.data
