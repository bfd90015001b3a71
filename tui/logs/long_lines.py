"""Log lines with a bound: a line longer than ``LINE_CAP_BYTES`` is kept as its first
``LINE_CAP_BYTES`` and a mark saying how many bytes of it were not kept.

Why: no SGLang line is longer than a few KiB (a ``server_args`` line with every flag is ~6 KiB),
but a log is written by whatever runs in the server, and one line can be anything. Seen: one
50 MB line emptied the GPU's log panel and its allocation lines; 500 MB without a newline grew
the console from 70 MB to 792 MB (1.27 GB peak) while the follower held the line, waiting for its
end. With the bound, a follower holds at most one line's cap besides what it read, whatever a
line's length, and the lines around a long one are read as before.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tui.inputs import InputError, open_stream

LINE_CAP_BYTES = 64 * 1024
"""Longest line kept whole; the rest of a longer one is skipped and counted."""
TAIL_SCAN_BYTES = 64 * 1024 * 1024
"""How far back from a log's end ``tail_lines`` reads at most, looking for line starts."""
TAIL_KEEP_BYTES = 1 << 20
"""How much ``tail_lines`` returns at most (a line past it is not returned)."""
_BLOCK = 1 << 20


def cut_mark(skipped: int) -> bytes:
    """What replaces the end of a line cut at the cap."""
    return b" [... %d more bytes of this line not kept]" % skipped


@dataclass(frozen=True, slots=True)
class Capped:
    """Whole lines, each at most the cap (and its mark)."""

    data: bytes
    """The lines, each ending in ``\\n`` as they did."""
    lines_cut: int = 0
    """Lines that were longer than the cap."""
    bytes_skipped: int = 0
    """Bytes of those lines not kept."""


def cap_lines(data: bytes, cap: int = LINE_CAP_BYTES) -> Capped:
    """``data`` (whole lines) with every line longer than ``cap`` cut to its first ``cap`` bytes
    and ``cut_mark``. Lines are counted as before: every newline is kept.

    Cost: a stride of ``cap`` bytes at a time (``bytes.rfind`` in C), not a step per line, so a
    chunk of short lines costs a few hundred calls per 64 MiB.
    """
    size = len(data)
    if size <= cap:
        return Capped(data)
    parts: list[bytes] = []
    copied = pos = cut = skipped = 0
    while pos < size:
        window = min(pos + cap + 1, size)
        newline = data.rfind(b"\n", pos, window)
        if newline >= 0:  # every line in the window ends within it: none is longer than cap
            pos = newline + 1
            continue
        if window == size:  # the last line, shorter than cap + 1 and without its newline
            break
        end = data.find(b"\n", pos + cap)
        end = size if end < 0 else end
        parts += [data[copied : pos + cap], cut_mark(end - pos - cap)]
        cut, skipped = cut + 1, skipped + end - pos - cap
        copied = pos = end  # the newline is copied with what follows
    if not cut:
        return Capped(data)
    parts.append(data[copied:])
    return Capped(b"".join(parts), cut, skipped)


def tail_lines(path: str | Path, max_lines: int, cap: int = LINE_CAP_BYTES) -> list[str]:
    """The last ``max_lines`` lines of a log, each at most ``cap`` bytes (and its mark), at most
    ``TAIL_KEEP_BYTES`` in all.

    Read backwards from the end, a block at a time, at most ``TAIL_SCAN_BYTES``: a long last line
    no longer hides the lines before it (a 50 MB line used to leave the last MiB read inside it,
    and nothing shown). A line whose start lies beyond the scan is shown as a mark.

    Args:
        path: The log file.
        max_lines: How many lines at most.
        cap: Longest line kept whole.

    Returns:
        The lines without their newlines, oldest first; empty when the file cannot be read
        (missing, a FIFO or a device: at once, never blocking).
    """
    if max_lines < 1:
        return []
    try:
        with open_stream(path, "a log") as handle:
            lines = _last_lines(handle, max_lines, cap)
    except (OSError, InputError):
        return []
    return [line.decode("utf-8", errors="replace").rstrip("\r") for line in lines]


def _last_lines(handle: BinaryIO, max_lines: int, cap: int) -> list[bytes]:
    size = handle.seek(0, 2)
    found: deque[bytes] = deque()
    kept = 0
    head = b""  # the first ``cap`` bytes seen so far of the line being read backwards
    length = 0  # that line's length so far
    pos = size
    last = True  # the text after the file's last newline is a line only when it is not empty
    while pos > 0 and size - pos < TAIL_SCAN_BYTES and len(found) < max_lines:
        start = max(0, pos - _BLOCK)
        handle.seek(start)
        block = handle.read(pos - start)
        end = len(block)
        while len(found) < max_lines:
            newline = block.rfind(b"\n", 0, end)
            piece = block[newline + 1 : end]
            head = piece[:cap] if len(piece) >= cap else (piece + head)[:cap]
            length += len(piece)
            if newline < 0:
                break
            if length or not last:
                line = _kept(head, length, cap)
                kept += len(line) + 1
                if found and kept > TAIL_KEEP_BYTES:
                    return list(found)
                found.appendleft(line)
            head, length, end, last = b"", 0, newline, False
        pos = start
    if len(found) < max_lines:
        if pos == 0 and (length or not last):
            found.appendleft(_kept(head, length, cap))  # the file's first line
        elif pos > 0 and length:  # the scan ended inside a line: its start was not read
            found.appendleft(b"[... a line longer than %d bytes: its start not read]" % length)
    return list(found)


def _kept(head: bytes, length: int, cap: int) -> bytes:
    return head + cut_mark(length - cap) if length > cap else head
