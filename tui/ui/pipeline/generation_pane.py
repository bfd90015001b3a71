"""The generation pane: is the job going faster, and when does it finish."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import ProgressBar, Sparkline, Static

from tui.pipeline.status import PipelineStatus
from tui.ui.format import duration, num, pct
from tui.ui.pipeline.throughput_history import Sample, marker_columns, resample

PIPELINE_STATE_STYLE = {
    "running": "$success",
    "finished": "$accent",
    "stopped": "$text-muted",
    "failed": "bold $error",
}
"""Theme colour of each pipeline state."""


def summary_lines(status: PipelineStatus) -> Content:
    """State, rates over 1 and 10 minutes, counts and ETA."""
    state = Content.styled(status.state, PIPELINE_STATE_STYLE.get(status.state, "$text"))
    r1, r10 = status.rate_1m, status.rate_10m
    lines = [
        Content.assemble("pipeline ", state, f"  pid {status.pid}  ETA {duration(status.eta_s)}"),
        Content(
            f"req/s {num(r1.requests_per_s, 2)} (1m) {num(r10.requests_per_s, 2)} (10m)   "
            f"out tok/s {num(r1.output_tokens_per_s)} (1m) {num(r10.output_tokens_per_s)} (10m)"
        ),
        Content.assemble(
            f"done {num(status.done)} / {num(status.total)}  in flight {num(status.in_flight)}  ",
            ("failed " + num(status.failed), "$error" if status.failed else ""),
        ),
    ]
    if status.state == "running" and status.no_server_since is not None:
        waited = max(status.updated_at - status.no_server_since, 0.0)
        lines.append(
            Content.styled(
                f"waiting: no server healthy for {duration(waited)}; "
                "work resumes when one answers /health",
                "$warning",
            )
        )
    if status.message:
        lines.append(Content.styled(status.message, "$text-muted"))
    return Content("\n").join(lines)


def server_lines(status: PipelineStatus) -> Content:
    """One line per server: its share of the work done, its errors and its health."""
    total_done = sum(share.done for share in status.servers)
    rows = [Content.styled("server                        done   share  failed  in flight", "bold")]
    for share in status.servers:
        fraction = share.done / total_done if total_done else None
        health = Content.styled("", "") if share.healthy else Content.styled(" no work", "$warning")
        failed_style = "$error" if share.failed else ""
        rows.append(
            Content.assemble(
                f"{share.url:<28.28} {num(share.done):>6} {pct(fraction, 100):>6}  ",
                (f"{num(share.failed):>6}", failed_style),
                f"  {num(share.in_flight):>9}",
                health,
            )
        )
    return Content("\n").join(rows)


class RetuneMarkers(Widget):
    """A row of ▲ under the sparkline, one where each retune happened."""

    DEFAULT_CSS = """
    RetuneMarkers {
        height: 1;
        color: $warning;
    }
    """

    columns: reactive[frozenset[int]] = reactive(frozenset())
    """Chart columns that have a retune."""

    def render(self) -> str:
        """The markers across the width."""
        return "".join("▲" if x in self.columns else " " for x in range(self.size.width))


class GenerationPane(Vertical, can_focus=True):
    """The pipeline's progress. The screen binds ``status``, ``history`` and ``retune_marks``."""

    DEFAULT_CSS = """
    GenerationPane {
        height: auto;
        border: round $panel-lighten-2;
        border-title-style: bold;
        padding: 0 1;
    }
    GenerationPane:focus {
        border: heavy $accent;
    }
    GenerationPane ProgressBar {
        width: 1fr;
    }
    GenerationPane ProgressBar Bar {
        width: 1fr;
    }
    GenerationPane Sparkline {
        height: 2;
        margin-top: 1;
    }
    GenerationPane > .-empty {
        color: $text-muted;
    }
    """

    status: reactive[PipelineStatus | None] = reactive(None)
    """Newest status document; None when there is none."""
    history: reactive[tuple[Sample, ...]] = reactive(())
    """(time, output tok/s) samples over the last hour, oldest first."""
    retune_marks: reactive[tuple[float, ...]] = reactive(())
    """time.time() of each retune."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._stale = False
        """Readings arrived while the pane was hidden and are not shown yet."""

    def compose(self) -> ComposeResult:
        """Summary, progress bar, per-server share, throughput chart with retune markers."""
        yield Static("no pipeline status document yet", id="pipeline-summary")
        yield ProgressBar(total=None, show_eta=False, id="pipeline-progress")
        yield Static("", id="pipeline-servers")
        yield Sparkline([], id="pipeline-sparkline")
        yield RetuneMarkers(id="pipeline-markers")

    def on_mount(self) -> None:
        """Title the border."""
        self.border_title = "Generation"
        self.border_subtitle = "throughput, last hour (▲ retune)"

    def watch_status(self, status: PipelineStatus | None) -> None:
        """Show the new document's numbers (when the pane is shown; else on showing)."""
        if not self.display:
            # Hidden (the default): an update would still cost a layout pass every second.
            self._stale = True
            return
        summary = self.query_one("#pipeline-summary", Static)
        progress = self.query_one("#pipeline-progress", ProgressBar)
        servers = self.query_one("#pipeline-servers", Static)
        if status is None:
            _update(summary, Content("no pipeline status document yet (press p to start it)"))
            _update(servers, Content(""))
            return
        _update(summary, summary_lines(status))
        progress.update(total=max(status.total, 1), progress=status.done)
        _update(servers, server_lines(status))

    def on_show(self, event: events.Show) -> None:
        """Catch up with what arrived while hidden."""
        if self._stale:
            self._stale = False
            self.watch_status(self.status)
            self._redraw_chart()

    def watch_history(self) -> None:
        """Redraw the chart."""
        if self.display:
            self._redraw_chart()
        else:
            self._stale = True

    def watch_retune_marks(self) -> None:
        """Redraw the markers."""
        self.watch_history()

    def on_resize(self, event: events.Resize) -> None:
        """The chart has one value per column, so a new width needs a new resampling."""
        self._redraw_chart()

    def _redraw_chart(self) -> None:
        sparkline = self.query_one("#pipeline-sparkline", Sparkline)
        markers = self.query_one("#pipeline-markers", RetuneMarkers)
        width = self.content_size.width
        sparkline.data = resample(self.history, width)
        markers.columns = frozenset(marker_columns(self.retune_marks, self.history, width))


def _update(static: Static, content: Content) -> None:
    """Set a Static's text; a layout pass only when its line count changes, and nothing at all
    when the text is the same (the document is rewritten even when no number moved)."""
    old = static.content
    if isinstance(old, Content) and old.plain == content.plain and old.spans == content.spans:
        return
    lines = content.plain.count("\n")
    same_height = isinstance(old, Content) and old.plain.count("\n") == lines
    static.update(content, layout=not same_height)
