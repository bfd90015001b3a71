"""One server's log as the monitor sees it: the log layer's tailer, chunk ingest and LogState.

Only the current launch counts. A ``server_args`` line opens a launch and :class:`LogState` starts
over on it; a rotated or truncated file (``tui.control`` renames the old log to ``.1`` before a
relaunch) starts it over too, so the previous launch's allocations and errors vanish the moment
the new file appears, before the new server has printed anything.
"""

from __future__ import annotations

from pathlib import Path

from tui.logs import events as ev
from tui.logs.ingest import ingest_bytes
from tui.logs.parser import parse_line
from tui.logs.state import LogState, LogView
from tui.logs.tailer import DEFAULT_ATTACH_BYTES, LogTailer

_LAUNCH = b"server_args"

EMPTY_VIEW: LogView = LogState().view()
"""The view of a log with nothing read yet."""


def _from_last_launch(data: bytes) -> bytes:
    """The tail of ``data`` from its last ``server_args`` line (all of it when there is none).

    Why: an ingest summary carries only the chunk's *last* decode line, which LogState applies
    after the chunk's rare events; if that decode line belonged to the launch before the chunk's
    ``server_args``, it would leak into the new launch. Cutting first also skips parsing the
    older launch's lines.
    """
    limit = len(data)
    while True:
        pos = data.rfind(_LAUNCH, 0, limit)
        if pos < 0:
            return data
        start = data.rfind(b"\n", 0, pos) + 1
        end = data.find(b"\n", pos)
        line = data[start : end if end >= 0 else len(data)].decode("utf-8", errors="replace")
        event = parse_line(line)
        if event is not None and event.kind == ev.SERVER_ARGS:
            return data[start:]
        limit = start


class ServerLog:
    """Follows one server's log file and keeps its current launch's state. Blocking (file reads)."""

    def __init__(self, path: str | Path, attach_bytes: int = DEFAULT_ATTACH_BYTES) -> None:
        """Args:
        path: The log file (it may not exist yet).
        attach_bytes: How much of an existing log's end to read on attach.
        """
        self.path = Path(path)
        """The file followed."""
        self.launches = 0
        """``server_args`` lines seen (launches, as far as the log was read)."""
        self._tailer = LogTailer(self.path, attach_bytes=attach_bytes)
        self._state = LogState()
        self._view = self._state.view()

    def poll(self) -> LogView:
        """Read what is new and return the current launch's state.

        Returns:
            An immutable view (empty while the log does not exist).
        """
        tailer = self._tailer
        before = (tailer.rotations, tailer.truncations)
        data = tailer.read_new_bytes()
        fresh = (tailer.rotations, tailer.truncations) != before
        if fresh:
            # A new file: what the old one still held is the previous launch's. Start over and
            # read the new file now rather than a poll later.
            self._state.reset()
            data = tailer.read_new_bytes()
        if data:
            # The view reads no prefill field, only their count (progress, tui.fleet.liveness).
            summary = ingest_bytes(_from_last_launch(data), last_prefill=False)
            self.launches += sum(1 for e in summary.rare if e.kind == ev.SERVER_ARGS)
            self._state.apply_summary(summary)
        if data or fresh:
            self._view = self._state.view()
        return self._view

    def close(self) -> None:
        """Close the log file."""
        self._tailer.close()
