"""The generation pane: is the job going faster, and when does it finish."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import ProgressBar, Static

from tui.history import HistoryError
from tui.ops.marks import OperationMark
from tui.ops.port import FleetReads
from tui.pipeline.status import PipelineStatus
from tui.ui.format import NA, duration, num, pct
from tui.ui.history.chart import JOB, MIN_JOB_S, RANGES, ChartData, ChartRange, HistoryChart
from tui.ui.host import host_of
from tui.ui.pipeline.chart_read import chart_data
from tui.ui.pipeline.energy_line import JobEnergyLine

PIPELINE_STATE_STYLE = {
    "running": "$success",
    "finished": "$accent",
    "stopped": "$text-muted",
    "failed": "bold $error",
}
"""Theme colour of each pipeline state."""
BAR_ANIMATION_S = 1 / 15
"""Refresh interval of the indeterminate bar's animation (Textual's own)."""


class PaneProgressBar(ProgressBar):
    """Textual's progress bar without its once-a-second ETA timer.

    Why: ``ProgressBar.on_mount`` starts a 1 s interval that recomputes the ETA the bar can
    show; this pane hides that ETA (``show_eta=False``: the summary prints its own), yet the
    timer ticked for the console's life, pane shown or not (44-88 us a second here and on the
    H200, issue 20). The bar still moves with every ``update``.
    """

    @on(events.Mount)
    def first_update(self, event: events.Mount) -> None:
        """The bar's first update, and not ``ProgressBar.on_mount``: a handler that prevents
        the default skips its base classes' (Textual's rule), here the ETA timer's start and
        ``Widget``'s own, which only shows the scrollbars of ``overflow: scroll`` (a bar has
        none)."""
        event.prevent_default()
        self.update()


def halted(status: PipelineStatus) -> str | None:
    """Why the job makes no progress now ('job finished', 'pipeline stopped', 'no server
    healthy for 8s'), or None while it runs: its last rates and ETA no longer hold."""
    if status.state != "running":
        return {"finished": "job finished", "failed": "pipeline failed"}.get(
            status.state, f"pipeline {status.state}"
        )
    if status.no_server_since is not None:
        return f"no server healthy for {duration(status.updated_at - status.no_server_since)}"
    return None


def summary_lines(status: PipelineStatus) -> Content:
    """State, rates over 1 and 10 minutes, counts and ETA; rates and ETA stop, saying why,
    when the job makes no progress (``halted``)."""
    state = Content.styled(status.state, PIPELINE_STATE_STYLE.get(status.state, "$text"))
    r1, r10 = status.rate_1m, status.rate_10m
    why = halted(status)
    rates = Content(
        f"req/s {num(r1.requests_per_s, 2)} (1m) {num(r10.requests_per_s, 2)} (10m)   "
        f"out tok/s {num(r1.output_tokens_per_s)} (1m) {num(r10.output_tokens_per_s)} (10m)"
    )
    eta = f"ETA {duration(status.eta_s)}" if why is None else f"ETA {NA} ({why})"
    share = f" ({pct(status.done / status.total, 100)})" if status.total else ""
    lines = [
        Content.assemble("pipeline ", state, f"  pid {status.pid}  {eta}"),
        rates if why is None else Content.styled(f"req/s {NA}  out tok/s {NA}  ({why})", "dim"),
        Content.assemble(
            f"done {num(status.done)} / {num(status.total)}{share}  ",
            f"in flight {num(status.in_flight)}  ",
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


class ChartRead(Message):
    """The history worker read the chart's data (None: nothing to show, ``why`` says why)."""

    def __init__(self, data: ChartData | None, why: str) -> None:
        self.data = data
        """The chart's points, edges and marks."""
        self.why = why
        """Shown instead of a chart when ``data`` is None."""
        super().__init__()


class GenerationPane(Vertical, can_focus=True):
    """The pipeline's progress and its output rate over a chosen range, from the history.

    The screen binds ``status`` and ``retune_marks``; the chart's points come from the app's
    history (``FleetApp.history``), read in a thread worker when the pane shows, when the range
    changes, and every ``CHART_REFRESH_S`` while it shows.
    """

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
    GenerationPane #pipeline-body {
        height: auto;
    }
    GenerationPane.-wide #pipeline-body {
        layout: horizontal;
    }
    GenerationPane.-wide #pipeline-chart {
        width: 1fr;
    }
    GenerationPane.-wide #pipeline-servers {
        width: auto;
        margin-left: 2;
    }
    GenerationPane > .-empty {
        color: $text-muted;
    }
    """

    BINDINGS = [
        Binding("left_square_bracket", "range(-1)", "Shorter range", id="pipeline.range_shorter"),
        Binding("right_square_bracket", "range(1)", "Longer range", id="pipeline.range_longer"),
    ]

    CHART_REFRESH_S = 5.0
    """Seconds between reads of the history while the pane shows (it is written every 5 s)."""
    CHART_ROWS = (8, 16)
    """The chart's least and most rows: it takes what the pane has left, within these (8 at
    80x24: five rows of plot, the axis, the times and the operations' names)."""
    WIDE_FROM = 150
    """A pane this wide puts the servers' table beside the chart (the chart gets the rows)."""
    HEIGHT_SHARE = 0.6
    """The pane's most height, as a share of the screen's (``app.tcss``: ``max-height: 60%``)."""

    status: reactive[PipelineStatus | None] = reactive(None)
    """Newest status document; None when there is none."""
    retune_marks: reactive[tuple[OperationMark, ...]] = reactive(())
    """The journal's operations that changed servers (markers, the last one's windows)."""
    range_label: reactive[str] = reactive(JOB.label)
    """Which of ``RANGES`` the chart shows (the job's whole life at first)."""

    def __init__(self, reads: FleetReads, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.reads = reads
        """The console's port's reads (the job's energy ledger)."""
        self._stale = False
        """Readings arrived while the pane was hidden and are not shown yet."""
        self._chart_read_at: float | None = None
        self.clock: Callable[[], float] = time.time
        """The chart's right edge ('now'); tests fix it."""
        self.no_status = "no pipeline status document yet (press p to start it)"
        """What the pane says without a status document (a replay's: none is recorded)."""

    def compose(self) -> ComposeResult:
        """Summary, progress bar, the output-rate chart with its markers, per-server share
        (beside the chart when the pane is wide)."""
        yield Static("no pipeline status document yet", id="pipeline-summary")
        yield JobEnergyLine(self.reads, id="pipeline-energy")  # the job's energy and cost
        bar = PaneProgressBar(total=None, show_eta=False, id="pipeline-progress")
        bar.display = False  # until the pane is wide (``_fit_chart``)
        yield bar
        with Container(id="pipeline-body"):
            yield HistoryChart(id="pipeline-chart")
            yield Static("", id="pipeline-servers")

    def on_mount(self) -> None:
        """Title the border; no bar animation while the pane starts hidden."""
        self.border_title = "Generation"
        self._subtitle()
        self.call_after_refresh(self._bar_animation)
        self._fit_chart()

    def on_resize(self, event: events.Resize) -> None:
        """Give the chart the rows the pane has left (see ``_fit_chart``)."""
        self._fit_chart()

    def _fit_chart(self) -> None:
        """The chart as tall as the pane allows (``CHART_ROWS``), the servers' table beside it
        when the pane is wide (``WIDE_FROM``).

        The pane's height is at most ``HEIGHT_SHARE`` of the screen's; the summary and the
        progress bar come first, then the chart, then (when not beside it) the servers' table,
        which scrolls into view: a chart of 4 rows with 3 labels was too coarse to judge a
        retune by.
        """
        wide = self.size.width >= self.WIDE_FROM
        if wide != self.has_class("-wide"):
            self.set_class(wide, "-wide")
            # the done line says the share; the bar is for a pane with rows to spare
            self.query_one("#pipeline-progress").display = wide
            self._bar_animation()
        summary_rows = _rows(self.query_one("#pipeline-summary", Static))
        energy = self.query_one(JobEnergyLine)
        summary_rows += _rows(energy) if energy.display else 0
        # the pane's most: a share of the screen's height less its header and footer
        most = int((self.app.size.height - 2) * self.HEIGHT_SHARE)
        room = most - 2 - summary_rows - (1 if wide else 0)
        low, high = self.CHART_ROWS
        rows = max(low, min(high, room))
        chart = self.query_one(HistoryChart)
        if chart.styles.height is None or chart.styles.height.value != rows:
            chart.styles.height = rows

    def _bar_animation(self) -> None:
        """Run the indeterminate progress bar's animation only while the pane shows.

        Why: Textual runs an indeterminate bar's 15 fps refresh timer whether or not the bar is
        on screen; hidden (the console's default), it woke the console 15 times a second for
        nothing, a tenth of its CPU on a busy fleet. A known total stops the timer anyway.
        """
        progress = self.query_one("#pipeline-progress", ProgressBar)
        shown = self.display and progress.display
        indeterminate = progress.percentage is None
        for bar in self.query("#pipeline-progress #bar"):
            bar.auto_refresh = BAR_ANIMATION_S if shown and indeterminate else None

    def _subtitle(self) -> None:
        ranges = " ".join(
            f"[b reverse] {r.label} [/]" if r.label == self.range_label else r.label
            for r in self.ordered_ranges()
        )
        self.border_subtitle = f"output tok/s  {ranges}  ([ ] range, ▲ operation)"

    @property
    def chart_range(self) -> ChartRange:
        """The range the chart shows."""
        return next((r for r in RANGES if r.label == self.range_label), JOB)

    def ordered_ranges(self) -> list[ChartRange]:
        """``RANGES`` shortest first, the job's by its age now (last while it is unknown: then
        it is the whole history), so `[` always shows less and `]` more."""
        status = self.status
        age = None if status is None else max(status.updated_at - status.started_at, MIN_JOB_S)

        def span(r: ChartRange) -> float:
            if r.seconds is not None:
                return r.seconds
            return float("inf") if age is None else age

        return sorted(RANGES, key=span)

    def watch_status(self, status: PipelineStatus | None) -> None:
        """Show the new document's numbers (when the pane is shown; else on showing)."""
        if not self.display:
            # Hidden (the default): an update would still cost a layout pass every second.
            self._stale = True
            return
        summary = self.query_one("#pipeline-summary", Static)
        progress = self.query_one("#pipeline-progress", ProgressBar)
        servers = self.query_one("#pipeline-servers", Static)
        self._chart_if_due()
        if status is None:
            _update(summary, Content(self.no_status))
            _update(servers, Content(""))
            return
        self.query_one(JobEnergyLine).read_if_due(status.eta_s)
        rows = _rows(summary)
        _update(summary, summary_lines(status))
        progress.update(total=max(status.total, 1), progress=status.done)
        _update(servers, server_lines(status))
        if _rows(summary) != rows:
            self._fit_chart()  # the summary grew or shrank: the chart's room with it
        self._subtitle()  # the job's range moves among the others as it ages

    def on_show(self, event: events.Show) -> None:
        """Catch up with what arrived while hidden; offer the range keys."""
        if self._stale:
            self._stale = False
            self.watch_status(self.status)
        self._bar_animation()
        self.read_chart()
        self.refresh_bindings()

    def on_hide(self, event: events.Hide) -> None:
        """Withdraw the range keys; stop the bar's animation."""
        self._bar_animation()
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The range keys only while the chart shows (the hidden pane may hold the focus)."""
        return self.display or action != "range"

    def watch_retune_marks(self) -> None:
        """New markers: read the chart again (when shown)."""
        if self.display and self.is_mounted:
            self.read_chart()

    def watch_range_label(self) -> None:
        """Another range: say so, and read it."""
        if self.is_mounted:
            self._subtitle()
            self.read_chart()

    def action_range(self, step: int) -> None:
        """Show a shorter (-1) or longer (1) range."""
        ordered = self.ordered_ranges()
        index = ordered.index(self.chart_range)
        self.range_label = ordered[max(0, min(len(ordered) - 1, index + step))].label

    def _chart_if_due(self) -> None:
        now = time.monotonic()
        if self._chart_read_at is None or now - self._chart_read_at >= self.CHART_REFRESH_S:
            self.read_chart()

    def read_chart(self) -> None:
        """Read the chart's data from the history (in a thread worker)."""
        self._chart_read_at = time.monotonic()
        status = self.status
        job_start = None if status is None else status.started_at
        self._read_chart(self.chart_range, self.clock(), self.retune_marks, job_start)

    @work(thread=True, exclusive=True, group="history-read", exit_on_error=False)
    def _read_chart(
        self,
        span: ChartRange,
        end: float,
        marks: tuple[OperationMark, ...],
        job_start: float | None,
    ) -> None:
        host = host_of(self)
        source = host.chart_source if host is not None else None
        if source is not None:  # a Prometheus server: its answer or why not
            try:
                data = chart_data(source, span, end, marks, job_start)
            except HistoryError as error:
                self.post_message(ChartRead(None, str(error)))
                return
            self.post_message(ChartRead(data, "no series in Prometheus for this range"))
            return
        recorder = host.history if host is not None else None
        if recorder is None:
            self.post_message(ChartRead(None, "no history in this console"))
            return
        store = recorder.open()
        if store is None:
            self.post_message(ChartRead(None, f"history unavailable: {recorder.error}"))
            return
        data = chart_data(store, span, end, marks, job_start)
        self.post_message(ChartRead(data, "no history yet"))

    @on(JobEnergyLine.Shown)
    def _energy_shown(self) -> None:
        """The energy line appeared, left or changed its rows: the chart's room with it."""
        self._fit_chart()

    def on_chart_read(self, message: ChartRead) -> None:
        """Draw what the worker read."""
        chart = self.query_one(HistoryChart)
        chart.empty = message.why
        chart.data = message.data


def _rows(static: Static) -> int:
    """Lines of a Static's text."""
    text = static.content
    return text.plain.count("\n") + 1 if isinstance(text, Content) else 1


def _update(static: Static, content: Content) -> None:
    """Set a Static's text; a layout pass only when its line count changes, and nothing at all
    when the text is the same (the document is rewritten even when no number moved)."""
    old = static.content
    if isinstance(old, Content) and old.plain == content.plain and old.spans == content.spans:
        return
    lines = content.plain.count("\n")
    same_height = isinstance(old, Content) and old.plain.count("\n") == lines
    static.update(content, layout=not same_height)
