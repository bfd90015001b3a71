"""The job index: every prompt id an output directory has seen, each with a stable number.

The done record is a bitmap over these numbers ("serials"), so it stays as small and as fast to
load as when it was keyed by line number, while the identity behind each bit is the prompt's id.
A serial is given once and never reused: an id that leaves the prompts file keeps its serial
(and its done bit), and comes back done if it returns.

File ``prompt_ids.bin`` (little-endian)::

    header  b"GFIDS01\\n"
    batch*  magic:u32  count:u32  crc32:u32  digest[16]  id_hash:u64 * count

The first batch holds the ids of the prompts file the job started from, in file order, so
serial == position while that file is unchanged: resuming then reads only the first batch's
header (the fast path: no per-prompt work, no memory). ``digest`` is the fingerprint of the
prompts file a batch was written for (``PromptFile.digest``). A later batch is appended when a
changed file is accepted (``--resume-by-id``): it holds the ids new to the job and the new
file's digest, so the same file is accepted again without the flag. The first batch is written
whole (temporary file, fsync, rename); appends are fsynced and a torn last append is ignored and
cut off, like the done record's.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from array import array
from dataclasses import dataclass
from pathlib import Path

from tui.inputs import JOB_RECORD_LIMIT, InputError, open_stream, read_bytes
from tui.outputs import open_writable, replace_file, write_all, writing
from tui.pipeline.done_record import DoneRecord
from tui.pipeline.id_align import NEW, Run, SerialMap, align, runs_of, table

HEADER = b"GFIDS01\n"
_BATCH = struct.Struct("<III16s")
_MAGIC = 0x1D5EB47C
REGISTRY_NAME = "prompt_ids.bin"


class JobIndexError(Exception):
    """The output directory cannot be resumed with this prompts file (the message says why)."""


class JobIndexDamaged(JobIndexError):
    """The job index file is not one (a foreign file, or no complete first batch)."""


@dataclass(frozen=True, slots=True)
class IndexChange:
    """How the prompts file differs from the one the job last accepted."""

    added: int
    """Ids new to the job (they get new serials)."""
    removed: int
    """Ids of the job no longer in the file."""
    removed_done: int
    """Of those, ids already done (their outputs stay where they are)."""
    removed_examples: tuple[int, ...]
    """Serials of a few removed ids (the ``index`` of their output records)."""
    reordered: bool
    """Whether the ids still in the file changed their order."""

    def describe(self) -> str:
        """One line, e.g. '3 new ids, 1 removed (1 of them done), order changed'."""
        parts = [f"{self.added} new id(s)", f"{self.removed} removed"]
        if self.removed:
            parts[-1] += f" ({self.removed_done} of them done)"
        parts.append("order changed" if self.reordered else "order kept")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class JobIndex:
    """Positions of the current prompts file mapped to the job's serials."""

    serials: int
    """Serials given so far (ids the job has ever had)."""
    mapping: SerialMap | None
    """Serial of each position; None when serial == position (the file the job started from)."""
    change: IndexChange | None = None
    """How the file differs from the job's first one (None: the fast path found it unchanged)."""

    def serial_of(self, position: int) -> int:
        """The serial of the prompt at ``position``."""
        return position if self.mapping is None else self.mapping.serial_of(position)


def _batch(hashes: array[int], digest: bytes) -> bytes:
    payload = hashes.tobytes()
    head = struct.pack("<I16s", len(hashes), digest)
    crc = zlib.crc32(payload, zlib.crc32(head))
    return _BATCH.pack(_MAGIC, len(hashes), crc, digest) + payload


@dataclass(slots=True)
class _Registry:
    hashes: bytes
    """Every id hash, serial order (8 bytes each)."""
    last_digest: bytes
    valid_bytes: int

    @property
    def total(self) -> int:
        return len(self.hashes) // 8


def _read_all(path: Path) -> _Registry:
    try:
        data = read_bytes(path, JOB_RECORD_LIMIT, "a job index")  # never a FIFO's read
    except InputError as exc:
        raise JobIndexDamaged(str(exc)) from None
    if not data.startswith(HEADER):
        raise JobIndexDamaged(f"{path}: not a gpufleet job index (bad header)")
    view = memoryview(data)
    offset = len(HEADER)
    hashes = bytearray()
    digest = b""
    while offset + _BATCH.size <= len(data):
        magic, count, crc, batch_digest = _BATCH.unpack_from(view, offset)
        end = offset + _BATCH.size + 8 * count
        if magic != _MAGIC or end > len(data):
            break
        head = struct.pack("<I16s", count, batch_digest)
        if zlib.crc32(view[offset + _BATCH.size : end], zlib.crc32(head)) != crc:
            break
        hashes += view[offset + _BATCH.size : end]
        digest = batch_digest
        offset = end
    if not digest:
        raise JobIndexDamaged(f"{path}: the job index is damaged (no complete first batch)")
    return _Registry(bytes(hashes), digest, offset)


def _fast_path(path: Path, count: int, digest: bytes) -> bool:
    """Whether the index is one batch written for exactly this file (reads 36 bytes)."""
    try:
        handle = open_stream(path, "a job index")
    except InputError as exc:
        raise JobIndexDamaged(str(exc)) from None
    with handle:
        head = handle.read(len(HEADER) + _BATCH.size)
        size = os.fstat(handle.fileno()).st_size
    if len(head) < len(HEADER) + _BATCH.size or not head.startswith(HEADER):
        return False
    magic, stored, _, stored_digest = _BATCH.unpack_from(head, len(HEADER))
    whole = size == len(HEADER) + _BATCH.size + 8 * stored
    return magic == _MAGIC and whole and stored == count and stored_digest == digest


def create(out_dir: Path, ids: array[int], digest: bytes) -> JobIndex:
    """Start the job index of a new job: serial == position of ``ids``.

    Args:
        out_dir: the output directory.
        ids: id hashes of the prompts file, in order.
        digest: the file's fingerprint.

    Returns:
        The identity index.
    """
    path = out_dir / REGISTRY_NAME
    with writing(path):
        replace_file(path, HEADER + _batch(ids, digest), mode=0o644)
    return JobIndex(len(ids), None)


def exists(out_dir: Path) -> bool:
    """Whether ``out_dir`` has a job index."""
    return (out_dir / REGISTRY_NAME).exists()


def _serials(
    registry: _Registry, ids: array[int]
) -> tuple[SerialMap, array[int], list[Run] | array[int]]:
    """Map positions to serials, giving the next ones to new ids.

    Returns:
        The map; the new ids' hashes in file order; what the file kept of the index, as runs
        of known serials, or (a fragmented file) as the table of serials.
    """
    total = registry.total
    runs = align(registry.hashes, ids)
    new: array[int] = array("Q")
    if runs is None:
        serials = table(registry.hashes, ids)
        position = -1
        for _ in range(serials.count(NEW)):
            position = serials.index(NEW, position + 1)
            serials[position] = total + len(new)
            new.append(ids[position])
        runs = runs_of(serials)
        if runs is None:
            return SerialMap(None, serials), new, serials
    else:
        numbered = []
        for run in runs:
            if run.serial == NEW:
                new.extend(ids[run.position : run.position + run.length])
                run = Run(run.position, total + len(new) - run.length, run.length)
            numbered.append(run)
        runs = numbered
    return SerialMap(runs), new, [run for run in runs if run.serial < total]


def _change(
    registry: _Registry, kept: list[Run] | array[int], added: int, done: DoneRecord
) -> IndexChange:
    """What the file lost and gained; Python loops run only over removed ids (or, for a
    fragmented file, over its serials)."""
    total = registry.total
    present = bytearray(total)
    if isinstance(kept, list):
        for run in kept:
            present[run.serial : run.serial + run.length] = b"\x01" * run.length
        order = [run.serial for run in kept]
    else:
        order = [serial for serial in kept if serial < total]
        for serial in order:
            present[serial] = 1
    removed: list[int] = []
    at = present.find(0)
    while at >= 0:
        removed.append(at)
        at = present.find(0, at + 1)
    return IndexChange(
        added=added,
        removed=len(removed),
        removed_done=sum(1 for serial in removed if serial in done),
        removed_examples=tuple(removed[:5]),
        reordered=order != sorted(order),  # timsort checks an ordered list in one pass
    )


def resolve(
    out_dir: Path, ids: array[int], digest: bytes, done: DoneRecord, *, by_id: bool
) -> JobIndex:
    """Map the current prompts file onto an existing job index.

    Args:
        out_dir: the output directory (it has a job index).
        ids: id hashes of the prompts file, in order.
        digest: the file's fingerprint.
        done: the loaded done record (its serials).
        by_id: accept a changed file (``--resume-by-id``): ids new to the job get new serials
            (durably appended before anything is dispatched), removed ones are reported.

    Returns:
        The index for this run.

    Raises:
        JobIndexError: the file changed and ``by_id`` is False, or the index is damaged.
    """
    path = out_dir / REGISTRY_NAME
    if _fast_path(path, len(ids), digest):
        return JobIndex(len(ids), None)
    registry = _read_all(path)
    mapping, new, kept = _serials(registry, ids)
    change = _change(registry, kept, len(new), done)
    if registry.last_digest != digest or len(new):
        if not by_id:
            raise JobIndexError(
                f"its prompts changed since this output was started ({change.describe()})"
            )
        with writing(path):
            fd = open_writable(path, create=False)
            try:
                os.ftruncate(fd, registry.valid_bytes)  # a torn earlier append
                os.lseek(fd, registry.valid_bytes, os.SEEK_SET)
                try:
                    write_all(fd, _batch(new, digest))
                    os.fsync(fd)
                except OSError:  # whole or not at all: cut back off
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, registry.valid_bytes)
                    raise
            finally:
                os.close(fd)
    identity = mapping.is_identity()
    return JobIndex(registry.total + len(new), None if identity else mapping, change)
