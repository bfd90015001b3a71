"""``FleetRow``: the fleet's totals in one line under the grid, from the monitor and the job.

``fleet 6/7 ready 1 failed · gen 8,400 tok/s · running 240 queued 48 · job 6.10 req/s 3,456
out tok/s · done 35% · ETA 1d 02h``: what the panels add up to (the monitor's readings, each
counted only while its panel shows it) and where the job stands (its status document). A
narrow terminal gets the short form (``5/7 ready · 8.4k tok/s · run 240 q48 · 6.1 req/s · ETA
1d 02h``). The line is built at each reading from seven panels' numbers (a few additions) and
repainted only when its text changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.content import Content
from textual.geometry import Region
from textual.reactive import reactive

from tui.fleet.snapshot import FleetSnapshot, ServerState
from tui.pipeline.status import PipelineStatus
from tui.ui.format import NA, duration, num, pct, short_num, sig3, sig3_text
from tui.ui.grid.ages import blanked, load_age
from tui.ui.grid.screen_refresh import ScreenRefresh
from tui.ui.pipeline.generation_pane import halted

SEPARATOR = (" · ", "$text-muted")


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
        failed += server.state in (ServerState.FAILED, ServerState.STUCK)
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
    )


def _job_parts(status: PipelineStatus | None, short: bool) -> list[tuple[str, str]]:
    """The job's rate, progress and ETA; why not, when it makes no progress."""
    if status is None:
        return [("no job", "$text-muted")]
    why = halted(status)
    share = pct(status.done / status.total, 100) if status.total else NA
    if why is not None:
        return [(f"job {why}" if not short else why, "$warning"), SEPARATOR, (f"done {share}", "")]
    rate = status.rate_1m
    if short:
        return [
            (f"{num(rate.requests_per_s, 1)} req/s", ""),
            SEPARATOR,
            (f"ETA {duration(status.eta_s)}", "bold"),
        ]
    return [
        (f"job {num(rate.requests_per_s, 2)} req/s ", ""),
        (f"{num(rate.output_tokens_per_s)} out tok/s", ""),
        SEPARATOR,
        (f"done {share}", ""),
        SEPARATOR,
        (f"ETA {duration(status.eta_s)}", "bold"),
    ]


def fleet_line(totals: FleetTotals, status: PipelineStatus | None, width: int) -> Content:
    """The row's line: the long form when it fits ``width``, else the short one."""
    ready_style = "$success" if totals.servers and totals.ready == totals.servers else "$warning"
    head: list[tuple[str, str]] = [
        ("fleet ", "bold"),
        (f"{totals.ready}/{totals.servers} ready", ready_style),
    ]
    if totals.failed:
        head.append((f" {totals.failed} failed", "bold $error"))
    long = Content.assemble(
        *head,
        SEPARATOR,
        (f"gen {sig3_text(totals.gen_tok_s)} tok/s", ""),
        SEPARATOR,
        (f"running {num(totals.running)}  queued {num(totals.queued)}", ""),
        SEPARATOR,
        *_job_parts(status, short=False),
    )
    if long.cell_length <= width:
        return long
    short = Content.assemble(
        *head[1:],
        SEPARATOR,
        (f"{short_num(sig3(totals.gen_tok_s))} tok/s", ""),
        SEPARATOR,
        (f"run {num(totals.running)} q{num(totals.queued)}", ""),
        SEPARATOR,
        *_job_parts(status, short=True),
    )
    return short if short.cell_length <= width else short.truncate(width)


class FleetRow(ScreenRefresh):
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
    _line: Content | None = None
    """The line drawn (a reading that draws the same one repaints nothing)."""

    def watch_fleet(self, fleet: FleetSnapshot) -> None:
        """Add up the new reading; repaint when the line changes."""
        self._totals = fleet_totals(fleet)
        self._repaint_if_changed()

    def watch_status(self) -> None:
        """A new document: repaint when the line changes."""
        self._repaint_if_changed()

    def on_resize(self, event: events.Resize) -> None:
        """Another width: the long or the short form."""
        self._repaint_if_changed()

    def _built(self) -> Content:
        totals = self._totals or fleet_totals(self.fleet)
        return fleet_line(totals, self.status, max(1, self.content_size.width))

    def _repaint_if_changed(self) -> None:
        line = self._built()
        old = self._line
        if old is None or old.plain != line.plain or old.spans != line.spans:
            self._line = line
            self.refresh(Region(0, 0, *self.size))  # marked on the screen at once

    def render(self) -> Content:
        """The line for the width the row has."""
        if self._line is None:
            self._line = self._built()
        return self._line
