"""Searching a server's whole log and its rotations, streamed: memory stays bounded whatever the
size (pure: no Textual; blocking, so run it in a thread worker).

A relaunch rotates the log (``tui.control.launch.rotate_log``): ``x.log`` is the newest launch,
``x.log.1`` the one before, up to ``x.log.5``. The search reads them oldest first, in blocks of
``BLOCK_BYTES``; a block in which the pattern does not occur at all is skipped with one regex
scan (only its newlines are counted, for the line numbers), so a 10 GB log costs a pass over its
bytes, never its size in memory. At most ``MAX_HITS`` hits are kept (the newest: the end of a log
is what an operator looks for), and all are counted.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tui.inputs import InputError, open_stream
from tui.ops.types import LOG_KEEP

BLOCK_BYTES = 4 * 1024 * 1024
"""Bytes read at a time."""
MAX_HITS = 2000
"""Hits kept (the newest); the others are only counted."""
MAX_LINE_CHARS = 2000
"""A hit's text is cut there (a line of megabytes stays a line of a screen)."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One matching line."""

    path: Path
    """The file it is in."""
    line: int
    """Its 1-based line number in that file."""
    text: str
    """The line (cut at ``MAX_LINE_CHARS``)."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What a search found."""

    hits: tuple[Hit, ...]
    """The newest ``MAX_HITS`` hits, oldest first."""
    total: int
    """Every hit, kept or not."""
    files: tuple[Path, ...]
    """The files read, oldest first."""
    scanned_bytes: int
    """Bytes read."""
    cancelled: bool = False
    """True when the search was stopped before the end (what was found so far is here)."""


def log_files(path: Path, keep: int = LOG_KEEP) -> list[Path]:
    """The log and its rotations that exist, oldest first: ``x.log.5`` ... ``x.log.1``, ``x.log``.

    Args:
        path: The current log.
        keep: How many rotations the launcher keeps.

    Returns:
        The existing files.
    """
    candidates = [path.with_name(f"{path.name}.{n}") for n in range(keep, 0, -1)] + [path]
    return [p for p in candidates if p.is_file()]


def search_logs(
    files: list[Path],
    include: re.Pattern[str],
    exclude: re.Pattern[str] | None = None,
    *,
    max_hits: int = MAX_HITS,
    cancelled: Callable[[], bool] = lambda: False,
    progress: Callable[[int, int], None] | None = None,
    keep: Callable[[str], bool] | None = None,
) -> SearchResult:
    """Every line of ``files`` that ``include`` finds and ``exclude`` does not (and ``keep``
    keeps, when given).

    Args:
        files: The files, oldest first (``log_files``).
        include: The search pattern.
        exclude: Lines it finds are left out.
        max_hits: Hits kept (the newest).
        cancelled: Polled between blocks; True stops the search.
        progress: Called with (bytes read, bytes in all files) after each block.
        keep: A last say on each line ``include`` found (the jump keys' line kinds, whose
            ``include`` is only their anchors).

    Returns:
        The hits and the counts.
    """
    # The block pre-check reads many lines at once: ^ and $ must still mean a line's ends
    # (\A and \Z cannot: such a pattern goes line by line).
    whole = "\\A" not in include.pattern and "\\Z" not in include.pattern
    block_pattern = re.compile(include.pattern, include.flags | re.MULTILINE) if whole else None
    sizes = {}
    for path in files:
        try:
            sizes[path] = path.stat().st_size
        except OSError:
            continue
    total_bytes = sum(sizes.values())
    kept: deque[Hit] = deque(maxlen=max_hits)
    found = 0
    scanned = 0
    for path in sizes:
        try:
            handle = open_stream(path, "a log")  # a FIFO or device is skipped, never waited on
        except (OSError, InputError):
            continue
        with handle:
            line_no = 0
            carry = b""
            while True:
                if cancelled():
                    return SearchResult(tuple(kept), found, tuple(sizes), scanned, True)
                block = handle.read(BLOCK_BYTES)
                scanned += len(block)
                data = carry + block
                if block:
                    cut = data.rfind(b"\n") + 1
                    if cut == 0 and len(data) < 4 * BLOCK_BYTES:
                        carry = data  # no newline yet: wait for one (bounded below)
                        continue
                    data, carry = (data[:cut], data[cut:]) if cut else (data, b"")
                else:
                    carry = b""
                if data:
                    found += _scan(data, path, line_no, include, exclude, block_pattern, kept, keep)
                    line_no += data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
                if progress is not None:
                    progress(scanned, total_bytes)
                if not block:
                    break
    return SearchResult(tuple(kept), found, tuple(sizes), scanned)


def _scan(
    data: bytes,
    path: Path,
    first_line: int,
    include: re.Pattern[str],
    exclude: re.Pattern[str] | None,
    block_pattern: re.Pattern[str] | None,
    kept: deque[Hit],
    keep: Callable[[str], bool] | None = None,
) -> int:
    """Find the hits in a block of whole lines; return how many (the kept ones go to ``kept``)."""
    text = data.decode("utf-8", errors="replace")
    if block_pattern is not None and block_pattern.search(text) is None:
        return 0  # one scan of the block: the common case of a rare pattern
    found = 0
    lines = text.split("\n")  # only newlines: the numbers are the file's (splitlines cuts more)
    if lines and lines[-1] == "":
        lines.pop()
    for number, raw in enumerate(lines, start=first_line + 1):
        line = raw.rstrip("\r")
        if include.search(line) is None:
            continue
        if exclude is not None and exclude.search(line) is not None:
            continue
        if keep is not None and not keep(line):
            continue
        found += 1
        kept.append(Hit(path, number, line[:MAX_LINE_CHARS]))
    return found
