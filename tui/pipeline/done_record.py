"""The done record: an append-only journal of the prompt indices whose results are durable.

It replaces the seed's ``.done_indices`` (newline-separated ints read into a set) with a compact
binary journal loaded into a bitmap, so resuming a 913,786-prompt job costs milliseconds and
about 115 KB instead of seconds and tens of MB.

File layout (all little-endian)::

    header  b"GFDONE1\\n"
    batch*  magic:u32  shard:u32  nruns:u32  crc32:u32  (start:u32 length:u32) * nruns

One batch is appended, flushed and fsynced per shard, after that shard is durable; the crc covers
shard, nruns and the runs. Indices are stored as runs because a shard's indices are mostly
contiguous, which makes both the file and the load small. A torn last batch (a kill during the
append) fails its length or crc check; it is ignored on load and cut off before the next append,
and its shard counts as not committed.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterable
from pathlib import Path

HEADER = b"GFDONE1\n"
_BATCH = struct.Struct("<IIII")
_BATCH_MAGIC = 0xD0E5BA7C
_RUN = struct.Struct("<II")


def to_runs(indices: Iterable[int]) -> list[tuple[int, int]]:
    """Collapse indices into sorted (start, length) runs.

    Args:
        indices: prompt indices, any order, no duplicates needed.

    Returns:
        Sorted, non-overlapping runs covering exactly the given indices.
    """
    runs: list[tuple[int, int]] = []
    start = -2
    length = 0
    for index in sorted(set(indices)):
        if index == start + length:
            length += 1
            continue
        if length:
            runs.append((start, length))
        start, length = index, 1
    if length:
        runs.append((start, length))
    return runs


def _set_range(bitmap: bytearray, start: int, length: int) -> None:
    """Set bits [start, start+length) in a bitmap that is already large enough."""
    end = start + length
    first_full = (start + 7) >> 3
    last_full = end >> 3
    if first_full >= last_full:
        # The run lies within one or two partial bytes: bit by bit is cheap enough.
        for bit in range(start, end):
            bitmap[bit >> 3] |= 1 << (bit & 7)
        return
    for bit in range(start, first_full << 3):
        bitmap[bit >> 3] |= 1 << (bit & 7)
    bitmap[first_full:last_full] = b"\xff" * (last_full - first_full)
    for bit in range(last_full << 3, end):
        bitmap[bit >> 3] |= 1 << (bit & 7)


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
            data = path.read_bytes()
        except FileNotFoundError:
            return cls(path, bytearray(), set(), 0)
        if not data.startswith(HEADER):
            if len(data) < len(HEADER) and HEADER.startswith(data):
                return cls(path, bytearray(), set(), 0)  # torn header of a new journal
            raise ValueError(f"{path}: not a gpufleet done record (bad header)")
        view = memoryview(data)
        offset = len(HEADER)
        batches: list[tuple[int, list[tuple[int, int]]]] = []
        highest = 0
        while offset + _BATCH.size <= len(data):
            magic, shard, nruns, crc = _BATCH.unpack_from(view, offset)
            end = offset + _BATCH.size + nruns * _RUN.size
            if magic != _BATCH_MAGIC or end > len(data):
                break
            body_crc = zlib.crc32(view[offset + 4 : offset + 12])
            if zlib.crc32(view[offset + _BATCH.size : end], body_crc) != crc:
                break
            runs = list(_RUN.iter_unpack(view[offset + _BATCH.size : end]))
            if runs:
                last_start, last_len = runs[-1]
                highest = max(highest, last_start + last_len)
            batches.append((shard, runs))
            offset = end
        bitmap = bytearray((highest + 7) >> 3)
        shards: set[int] = set()
        for shard, runs in batches:
            shards.add(shard)
            for start, length in runs:
                _set_range(bitmap, start, length)
        return cls(path, bitmap, shards, offset)

    def __contains__(self, index: int) -> bool:
        byte = index >> 3
        return byte < len(self._bitmap) and bool(self._bitmap[byte] & (1 << (index & 7)))

    def __len__(self) -> int:
        return self._count

    def append(self, shard: int, indices: Iterable[int]) -> None:
        """Durably add one shard's indices (append, flush, fsync), then mark them done.

        Args:
            shard: the shard number whose file is already durable.
            indices: the indices it holds.
        """
        runs = to_runs(indices)
        payload = b"".join(_RUN.pack(start, length) for start, length in runs)
        head = struct.pack("<II", shard, len(runs))
        crc = zlib.crc32(payload, zlib.crc32(head))
        batch = _BATCH.pack(_BATCH_MAGIC, shard, len(runs), crc) + payload
        new_file = self._valid_bytes == 0
        with open(self.path, "r+b" if self.path.exists() else "wb") as handle:
            # Cut off a torn tail left by an earlier kill before appending after it.
            handle.truncate(self._valid_bytes)
            handle.seek(self._valid_bytes)
            if new_file:
                handle.write(HEADER)
            handle.write(batch)
            handle.flush()
            os.fsync(handle.fileno())
            self._valid_bytes = handle.tell()
        if new_file:
            fsync_dir(self.path.parent)
        if runs:
            highest = runs[-1][0] + runs[-1][1]
            if len(self._bitmap) < (highest + 7) >> 3:
                self._bitmap.extend(bytes(((highest + 7) >> 3) - len(self._bitmap)))
        for start, length in runs:
            _set_range(self._bitmap, start, length)
        self.shards.add(shard)
        self._count = int.from_bytes(self._bitmap, "little").bit_count()


def fsync_dir(directory: Path) -> None:
    """fsync a directory so a new or renamed entry in it survives a power loss."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
