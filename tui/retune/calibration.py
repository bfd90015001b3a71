"""The preflight's calibration from a server's log: read once, then only what was appended.

A server's log grows all the time (a Decode line every few iterations), but the sizes the
preflight calibrates on are printed once per launch (weights, Mamba cache, KV cache). Reading and
parsing the whole log for every prediction cost seconds on a long run (the tuning form asked for
one per keystroke). Here:

- only the lines that can be allocation lines are parsed: the file is searched in large chunks
  for the parser's own anchors (``tui.logs.parser.RULES``) and only the matching lines go through
  ``parse_line``, so the result is the same as parsing every line;
- ``CalibrationCache`` remembers, per log file (device and inode), where its scan stopped and
  what the newest launch printed so far; the next call reads only the bytes appended since. A
  rotated, replaced or truncated log is scanned again from its start.

Blocking file I/O: call from a thread.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

from tui.inputs import InputError, open_stream
from tui.logs import events as ev
from tui.logs.parser import parse_line
from tui.sglang.plan_types import Calibration

CHUNK_BYTES = 4 * 1024 * 1024
"""Bytes read per step of a scan (memory stays bounded whatever the log's size)."""
MAX_LINE_BYTES = 1024 * 1024
"""A longer line is skipped unread: no allocation line is that long (memory stays bounded)."""

_ANCHORS = re.compile(rb"Mamba Cache|V Cache|Load weight|_args")
# ("Load weight" also finds ``Load weight begin``: the free memory measured before the weights)
"""The parser's anchors of the kinds a calibration reads (Mamba cache, KV cache, weights, and
``server_args``, which opens each launch). A line without one cannot be of these kinds."""


@dataclass
class LaunchSizes:
    """The allocation lines of the newest launch seen so far in one log (mutable scan state)."""

    kv: list[ev.LogEvent] = field(default_factory=list)
    """KV cache lines of the launch: the target's first, the draft model's second."""
    mamba: ev.LogEvent | None = None
    """The launch's (last) Mamba cache line."""
    weights: ev.LogEvent | None = None
    """The launch's first weights line (the target model's)."""
    weights_begin: ev.LogEvent | None = None
    """The launch's first ``Load weight begin`` line (the free memory it measured)."""

    def feed(self, event: ev.LogEvent) -> None:
        """Take one parsed line, in file order."""
        if event.kind == ev.SERVER_ARGS:  # a new launch: forget the previous one's lines
            self.kv, self.mamba, self.weights, self.weights_begin = [], None, None, None
        elif event.kind == ev.KV_CACHE:
            self.kv.append(event)
        elif event.kind == ev.MAMBA_CACHE:
            self.mamba = event
        elif event.kind == ev.WEIGHTS and self.weights is None:
            self.weights = event
        elif event.kind == ev.WEIGHTS_BEGIN and self.weights_begin is None:
            self.weights_begin = event

    def calibration(self) -> Calibration | None:
        """The sizes printed so far, or None when the launch printed none yet."""
        if not self.kv and self.mamba is None and self.weights is None:
            return None
        target = self.kv[0] if self.kv else None
        draft = self.kv[1] if len(self.kv) > 1 else None
        tokens = _num(target, "tokens")
        slots = _num(self.mamba, "max_mamba_cache_size")
        return Calibration.from_log_values(
            kv_tokens=int(tokens) if tokens is not None else None,
            k_gb=_num(target, "k_gb"),
            v_gb=_num(target, "v_gb"),
            draft_k_gb=_num(draft, "k_gb"),
            draft_v_gb=_num(draft, "v_gb"),
            mamba_slots=int(slots) if slots is not None else None,
            conv_gb=_num(self.mamba, "conv_gb"),
            ssm_gb=_num(self.mamba, "ssm_gb"),
            weights_gb=_num(self.weights, "mem_usage_gb"),
            pre_gb=_num(self.weights_begin, "avail_mem_gb"),
        )


def _num(event: ev.LogEvent | None, name: str) -> float | None:
    value = event.get(name) if event is not None else None
    return float(value) if isinstance(value, int | float) else None


def feed_chunk(sizes: LaunchSizes, chunk: bytes) -> None:
    """Parse the candidate lines of ``chunk`` (whole lines only) into ``sizes``.

    Args:
        sizes: The scan state, updated in place.
        chunk: Complete lines of the log, each ending in a newline (the last one may not).
    """
    position = 0
    while (match := _ANCHORS.search(chunk, position)) is not None:
        start = chunk.rfind(b"\n", 0, match.start()) + 1
        end = chunk.find(b"\n", match.end())
        end = len(chunk) if end < 0 else end
        event = parse_line(chunk[start:end].decode("utf-8", errors="replace"))
        if event is not None:
            sizes.feed(event)
        position = end + 1


@dataclass
class _FileScan:
    """How far one log file was scanned, and what it printed."""

    ident: tuple[int, int]
    """(device, inode) of the file scanned: another file at the path starts a new scan."""
    offset: int = 0
    """Bytes scanned (always just after a newline)."""
    sizes: LaunchSizes = field(default_factory=LaunchSizes)
    """The newest launch's allocation lines so far."""


class CalibrationCache:
    """Calibrations of log files, each brought up to date by reading only what was appended.

    Thread-safe: the console's preflights run in worker threads, possibly two at once.
    """

    def __init__(self, chunk_bytes: int = CHUNK_BYTES) -> None:
        """Args:
        chunk_bytes: Bytes read per step (>= 1).
        """
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}")
        self.chunk_bytes = chunk_bytes
        """Bytes read per step."""
        self._scans: dict[str, _FileScan] = {}
        self._lock = threading.Lock()

    def get(self, path: str | Path) -> Calibration | None:
        """The calibration of the newest launch in ``path``.

        Args:
            path: An SGLang (or simulated) server log.

        Returns:
            The calibration, or None when the newest launch printed no allocation line yet,
            or the file cannot be read.
        """
        key = str(path)
        with self._lock:
            try:
                # A FIFO or device at a log's path is refused at once, never waited on.
                with open_stream(path, "a server log") as handle:
                    stat = os.fstat(handle.fileno())
                    ident = (stat.st_dev, stat.st_ino)
                    scan = self._scans.get(key)
                    if scan is None or scan.ident != ident or stat.st_size < scan.offset:
                        scan = _FileScan(ident)  # a new file at the path, or truncated
                        self._scans[key] = scan
                    tail = self._advance(handle, scan, stat.st_size)
            except (OSError, InputError):
                self._scans.pop(key, None)
                return None
            if not tail:
                return scan.sizes.calibration()
            # The last line has no newline yet: count it now (a finished log may end so), but
            # keep it out of the scan state, so it is read again whole once it is complete.
            sizes = replace(scan.sizes, kv=list(scan.sizes.kv))
            feed_chunk(sizes, tail)
            return sizes.calibration()

    def _advance(self, handle: BinaryIO, scan: _FileScan, size: int) -> bytes:
        """Scan the complete lines from ``scan.offset`` to ``size``; return the partial tail."""
        handle.seek(scan.offset)
        carry = b""
        while scan.offset + len(carry) < size:
            data = handle.read(min(self.chunk_bytes, size - scan.offset - len(carry)))
            if not data:
                break
            data = carry + data
            cut = data.rfind(b"\n") + 1  # a line still being written waits for the next call
            feed_chunk(scan.sizes, data[:cut])
            scan.offset += cut
            carry = data[cut:]
            if len(carry) > MAX_LINE_BYTES:  # no allocation line is that long: skip it
                scan.offset += len(carry)
                carry = b""
        return carry


def scan_calibration(path: str | Path) -> Calibration | None:
    """One full scan of ``path`` (what ``CalibrationCache.get`` returns on its first call).

    Args:
        path: An SGLang (or simulated) server log.

    Returns:
        The calibration of its newest launch, or None (no allocation lines, or unreadable).
    """
    return CalibrationCache().get(path)
