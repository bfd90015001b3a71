"""The log viewer's search of the whole log and its rotations (a mixin of ``LogPanel``): the
operator's ``s``, and the previous-line jumps (``E``, ``A``) when the line is not in the lines
the live view keeps. Read in a thread worker, streamed (``tui.ui.detail.log_search``); the hits
list in the results view, the newest at the bottom.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.message import Message
from textual.widget import Widget
from textual.worker import get_current_worker

from tui.ui.detail.log_filter import LineKind, line_kind
from tui.ui.detail.log_search import Hit, SearchResult, log_files, search_logs
from tui.ui.detail.log_view import LogView


class SearchProgress(Message):
    """The search worker read ``scanned`` of ``total`` bytes."""

    def __init__(self, scanned: int, total: int) -> None:
        self.scanned = scanned
        """Bytes read."""
        self.total = total
        """Bytes in all the files."""
        super().__init__()


class SearchDone(Message):
    """The search worker finished (or was stopped)."""

    def __init__(self, head: str, result: SearchResult, kind: LineKind | None = None) -> None:
        self.head = head
        """What was searched for, as the results' title starts: ``Search /x/``."""
        self.result = result
        """What it found."""
        self.kind = kind
        """The line kind a jump key searched the whole log for (None: the operator's ``s``)."""
        super().__init__()


def hit_line(hit: Hit) -> str:
    """A search hit as the results list shows it: 'x.log.2:1234: the line'."""
    return f"{hit.path.name}:{hit.line}: {hit.text}"


class WholeLogSearch:
    """The search's half of ``LogPanel``."""

    log_path: str | None
    results: SearchResult | None
    _last_progress: float

    if TYPE_CHECKING:  # provided by the panel

        @property
        def live(self) -> LogView: ...

        def action_close_mode(self) -> None: ...

    def _results_view(self) -> LogView:
        assert isinstance(self, Widget)
        return self.query_one("#search-results", LogView)

    def _show_results(self, head: str) -> None:
        """The results view instead of the live log, saying the search reads."""
        results = self._results_view()
        results.clear()
        results.title = f"{head}: reading..."
        results.display = True
        self.live.display = False
        results.focus()
        self._last_progress = 0.0

    @work(thread=True, exclusive=True, group="log-search", exit_on_error=False)
    def _search(
        self,
        path: Path,
        head: str,
        pattern: re.Pattern[str],
        exclude: re.Pattern[str] | None,
        kind: LineKind | None = None,
    ) -> None:
        worker = get_current_worker()

        def progress(scanned: int, total: int) -> None:
            now = time.monotonic()
            if now - self._last_progress >= 0.2:
                self._last_progress = now
                self._post(SearchProgress(scanned, total))

        result = search_logs(
            log_files(path),
            pattern,
            exclude,
            cancelled=lambda: worker.is_cancelled,
            progress=progress,
            keep=None if kind is None else (lambda line: line_kind(line) is kind),
        )
        self._post(SearchDone(head, result, kind))

    def on_search_progress(self, message: SearchProgress) -> None:
        """Say how far the search is."""
        share = message.scanned / message.total if message.total else 1.0
        results = self._results_view()
        results.title = results.title.split(":")[0] + f": reading... {share:.0%}"
        results.refresh()

    def on_search_done(self, message: SearchDone) -> None:
        """List the hits (the newest at the bottom) and say what was read."""
        self.results = message.result
        result = message.result
        results = self._results_view()
        files = len(result.files)
        if message.kind is not None and result.total == 0 and not result.cancelled:
            self.action_close_mode()  # back to the live log: there is none anywhere
            plural = "s" if files != 1 else ""
            assert isinstance(self, Widget)
            self.notify(f"no {message.kind} line in the whole log ({files} file{plural})")
            return
        listed = len(result.hits)
        kept = f", the newest {listed:,} listed" if listed < result.total else ""
        stopped = " (stopped)" if result.cancelled else ""
        results.title = (
            f"{message.head}: {result.total:,} hits in {files} "
            f"file{'s' if files != 1 else ''} ({result.scanned_bytes / 2**20:,.1f} MiB){kept}"
            f"{stopped}"
        )
        results.clear()
        results.append_lines([hit_line(hit) for hit in result.hits])
        results.following = True  # the newest hit at the bottom, in view

    def _post(self, message: Message) -> None:
        assert isinstance(self, Widget)
        self.post_message(message)

    def _log_reaches_before_the_view(self) -> bool:
        """Whether the log (its rotations, or its lines before those kept) holds more than the
        live view: only then can a line above be outside it."""
        if self.log_path is None:
            return False
        files = log_files(Path(self.log_path))
        if len(files) > 1:
            return True
        try:
            size = Path(self.log_path).stat().st_size
        except OSError:
            return False
        kept = sum(len(line.encode()) + 1 for line in self.live.buffer.lines)
        return self.live.buffer.first > 0 or kept < size
