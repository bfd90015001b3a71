"""The detail screen's log viewer: the live log, its filters, a search of the whole file and its
rotations, jumps to errors and allocations, and the operator's ``$PAGER``.

The live log is read in a thread worker: once, the newest lines (the screen's ``LogTail``),
then only what is appended (``tui.logs.tailer.LogTailer``, through rotations: a relaunch shows
as a marked line and the new launch's log after it). Escape closes the viewer's own modes first
(a field being typed in, the search results, the filters), and only then the screen.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from textual import on, work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Input, Label
from textual.worker import Worker, WorkerState

from tui.logs.tailer import LogTailer
from tui.ui.detail.log_buffer import SCROLLBACK
from tui.ui.detail.log_filter import (
    FilterError,
    LineFilter,
    LineKind,
    compile_filter,
    kind_anchors,
)
from tui.ui.detail.log_panel_search import WholeLogSearch, hit_line
from tui.ui.detail.log_search import SearchResult
from tui.ui.detail.log_view import LogView
from tui.ui.detail.pager import PagerError, pager_argv

LogTail = Callable[[Path, int], list[str]]
"""Returns the newest lines of a log (at most so many). Blocking: called from a thread."""

READ_BYTES = 4 * 1024 * 1024
"""Most bytes one refresh reads of a growing log (the rest comes at the next)."""
NEW_FILE_BYTES = 1024 * 1024
"""How much of a log that appeared after the viewer opened is read at first."""
ROTATED = "──── the log was rotated (a new launch); the old one is now {name}.1 ────"
"""The line shown where a relaunch started a new log."""


class LogRead(Message):
    """The tail worker read lines of the live log."""

    def __init__(self, lines: tuple[str, ...], reset: bool) -> None:
        self.lines = lines
        """The lines, oldest first."""
        self.reset = reset
        """They replace what the view holds (the first read, or another file)."""
        super().__init__()


class LogPanel(Vertical, WholeLogSearch):
    """The viewer. The screen sets ``log_path`` (from its snapshot); lines are read from it."""

    DEFAULT_CSS = """
    LogPanel {
        height: 1fr;
    }
    LogPanel #log-fields {
        height: 1;
    }
    LogPanel #log-fields Input {
        width: 1fr;
        height: 1;
        border: none;
        padding: 0 1;
        margin: 0 1 0 0;
    }
    LogPanel #log-fields Input.-invalid {
        background: $error 30%;
    }
    LogPanel #log-search {
        display: none;
    }
    LogPanel #log-error {
        color: $error;
        height: auto;
        width: 100%;
        display: none;
    }
    LogPanel #search-results {
        display: none;
    }
    """

    BINDINGS = [
        Binding("escape", "close_mode", "Back / close", id="log.close"),
        Binding("slash", "focus_field('log-filter')", "Filter (regex)", id="log.filter"),
        Binding("x", "focus_field('log-exclude')", "Exclude (regex)", id="log.exclude"),
        Binding("s", "search", "Search all files", id="log.search"),
        Binding("space", "pause", "Pause / follow", id="log.pause"),
        Binding("w", "toggle_wrap", "Wrap", id="log.wrap"),
        Binding("e", "jump('error', 1)", "Next error", id="log.next_error"),
        Binding("E", "jump('error', -1)", "Previous error", id="log.prev_error", show=False),
        Binding("a", "jump('allocation', 1)", "Next allocation", id="log.next_alloc"),
        Binding(
            "A", "jump('allocation', -1)", "Previous allocation", id="log.prev_alloc", show=False
        ),
        Binding("p", "pager", "Open in $PAGER", id="log.pager"),
    ]

    def __init__(self, log_tail: LogTail, refresh_s: float = 1.0, *, id: str | None = None) -> None:
        """Args:
        log_tail: Reads the newest lines of a log (the first read; blocking, in a thread).
        refresh_s: Seconds between reads of what was appended.
        id: The widget's id.
        """
        super().__init__(id=id)
        self.log_tail = log_tail
        """The first read's source."""
        self.refresh_s = refresh_s
        """Seconds between reads."""
        self.log_path: str | None = None
        """The log shown (set by the screen from its snapshot)."""
        self.results: SearchResult | None = None
        """The last search's hits."""
        self._tailer: LogTailer | None = None
        self._tail_path: str | None = None
        self._rotations = 0
        self._last_progress = 0.0

    def compose(self) -> ComposeResult:
        """The fields, their error line, the live log and the search results."""
        with Horizontal(id="log-fields"):
            yield Input(placeholder="filter: regex (/)", id="log-filter")
            yield Input(placeholder="exclude: regex (x)", id="log-exclude")
            yield Input(placeholder="search all files: regex, Enter", id="log-search")
        yield Label(id="log-error")
        yield LogView(id="detail-log")
        yield LogView(id="search-results")

    def on_mount(self) -> None:
        """Title the views and start reading."""
        self.live.title = "Log"
        self.query_one("#search-results", LogView).following = False
        self.read_log()

    @property
    def live(self) -> LogView:
        """The live log."""
        return self.query_one("#detail-log", LogView)

    @property
    def view(self) -> LogView:
        """The view shown: the search results when open, else the live log."""
        results = self.query_one("#search-results", LogView)
        return results if results.display else self.live

    # --- reading the live log ------------------------------------------------------------

    @work(thread=True, exclusive=True, group="log-tail", exit_on_error=False)
    def read_log(self) -> None:
        """Read what is new in the log, off the event loop, and post it."""
        path = self.log_path
        if path is None:
            return
        if path != self._tail_path or self._tailer is None:
            exists = Path(path).exists()
            # An existing log: its newest lines come from log_tail, then only what is appended.
            # One that does not exist yet is read from its start once it does.
            self._tailer = LogTailer(
                path, attach_bytes=1 if exists else NEW_FILE_BYTES, max_read_bytes=READ_BYTES
            )
            if exists:
                self._tailer.read_new()
            self._tail_path, self._rotations = path, 0
            lines = tuple(self.log_tail(Path(path), SCROLLBACK))
            self.post_message(LogRead(lines, reset=True))
            return
        new = self._tailer.read_new()[-SCROLLBACK:]
        if self._tailer.rotations != self._rotations:
            self._rotations = self._tailer.rotations
            new.append(ROTATED.format(name=Path(path).name))
        if new:
            self.post_message(LogRead(tuple(new), reset=False))

    def on_log_read(self, message: LogRead) -> None:
        """Append what was read (or start over)."""
        if message.reset:
            self.live.clear()
        self.live.append_lines(message.lines)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Read again once the previous read finished, so reads never overlap."""
        finished = (WorkerState.SUCCESS, WorkerState.ERROR)
        if event.worker.group == "log-tail" and event.state in finished:
            self.set_timer(self.refresh_s, self.read_log)

    # --- filters ---------------------------------------------------------------------------

    def _field(self, name: str) -> Input:
        return self.query_one(f"#{name}", Input)

    def _show_error(self, message: str | None) -> None:
        label = self.query_one("#log-error", Label)
        label.update(message or "")
        label.display = message is not None

    @on(Input.Changed, "#log-filter, #log-exclude")
    def _filter_changed(self) -> None:
        fields = (("filter", "log-filter"), ("exclude", "log-exclude"))
        patterns = []
        error = None
        for word, name in fields:
            field = self._field(name)
            try:
                patterns.append(compile_filter(word, field.value))
                field.remove_class("-invalid")
            except FilterError as bad:
                field.add_class("-invalid")
                error = error or str(bad)
        self._show_error(error)
        if error is None:  # a bad pattern keeps the last good filter on screen
            line_filter = LineFilter(patterns[0], patterns[1])
            self.live.set_filter(line_filter)

    def action_focus_field(self, name: str) -> None:
        """Type into a filter field."""
        self._field(name).focus()

    # --- search of the whole file and its rotations ---------------------------------------------

    def action_search(self) -> None:
        """Open the search field."""
        field = self._field("log-search")
        field.display = True
        field.focus()

    @on(Input.Submitted, "#log-search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        try:
            pattern = compile_filter("search", event.value)
            exclude = compile_filter("exclude", self._field("log-exclude").value)
        except FilterError as bad:
            self._field("log-search").add_class("-invalid")
            self._show_error(str(bad))
            return
        self._field("log-search").remove_class("-invalid")
        self._show_error(None)
        if pattern is None or self.log_path is None:
            return
        self._show_results(f"Search /{event.value}/")
        self._search(Path(self.log_path), f"Search /{event.value}/", pattern, exclude)

    # --- the views ---------------------------------------------------------------------------

    def action_pause(self) -> None:
        """Pause the view where it is, or follow the end again."""
        self.view.toggle_pause()

    def action_toggle_wrap(self) -> None:
        """Wrap long lines, or let them run on (scroll with left and right)."""
        for view in self.query(LogView):
            view.wrap = not view.wrap

    def action_jump(self, kind: str, step: int) -> None:
        """Mark the next (1) or previous (-1) error or allocation line; with none above in the
        lines kept, search the whole log and its rotations for them (streamed, as ``s`` does):
        'no allocation line above' was said while they were in the file, before the window."""
        if self.view.jump(LineKind(kind), step):
            return
        if step < 0 and self.view is self.live and self._log_reaches_before_the_view():
            assert self.log_path is not None
            head = f"{kind.capitalize()} lines of the whole log"
            self._show_results(head)
            self._search(
                Path(self.log_path), head, kind_anchors(LineKind(kind)), None, LineKind(kind)
            )
            return
        where = "below" if step > 0 else "above"
        self.notify(f"no {kind} line {where}", timeout=2)

    def action_close_mode(self) -> None:
        """Escape: leave a field, close the search, clear the filters; else let it go back."""
        focused = self.screen.focused
        if isinstance(focused, Input):
            if focused.id == "log-search" and not self.query_one("#search-results").display:
                focused.display = False
            self.view.focus()
            return
        results = self.query_one("#search-results", LogView)
        if results.display:
            self.workers.cancel_group(self, "log-search")
            results.display = False
            self._field("log-search").display = False
            self.live.display = True
            self.live.focus()
            return
        if self._field("log-filter").value or self._field("log-exclude").value:
            self._field("log-filter").value = ""
            self._field("log-exclude").value = ""
            return
        raise SkipAction()

    # --- the pager ----------------------------------------------------------------------------

    def pager_target(self) -> tuple[Path, int | None] | None:
        """The file (and line) the pager opens: the marked or first shown search hit, or the
        live log."""
        view = self.view
        if view is not self.live and self.results is not None and self.results.hits:
            hits = {hit_line(h): h for h in self.results.hits}
            lines = view.buffer.shown
            number = view.marked if view.marked is not None else (lines[0] if lines else None)
            hit = hits.get(view.buffer.line(number)) if number is not None else None
            if hit is not None:
                return hit.path, hit.line
        return (Path(self.log_path), None) if self.log_path else None

    def action_pager(self) -> None:
        """Open the log in ``$PAGER`` (the console is suspended until the pager exits)."""
        target = self.pager_target()
        if target is None:
            self.notify("no log file for this GPU", severity="warning")
            return
        try:
            argv = pager_argv(*target)
        except PagerError as error:
            self.notify(str(error), title="Pager", severity="error")
            return
        from textual.app import SuspendNotSupported

        try:
            with self.app.suspend():
                subprocess.run(argv, check=False)
        except SuspendNotSupported:
            self.notify("this terminal cannot hand the screen to a pager", severity="error")
        except OSError as error:
            self.notify(f"{argv[0]}: {error.strerror or error}", title="Pager", severity="error")
