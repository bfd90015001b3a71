"""``FleetRow``: the fleet's totals in one line under the grid, from the monitor and the job.

``fleet 6/7 ready 1 failed · gen 8,400 tok/s · running 240 queued 48 · job 6.10 req/s 3,456
out tok/s · done 35% · ETA 1d 02h``: what the panels add up to (the monitor's readings, each
counted only while its panel shows it) and where the job stands (its status document). A
narrow terminal gets the short form (``5/7 ready · 8400 tok/s · run 240 q48 · 6.10 req/s · ETA
1d 02h``). The fields are built at each reading from seven panels' numbers (a few additions),
and each is repainted alone when its text changed (``FleetField``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.widget import Widget

from tui.fleet.imbalance import READINGS, Outlier
from tui.fleet.snapshot import FleetSnapshot, ServerState
from tui.pipeline.status import PipelineStatus
from tui.ui.format import NA, duration, num, pct, short_num, sig3, sig3_text
from tui.ui.grid.ages import blanked, load_age
from tui.ui.grid.panel_lines import line
from tui.ui.pipeline.generation_pane import halted

LEAD = ("· ", "$text-muted")
"""What a field after the first starts with (a field's right padding is the space before it)."""
DOT = (" · ", "$text-muted")
"""Between two parts of one field."""


@dataclass(frozen=True, slots=True)
class FleetTotals:
    """What the panels add up to."""

    servers: int
    """Panels with a server configured."""
    ready: int
    """Servers ready."""
    failed: int
    """Servers failed or stuck."""
    gen_tok_s: float | None
    """Generation tokens/s summed over the servers that show one (None: none does)."""
    running: int | None
    """Requests running, summed likewise."""
    queued: int | None
    """Requests queued, summed likewise."""
    outliers: tuple[Outlier, ...] = ()
    """The GPUs that stand out from the fleet (``FleetSnapshot.imbalance``), most distant
    first."""


def _sum(values: list[float]) -> float | None:
    return sum(values) if values else None


def fleet_totals(fleet: FleetSnapshot) -> FleetTotals:
    """Add up the fleet's panels as they show (a value a panel blanks is not counted).

    Args:
        fleet: The monitor's snapshot.

    Returns:
        The totals.
    """
    ready = failed = servers = 0
    gen: list[float] = []
    running: list[float] = []
    queued: list[float] = []
    for panel in fleet.panels:
        server = panel.server
        if server is None:
            continue
        servers += 1
        ready += server.state is ServerState.READY
        failed += server.state in (ServerState.FAILED, ServerState.CRASHED, ServerState.STUCK)
        shown = blanked(server, load_age(server, 0.0))
        if shown.gen_throughput is not None:
            gen.append(shown.gen_throughput)
        if shown.running is not None:
            running.append(shown.running)
        if shown.queued is not None:
            queued.append(shown.queued)
    total_running, total_queued = _sum(running), _sum(queued)
    return FleetTotals(
        servers,
        ready,
        failed,
        sig3(_sum(gen)),  # the digits a reader takes in: the line moves less often
        None if total_running is None else int(total_running),
        None if total_queued is None else int(total_queued),
        fleet.imbalance,
    )


FIELDS = 6
"""The row's fields: the servers, generation, requests, the job's rate, its progress and ETA,
the GPU that stands out."""


def _job_fields(status: PipelineStatus | None, short: bool) -> tuple[Content, Content]:
    """The job's rate; its progress and ETA (or why it makes no progress)."""
    if status is None:
        return line(("· no job", "$text-muted")), line("")
    why = halted(status)
    share = pct(status.done / status.total, 100) if status.total else NA
    if why is not None:
        words = why if short or why.startswith("job ") else f"job {why}"  # not 'job job ...'
        return line(LEAD, (words, "$warning")), line(LEAD, f"done {share}")
    rate = status.rate_1m
    eta = ("ETA " + duration(status.eta_s), "bold")
    if short:
        return line(LEAD, f"{sig3_text(rate.requests_per_s)} req/s"), (line(LEAD, eta))
    rates = f"job {sig3_text(rate.requests_per_s)} req/s {sig3_text(rate.output_tokens_per_s)}"
    return (
        line(LEAD, rates + " out tok/s"),
        line(LEAD, f"done {share}", DOT, eta),
    )


def fleet_fields(
    totals: FleetTotals, status: PipelineStatus | None, width: int
) -> tuple[Content, ...]:
    """The row's ``FIELDS`` fields: the long words when they fit ``width``, else the short.

    Rates to three significant digits: the digits a reader takes in, and fewer repaints. Each
    field is ``panel_lines.line``'s: the same object for the same words (a reading whose
    totals did not move builds nothing).
    """
    ready_style = "$success" if totals.servers and totals.ready == totals.servers else "$warning"
    ready: list[tuple[str, str]] = [(f"{totals.ready}/{totals.servers} ready", ready_style)]
    if totals.failed:
        ready.append((f" {totals.failed} failed", "bold $error"))
    long = (
        line(("fleet ", "bold"), *ready),
        line(LEAD, f"gen {sig3_text(totals.gen_tok_s)} tok/s"),
        line(LEAD, f"running {num(totals.running)}  queued {num(totals.queued)}"),
        *_job_fields(status, short=False),
    )
    room = width - sum(field.cell_length + 1 for field in long)
    if room >= 0:
        return (*long, outlier_field(totals.outliers, room))
    short = (
        line(*ready),
        line(LEAD, f"{short_num(sig3(totals.gen_tok_s))} tok/s"),
        line(LEAD, f"run {num(totals.running)} q{num(totals.queued)}"),
        *_job_fields(status, short=True),
    )
    room = width - sum(field.cell_length + 1 for field in short)
    outlier = outlier_field(totals.outliers, room)
    if outlier.cell_length + 1 > room and status is not None:
        # A GPU that stands out matters more than the job's rate (the pane, g, has it)
        short = (*short[:3], line(""), short[4])
        outlier = outlier_field(totals.outliers, width - sum(f.cell_length + 1 for f in short))
    return (*short, outlier)


def outlier_field(outliers: tuple[Outlier, ...], room: int) -> Content:
    """The GPU that stands out most, in $warning, in the longest words that fit ``room``: its
    words (``Outlier.words``: 'GPU 3 tok/s 290: 0.25x the fleet median 1,160'), else 'GPU 3
    tok/s 0.25x', else 'GPU 3 tok/s'; ``(+N)`` when others do too; empty when none does."""
    if not outliers:
        return line("")
    first = outliers[0]
    more = f" (+{len(outliers) - 1})" if len(outliers) > 1 else ""
    label = next((r.label for r in READINGS if r.name == first.reading), first.reading)
    cut = first.words.find(f" {label} ")  # who, as the words name it ('n2 GPU 1')
    who = f"{first.words[:cut] if cut > 0 else f'GPU {first.gpu}'} {label}"
    if first.reading == "kv":
        how = f"{first.value:.0%}"
    elif first.median:
        how = f"{first.value / first.median:.2f}x"
    else:
        how = f"{first.value:g}"
    for words in (first.words + more, f"{who} {how}{more}", who + more):
        if len(words) + 3 <= room:
            break
    return line(LEAD, (words, "$warning"))


def fleet_line(totals: FleetTotals, status: PipelineStatus | None, width: int) -> Content:
    """The row's fields as one line (what it shows), cut to ``width``."""
    fields = [field for field in fleet_fields(totals, status, width) if field.plain]
    line = Content(" ").join(fields)
    return line if line.cell_length <= width else line.truncate(width)


class FleetField(Widget):
    """One field of the row: repainted alone when its text changes.

    Why fields: a terminal update of a line is sent from the left edge of the widget it is in
    up to the last changed cell; one widget for the whole row resent most of it at every
    reading (850 bytes a second at 200x50, more than all the panels). A field's own change is
    sent from the field's edge. Why the right padding (the space between two fields): a
    repainted region that ends on a widget's edge made Textual's compositor send an empty cut
    of the next widget, where the main screen's (``DirtyRowsCompositor``) sends none.
    """

    DEFAULT_CSS = """
    FleetField {
        width: auto;
        height: 1;
        padding: 0 1 0 0;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self.text = Content("")
        """What the field shows."""
        self.width = 0
        """Its width: the widest text it has shown since the row's width last changed."""
        self._source: Content | None = None
        """The words last given to ``show`` (before padding)."""

    def show(self, text: Content) -> None:
        """Show ``text``, padded to the field's width; repaint only when it changed.

        Why the width only grows: a field whose width changes lays the whole screen out again
        (a queue length going from 99 to 102 and back, every few seconds under load, was most
        of the row's CPU and made its bytes double).
        """
        if text is self._source:
            return  # the same words (``fleet_fields``' objects are interned)
        self._source = text
        if text.cell_length < self.width:
            text = text.pad_right(self.width - text.cell_length)
        old = self.text
        if old.plain == text.plain and old.spans == text.spans:
            return
        self.text = text
        if text.cell_length == self.width and self.is_mounted:
            self.refresh(Region(0, 0, *self.size))  # marked on the screen at once
        else:
            self.width = text.cell_length
            self.refresh(layout=True)

    def reset(self) -> None:
        """Forget the width (the row's width changed: the words may be others)."""
        self.width = 0
        self._source = None

    def get_content_width(self, container: Size, viewport: Size) -> int:
        """Its text's width (``width: auto``)."""
        return self.text.cell_length

    def render(self) -> Content:
        """The field's text."""
        return self.text


class FleetRow(Horizontal):
    """One line of totals; the screen binds ``fleet`` and ``status``."""

    DEFAULT_CSS = """
    FleetRow {
        height: 1;
        padding: 0 1;
        background: $panel;
    }
    """

    fleet: reactive[FleetSnapshot] = reactive(FleetSnapshot, always_update=True, repaint=False)
    """The newest snapshot (bound to the screen's)."""
    status: reactive[PipelineStatus | None] = reactive(None, repaint=False)
    """The job's newest status document (bound to the screen's)."""

    _totals: FleetTotals | None = None
    _reading_at: float | None = None
    """time.monotonic() of the last fleet reading shown."""

    STATUS_WAIT_S = 2.0
    """A new status document waits this long at most for the next fleet reading to be shown
    with it. Why: shown at once it made a screen update of its own each second, beside the
    reading's (~1.7 ms each with seven busy panels: a fifth of the console's CPU); the
    monitor's next reading comes within a second, and the row then shows both."""

    def compose(self) -> ComposeResult:
        """The fields, left to right."""
        for _ in range(FIELDS):
            yield FleetField()

    def watch_fleet(self, fleet: FleetSnapshot) -> None:
        """Add up the new reading; show the fields that changed (the job's too)."""
        self._totals = fleet_totals(fleet)
        self._reading_at = time.monotonic()
        self._show()

    def watch_status(self) -> None:
        """A new document: shown with the next fleet reading, or now when readings stopped
        (``STATUS_WAIT_S``)."""
        at = self._reading_at
        if at is None or time.monotonic() - at > self.STATUS_WAIT_S:
            self._show()

    def on_resize(self, event: events.Resize) -> None:
        """Another width: the long or the short words, the fields as wide as they need."""
        for field in self.query_children(FleetField):
            field.reset()
        self._show()

    def _show(self) -> None:
        if not self.is_mounted:
            return
        totals = self._totals or fleet_totals(self.fleet)
        width = max(1, self.content_size.width)
        fields = fleet_fields(totals, self.status, width)
        widgets = list(self.query_children(FleetField))
        # The widths only grow (``FleetField.show``): kept from the long form (a row that
        # opened before the job's document, when the long words fitted), they pushed the short
        # form's ETA past the 80th column. Words that no longer fit those widths start afresh
        # (once: words too long even unpadded are left to the row's end, not laid out anew).
        pairs = list(zip(widgets, fields, strict=True))
        needed = sum(max(w.width, t.cell_length) + 1 for w, t in pairs)
        if needed > width and any(w.width > t.cell_length for w, t in pairs):
            for widget in widgets:
                widget.reset()
        for widget, text in zip(widgets, fields, strict=True):
            widget.show(text)

    @property
    def line(self) -> Content:
        """The row as shown, in one line (fields padded to their widths)."""
        return Content(" ").join(field.text for field in self.query_children(FleetField))
