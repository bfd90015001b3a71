"""The prompts file: JSONL of OpenAI Batch requests (or bare prompts), scanned once, read lazily.

Opening the file checks that it is a regular file, then scans it once with bounded reads: a line
longer than ``max_line_bytes`` is skipped without being held in memory, and every line is
validated (``tui.pipeline.batch_input``). Bad lines are named with their line number and
reason; blank lines are ignored. Each valid prompt keeps its byte range (12 bytes) and the 64-bit
hash of its id (8 bytes); its text is read back with ``os.pread`` when it is dispatched, so
913,786 prompts cost ~18 MB, not their text. Prompts are numbered 0.. in file order
("positions"); their identity across runs is the id (``tui.pipeline.job_index``).
"""

from __future__ import annotations

import hashlib
import os
import stat
from array import array
from dataclasses import dataclass
from pathlib import Path

from tui.pipeline.batch_input import Prompt, id_hash, parse_prompt, repeated_id

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024
"""Longest prompt line read by default (OpenAI's whole batch input file may be 200 MB)."""
MAX_LINE_BYTES_RANGE = (1024, 1024**3)
"""Allowed ``--max-line-bytes``."""
BAD_LINES_KEPT = 1000
"""Bad lines kept with their reasons (the rest are only counted)."""
_SKIP_CHUNK = 1024 * 1024


class PromptFileError(Exception):
    """The prompts file cannot be used (missing, not a file, unreadable, bad lines refused)."""


@dataclass(frozen=True, slots=True)
class BadLine:
    """One line of the prompts file that is not a prompt."""

    line: int
    """1-based line number, as an editor shows it."""
    reason: str
    """What is wrong with it."""


def _kind(mode: int) -> str:
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISSOCK: "a socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), "not a regular file")


def open_regular(path: Path, field: str) -> int:
    """Open a regular file for reading without blocking on a FIFO; returns the descriptor.

    Args:
        path: the file.
        field: the option that named it, for the error (e.g. ``--prompts``).

    Raises:
        PromptFileError: it is missing, unreadable, or not a regular file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise PromptFileError(f"{field}={path}: no such file") from None
    except OSError as exc:
        raise PromptFileError(f"{field}={path}: cannot read it ({exc.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise PromptFileError(f"{field}={path}: is {_kind(mode)}, not a regular file")
    return fd


class _Scan:
    """State of one pass over the file."""

    def __init__(self) -> None:
        self.starts: array[int] = array("q")
        self.sizes: array[int] = array("I")
        self.ids: array[int] = array("Q")
        self.repeats: array[int] | None = None
        self.bad: list[BadLine] = []
        self.bad_count = 0
        self.lines = 0
        self._seen: set[int] = set()
        self._derived_next: dict[str, int] = {}

    def bad_line(self, reason: str) -> None:
        self.bad_count += 1
        if len(self.bad) < BAD_LINES_KEPT:
            self.bad.append(BadLine(self.lines, reason))

    def add(self, start: int, raw: bytes) -> None:
        parsed = parse_prompt(raw)
        if isinstance(parsed, str):
            self.bad_line(parsed)
            return
        occurrence = 1
        key = id_hash(parsed.custom_id)
        if parsed.derived and key in self._seen:
            # An identical bare line: the next free '-k' id (k counted per content).
            occurrence = self._derived_next.get(parsed.custom_id, 2)
            while (key := id_hash(repeated_id(parsed.custom_id, occurrence))) in self._seen:
                occurrence += 1
            self._derived_next[parsed.custom_id] = occurrence + 1
        elif key in self._seen:
            self.bad_line(f"custom_id {parsed.custom_id!r} repeats an earlier line's")
            return
        self._seen.add(key)
        if occurrence > 1 and self.repeats is None:
            self.repeats = array("I", bytes(4 * len(self.ids)))
        if self.repeats is not None:
            self.repeats.append(occurrence)
        self.starts.append(start)
        self.sizes.append(len(raw))
        self.ids.append(key)


def _scan(fd: int, max_line_bytes: int) -> _Scan:
    scan = _Scan()
    position = 0
    with open(fd, "rb", closefd=False) as handle:
        while raw := handle.readline(max_line_bytes + 1):
            scan.lines += 1
            start, position = position, position + len(raw)
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                # Over-long: skip to the next newline without holding the line.
                while (chunk := handle.readline(_SKIP_CHUNK)) and not chunk.endswith(b"\n"):
                    position += len(chunk)
                position += len(chunk)
                scan.bad_line(f"longer than {max_line_bytes} bytes ({position - start} bytes)")
            elif raw.strip():
                scan.add(start, raw)
    return scan


class PromptFile:
    """Lazily read prompts of a validated JSONL file."""

    def __init__(self, path: Path, fd: int, scan: _Scan) -> None:
        """Use :meth:`open`."""
        self.path = path
        """The JSONL file."""
        self.bad_lines = scan.bad
        """Bad lines (skipped), the first ``BAD_LINES_KEPT`` of them."""
        self.bad_count = scan.bad_count
        """How many lines were bad."""
        self.lines = scan.lines
        """Lines in the file (prompts, bad and blank ones)."""
        self.ids = scan.ids
        """The 64-bit hash of each prompt's id, by position."""
        self.digest = hashlib.blake2b(scan.ids.tobytes(), digest_size=16).digest()
        """Fingerprint of the file's ids in order (equal digests: the same job, same order)."""
        self._starts = scan.starts
        self._sizes = scan.sizes
        self._repeats = scan.repeats
        self._fd = fd
        st = os.fstat(fd)
        self._scanned = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    @classmethod
    def open(
        cls,
        path: Path,
        on_bad_line: str = "skip",
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> PromptFile:
        """Scan and validate the file.

        Args:
            path: the JSONL prompts file (a regular file).
            on_bad_line: 'skip' (report and skip bad lines) or 'refuse' (raise on any).
            max_line_bytes: longest line accepted; longer ones are bad lines.

        Returns:
            The opened file.

        Raises:
            PromptFileError: the file is missing, unreadable or not a regular file, or has bad
                lines and on_bad_line is 'refuse'.
        """
        if on_bad_line not in ("skip", "refuse"):
            raise PromptFileError(f"--on-bad-line={on_bad_line!r}: allowed values are skip, refuse")
        fd = open_regular(path, "--prompts")
        try:
            scan = _scan(fd, max_line_bytes)
        except OSError as exc:
            os.close(fd)
            raise PromptFileError(f"--prompts={path}: cannot read it ({exc.strerror})") from None
        except BaseException:
            os.close(fd)
            raise
        if scan.bad_count and on_bad_line == "refuse":
            os.close(fd)
            shown = "; ".join(f"line {b.line}: {b.reason}" for b in scan.bad[:10])
            more = f" (and {scan.bad_count - 10} more)" if scan.bad_count > 10 else ""
            raise PromptFileError(
                f"--prompts={path}: {scan.bad_count} bad line(s): {shown}{more}; "
                "fix them or pass --on-bad-line skip"
            )
        return cls(path, fd, scan)

    def __len__(self) -> int:
        """Number of valid prompts (positions 0..len-1)."""
        return len(self.ids)

    @property
    def valid_count(self) -> int:
        """Number of valid prompts (the job's total)."""
        return len(self.ids)

    def read(self, position: int) -> Prompt:
        """Read back the prompt at ``position`` (one pread), with its final id.

        Raises:
            PromptFileError: the file changed under the running pipeline (the line no longer
                holds the prompt that was scanned).
        """
        raw = os.pread(self._fd, self._sizes[position], self._starts[position])
        parsed = parse_prompt(raw)
        if not isinstance(parsed, str) and parsed.derived and self._repeats is not None:
            occurrence = self._repeats[position]
            if occurrence > 1:
                custom_id = repeated_id(parsed.custom_id, occurrence)
                parsed = Prompt(custom_id, parsed.url, parsed.body, derived=True)
        if isinstance(parsed, str) or id_hash(parsed.custom_id) != self.ids[position]:
            raise PromptFileError(
                f"--prompts={self.path} changed while the job ran: prompt {position + 1} is no "
                "longer where it was"
            )
        return parsed

    def changed(self) -> str | None:
        """Whether the file is no longer the one scanned, in words (None: it is the same).

        Rewritten in place (its size or modification time moved: the lines read back now are
        not the ones scanned), or its name now names another file (replaced: a resume will
        read that one). Two ``stat`` calls: cheap enough for once a second.
        """
        dev, ino, size, mtime = self._scanned
        now = os.fstat(self._fd)
        if (now.st_size, now.st_mtime_ns) != (size, mtime):
            return (
                f"--prompts={self.path} was rewritten while the job ran (size {size} -> "
                f"{now.st_size} bytes)"
            )
        try:
            named = os.stat(self.path)
        except OSError as exc:
            return f"--prompts={self.path} is gone while the job ran ({exc.strerror or exc})"
        if (named.st_dev, named.st_ino) != (dev, ino):
            return f"--prompts={self.path} was replaced by another file while the job ran"
        return None

    def close(self) -> None:
        """Close the file descriptor."""
        os.close(self._fd)
