"""Fast ingestion of log bytes: counts, the latest batch stats, and every rare event.

Per-line Python tops out far below ``grep``; here a chunk of whole lines is scanned by C code only.
In steady state a server's log holds three kinds of frequent lines (decode, prefill, HTTP access),
each with a fixed marker. ``bytes.count`` of the markers and of ``\\n`` says whether a range holds
anything else: if the marker counts add up to the line count, the range has no rare line and
nothing in it is parsed. Otherwise the range is halved (at a line boundary) and each half checked
again, down to a few KiB, where every line goes to :func:`~tui.logs.parser.parse_line`. Only the
last decode and the last prefill line of a chunk (found with ``bytes.rfind``) are parsed besides.
So the cost is four counting passes over quiet stretches, and :func:`parse_line` stays the single
judge of what a line is: the result equals parsing every line (a test checks it).

Known limit: a line that carries a frequent marker *and* is a rare event (an error text quoting
``Decode batch`` or `` HTTP/``) is taken for a frequent line; no SGLang version prints one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tui.inputs import open_stream
from tui.logs import events as ev
from tui.logs.events import LogEvent
from tui.logs.parser import parse_line

_DECODE = b"Decode batch"
_PREFILL = b"fill batch"  # "Prefill batch" and v0.1 "new fill batch"
_ACCESS = b" HTTP/"  # uvicorn access lines: '"POST /generate HTTP/1.1" 200 OK'
_LEAF_BYTES = 4096
"""Dirty ranges at most this long are parsed line by line."""


@dataclass(frozen=True, slots=True)
class IngestSummary:
    """What a run of complete log lines contained."""

    lines: int = 0
    """Complete lines seen."""
    decode_lines: int = 0
    """Lines containing ``Decode batch``."""
    prefill_lines: int = 0
    """Lines containing ``Prefill batch`` (or v0.1 ``new fill batch``)."""
    latest_decode: LogEvent | None = None
    """The last decode event, fully parsed."""
    latest_prefill: LogEvent | None = None
    """The last prefill event, fully parsed."""
    rare: tuple[LogEvent, ...] = ()
    """Every event of a kind in :data:`~tui.logs.events.RARE_KINDS`, in file order."""

    def then(self, later: IngestSummary) -> IngestSummary:
        """Combine with the summary of the lines that came right after.

        Args:
            later: The summary of the next chunk.

        Returns:
            One summary covering both chunks.
        """
        return IngestSummary(
            lines=self.lines + later.lines,
            decode_lines=self.decode_lines + later.decode_lines,
            prefill_lines=self.prefill_lines + later.prefill_lines,
            latest_decode=later.latest_decode or self.latest_decode,
            latest_prefill=later.latest_prefill or self.latest_prefill,
            rare=self.rare + later.rare,
        )


Buffer = bytes | bytearray


def _line_at(data: Buffer, pos: int, hi: int) -> tuple[int, int]:
    start = data.rfind(b"\n", 0, pos) + 1
    end = data.find(b"\n", pos, hi)
    return start, hi if end < 0 else end


def _last_event(
    data: Buffer, lo: int, hi: int, marker: bytes, kind: str, last_line: int
) -> LogEvent | None:
    limit = hi
    while True:
        pos = data.rfind(marker, lo, limit)
        if pos < 0:
            return None
        start, end = _line_at(data, pos, hi)
        # Numbered from the end: only the short tail after the line is counted.
        number = last_line - data.count(b"\n", end, hi) + 1 if last_line else 0
        event = parse_line(bytes(data[start:end]).decode("utf-8", errors="replace"), number)
        if event is not None and event.kind == kind:
            return event
        limit = start


def _parse_range(data: Buffer, lo: int, hi: int, line_no: int, rare: list[LogEvent]) -> None:
    for offset, raw in enumerate(bytes(data[lo:hi]).split(b"\n")[:-1]):
        event = parse_line(
            raw.decode("utf-8", errors="replace"), line_no + offset if line_no else 0
        )
        if event is not None and event.kind in ev.RARE_KINDS:
            rare.append(event)


def _scan(
    data: Buffer, lo: int, hi: int, lines: int, frequent: int, line_no: int, rare: list[LogEvent]
) -> None:
    """Collect the rare events of ``data[lo:hi]``: whole lines, ``lines`` of them."""
    if lines == frequent:
        return
    mid = data.find(b"\n", (lo + hi) // 2, hi) + 1
    if hi - lo <= _LEAF_BYTES or mid <= lo or mid >= hi:
        _parse_range(data, lo, hi, line_no, rare)
        return
    left = data.count(b"\n", lo, mid)
    for a, b, n, first in ((lo, mid, left, line_no), (mid, hi, lines - left, line_no + left)):
        count = data.count(_DECODE, a, b) + data.count(_PREFILL, a, b) + data.count(_ACCESS, a, b)
        _scan(data, a, b, n, count, first if line_no else 0, rare)


def ingest_range(
    data: Buffer, lo: int, hi: int, first_line: int = 0, *, last_prefill: bool = True
) -> IngestSummary:
    """Summarise ``data[lo:hi]``, which must hold whole lines each ending in ``\\n``.

    Args:
        data: The buffer (not copied).
        lo: Start offset, at a line start.
        hi: End offset, just after a ``\\n``.
        first_line: 1-based number of the first line, or 0 when unknown (events get 0).
        last_prefill: Parse the last prefill line (``latest_prefill``); False leaves it None
            and only counts them (the console's follower reads no prefill field: one parse
            less per server per poll).

    Returns:
        The counts, the last decode and prefill events, and every rare event in order.
    """
    lines = data.count(b"\n", lo, hi)
    decode = data.count(_DECODE, lo, hi)
    prefill = data.count(_PREFILL, lo, hi)
    access = data.count(_ACCESS, lo, hi)
    rare: list[LogEvent] = []
    _scan(data, lo, hi, lines, decode + prefill + access, first_line, rare)
    last_line = first_line + lines - 1 if first_line else 0
    return IngestSummary(
        lines=lines,
        decode_lines=decode,
        prefill_lines=prefill,
        latest_decode=_last_event(data, lo, hi, _DECODE, ev.DECODE, last_line) if decode else None,
        latest_prefill=(
            _last_event(data, lo, hi, _PREFILL, ev.PREFILL, last_line)
            if prefill and last_prefill
            else None
        ),
        rare=tuple(rare),
    )


def ingest_bytes(data: bytes, first_line: int = 0, *, last_prefill: bool = True) -> IngestSummary:
    """Summarise a chunk of complete lines (what :meth:`LogTailer.read_new_bytes` returns).

    Args:
        data: Whole lines (a last line without ``\\n`` is taken as complete).
        first_line: 1-based number of the chunk's first line, or 0 when unknown (events get 0).
        last_prefill: Parse the last prefill line (see :func:`ingest_range`).

    Returns:
        The counts, the last decode and prefill events, and every rare event in order.
    """
    if data and not data.endswith(b"\n"):
        data += b"\n"
    return ingest_range(data, 0, len(data), first_line, last_prefill=last_prefill)


MAX_LINE_BYTES = 16 * 1024 * 1024
"""Longest line held in memory; a longer one (no SGLang line is) is skipped to its end."""


def ingest_file(path: str | Path, chunk_bytes: int = 1024 * 1024) -> IngestSummary:
    """Summarise a whole file, reading it in chunks of about ``chunk_bytes``.

    Args:
        path: The log file.
        chunk_bytes: Read size (>= 1); 1 MiB keeps each chunk's counting passes in cache.

    Returns:
        The summary of every line, with 1-based line numbers.
    """
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}")
    total = IngestSummary()
    # One reused buffer: fresh 1 MiB bytes objects per chunk cost page faults, not just copies.
    buf = bytearray(chunk_bytes)
    view = memoryview(buf)
    held, next_line = 0, 1
    skipping = False  # inside a line longer than MAX_LINE_BYTES: no log line, dropped
    with open_stream(path, "a log") as handle:
        while True:
            if held == len(buf) and len(buf) >= MAX_LINE_BYTES:
                held, skipping = 0, True
            elif held == len(buf):  # a single line longer than the buffer: grow it
                view.release()  # a bytearray with an exported view cannot grow
                buf.extend(bytes(len(buf)))
                view = memoryview(buf)
            got = handle.readinto(view[held:])
            if not got:
                break
            filled = held + got
            if skipping:
                end = buf.find(b"\n", 0, filled)
                if end < 0:
                    held = 0
                    continue
                next_line, skipping = next_line + 1, False
                held = filled - end - 1
                buf[:held] = buf[end + 1 : filled]
                continue
            cut = buf.rfind(b"\n", 0, filled) + 1
            if cut:
                part = ingest_range(buf, 0, cut, next_line)
                next_line += part.lines
                total = total.then(part)
            held = filled - cut
            buf[:held] = buf[cut:filled]
    view.release()
    if held and not skipping:
        total = total.then(ingest_bytes(bytes(buf[:held]), next_line))
    return total
