"""The done record: an append-only journal of the prompts whose results are durable.

The indices are the serials of the output directory's job index (``tui.pipeline.job_index``):
one per prompt id, equal to the prompt's position while the prompts file is the one the job
started from.

It replaces the seed's ``.done_indices`` (newline-separated ints read into a set) with a compact
binary journal loaded into a bitmap, so resuming a 913,786-prompt job costs milliseconds and
about 115 KB instead of seconds and tens of MB.

File layout (all little-endian)::

    header  b"GFDONE2\n"
    batch*  magic:u32  shard:u32  first_byte:u32  nbytes:u32  crc32:u32  bitmap[nbytes]

One batch is appended, flushed and fsynced per shard, after that shard is durable: the slice of
the global bitmap that covers the shard's indices (bit i of byte k is index 8*(first_byte+k)+i).
The crc covers everything after the magic except itself. Loading ORs each slice into one
bitmap with big-int operations (C speed), so the cost does not depend on the completion order
inside a shard. A torn last batch (a kill during the append) fails its length or crc check; it is
ignored on load and cut off before the next append, and its shard counts as not committed.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Iterable
from pathlib import Path

from tui.inputs import JOB_RECORD_LIMIT, read_bytes
from tui.outputs import fsync_dir, open_writable, write_all, writing

HEADER = b"GFDONE2\n"
_BATCH = struct.Struct("<IIIII")
_BATCH_MAGIC = 0xD0E5BA7C


def _slice_of(indices: Iterable[int]) -> tuple[int, bytes]:
    """The bitmap slice covering ``indices``: (first byte number, bytes)."""
    values = list(indices)
    if not values:
        return 0, b""
    first_byte = min(values) >> 3
    base = first_byte << 3
    nbytes = (max(values) >> 3) - first_byte + 1
    piece = bytearray(nbytes)
    for index in values:
        offset = index - base
        piece[offset >> 3] |= 1 << (offset & 7)
    return first_byte, bytes(piece)


def _or_into(bitmap: bytearray, first_byte: int, piece: bytes | memoryview) -> None:
    """OR ``piece`` into ``bitmap`` at ``first_byte``, growing the bitmap as needed."""
    end = first_byte + len(piece)
    if len(bitmap) < end:
        bitmap.extend(bytes(end - len(bitmap)))
    current = int.from_bytes(bitmap[first_byte:end], "little")
    merged = current | int.from_bytes(piece, "little")
    bitmap[first_byte:end] = merged.to_bytes(len(piece), "little")


class DoneRecord:
    """The set of durably done indices (a bitmap) and the shards that committed them."""

    def __init__(self, path: Path, bitmap: bytearray, shards: set[int], valid_bytes: int) -> None:
        """Use :meth:`load`; this wraps already-parsed state."""
        self.path = path
        """The journal file."""
        self._bitmap = bitmap
        self.shards = shards
        """Shard numbers whose batch is in the journal (committed shards)."""
        self._valid_bytes = valid_bytes
        self._count = int.from_bytes(bitmap, "little").bit_count()

    @classmethod
    def load(cls, path: Path) -> DoneRecord:
        """Read a journal (a missing file is an empty record); a torn last batch is ignored.

        Args:
            path: the journal file.

        Returns:
            The record; nothing is written until :meth:`append`.
        """
        try:
            data = read_bytes(path, JOB_RECORD_LIMIT, "a done record")  # never a FIFO's read
        except FileNotFoundError:
            return cls(path, bytearray(), set(), 0)
        if not data.startswith(HEADER):
            if len(data) < len(HEADER) and HEADER.startswith(data):
                return cls(path, bytearray(), set(), 0)  # torn header of a new journal
            raise ValueError(f"{path}: not a gpufleet done record (bad header)")
        view = memoryview(data)
        offset = len(HEADER)
        bitmap = bytearray()
        shards: set[int] = set()
        while offset + _BATCH.size <= len(data):
            magic, shard, first_byte, nbytes, crc = _BATCH.unpack_from(view, offset)
            end = offset + _BATCH.size + nbytes
            if magic != _BATCH_MAGIC or end > len(data):
                break
            head_crc = zlib.crc32(view[offset + 4 : offset + 16])
            if zlib.crc32(view[offset + _BATCH.size : end], head_crc) != crc:
                break
            _or_into(bitmap, first_byte, view[offset + _BATCH.size : end])
            shards.add(shard)
            offset = end
        return cls(path, bitmap, shards, offset)

    def __contains__(self, index: int) -> bool:
        byte = index >> 3
        return byte < len(self._bitmap) and bool(self._bitmap[byte] & (1 << (index & 7)))

    def __len__(self) -> int:
        return self._count

    def count_below(self, end: int) -> int:
        """How many of the indices 0..end-1 are done (one popcount over the bitmap's prefix)."""
        whole, rest = divmod(end, 8)
        count = int.from_bytes(self._bitmap[:whole], "little").bit_count()
        if rest and whole < len(self._bitmap):
            count += (self._bitmap[whole] & ((1 << rest) - 1)).bit_count()
        return count

    def highest(self) -> int:
        """The largest done index, or -1 when none is done."""
        for byte in range(len(self._bitmap) - 1, -1, -1):
            if self._bitmap[byte]:
                return byte * 8 + self._bitmap[byte].bit_length() - 1
        return -1

    def append(self, shard: int, indices: Iterable[int]) -> None:
        """Durably add one shard's indices (append, flush, fsync), then mark them done.

        Args:
            shard: the shard number whose file is already durable.
            indices: the indices it holds.

        Raises:
            WriteFailed: it could not be written (the record is as it was: the batch is not in
                it, in memory or on disk).
        """
        first_byte, piece = _slice_of(indices)
        head = struct.pack("<III", shard, first_byte, len(piece))
        crc = zlib.crc32(piece, zlib.crc32(head))
        batch = struct.pack("<I", _BATCH_MAGIC) + head + struct.pack("<I", crc) + piece
        new_file = self._valid_bytes == 0
        data = (HEADER if new_file else b"") + batch
        with writing(self.path):
            fd = open_writable(self.path, mode=0o644)
            try:
                # Cut off a torn tail left by an earlier kill before appending after it.
                os.ftruncate(fd, self._valid_bytes)
                os.lseek(fd, self._valid_bytes, os.SEEK_SET)
                try:
                    write_all(fd, data)
                    os.fsync(fd)
                except OSError:
                    # Whole or not at all: a batch cut short (a full disk) is cut off again.
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, self._valid_bytes)
                    raise
            finally:
                os.close(fd)
            if new_file:
                fsync_dir(self.path.parent)
        self._valid_bytes += len(data)
        _or_into(self._bitmap, first_byte, piece)
        self.shards.add(shard)
        self._count = int.from_bytes(self._bitmap, "little").bit_count()
