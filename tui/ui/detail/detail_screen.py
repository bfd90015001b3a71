"""One GPU in full: every number, the allocation lines, and its log (``LogPanel``)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.content import Content
from textual.css.query import NoMatches
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Header, Static

from tui.fleet.snapshot import FleetSnapshot, GpuPanel
from tui.ops.commands import Kill, Kind, Relaunch
from tui.ops.port import Fleet
from tui.ui.confirm import ConfirmScreen
from tui.ui.describe import describe_servers
from tui.ui.detail.log_panel import LogPanel
from tui.ui.detail.observed_text import latency_lines, observed_lines
from tui.ui.footer import FleetFooter
from tui.ui.format import NA, gib, num, pct
from tui.ui.gate import ReadOnlyGate
from tui.ui.grid.panel_lines import (
    crash_line,
    error_line,
    max_running,
    pressure_line,
    state_line,
)
from tui.ui.messages import OperationRequested
from tui.ui.stop_screen import StopChoice, StopScreen


def numbers_text(panel: GpuPanel) -> Content:
    """Every number of the GPU and its server, one per line."""
    lines = [state_line(panel)]
    gpu = panel.gpu
    if gpu is None:
        lines.append(Content.styled(panel.gpu_note or "no GPU reading", "$text-muted"))
    else:
        lines += [
            Content(f"{gpu.name}  uuid {gpu.uuid}"),
            Content(
                f"memory {gib(gpu.memory_used)} / {gib(gpu.memory_total)} GiB used, "
                f"{gib(gpu.memory_free)} GiB free"
            ),
            Content(
                f"util gpu {pct(gpu.utilization_gpu)}  mem {pct(gpu.utilization_memory)}  "
                f"temp {num(gpu.temperature_c)}°C  power {num(gpu.power_w)}/"
                f"{num(gpu.power_limit_w)} W"
            ),
            Content(f"clocks sm {num(gpu.sm_clock_mhz)} MHz  mem {num(gpu.mem_clock_mhz)} MHz"),
        ]
        lines += [
            Content(f"process {p.pid} {p.name}: {gib(p.used_bytes)} GiB") for p in gpu.processes
        ]
    server = panel.server
    if server is not None:
        lines += [
            Content(f"KV tokens {num(server.kv_tokens)}  mamba slots {num(server.mamba_slots)}"),
            Content.assemble(
                "max running requests ",
                max_running(server),
                "  capped by SGLang"
                if server.capped
                else f"  (requested {num(server.max_running_requested)})",
            ),
            Content(f"running {num(server.running)}  queued {num(server.queued)}"),
            Content(f"gen {num(server.gen_throughput, 1)} tok/s"),
            *observed_lines(panel, server),
            Content(f"log {server.log_path or NA}"),
        ]
        if server.stuck_for_s is not None:
            lines.append(
                Content.styled(
                    f"no progress for {server.stuck_for_s:.0f}s with requests waiting: the "
                    "scheduler answers but does not run (decode and prefill stopped)",
                    "bold $error",
                )
            )
    for extra in (crash_line(server), pressure_line(server), error_line(server)):
        if extra is not None:
            lines.append(extra)
    return Content("\n").join(lines)


def allocation_text(panel: GpuPanel) -> Content:
    """The latency percentiles (``observed_text``), then the startup allocation lines, or why
    there are none."""
    server = panel.server
    latency = latency_lines(server.latency) if server is not None else []
    if server is None or not server.allocation_lines:
        allocation = [Content.styled("no allocation lines yet", "$text-muted")]
    else:
        allocation = [Content(line) for line in server.allocation_lines]
    return Content("\n").join([*latency, *([Content("")] if latency else []), *allocation])


KINDS = {"kill": Kind.KILL, "relaunch": Kind.RELAUNCH}
"""The kind of command each of the detail's changing keys sends."""


class DetailScreen(ReadOnlyGate[None]):
    """Detail of GPU ``gpu``. The app sets ``fleet``; the log is read in a thread worker."""

    DEFAULT_CSS = """
    DetailScreen #detail-top {
        height: auto;
        max-height: 50%;
    }
    DetailScreen #detail-numbers, DetailScreen #detail-allocation {
        width: 1fr;
        height: auto;
        border: round $panel-lighten-2;
        border-title-style: bold;
        padding: 0 1;
    }
    """

    AUTO_FOCUS = "#detail-log"
    """The log, not a filter field, has focus at first, so the keys work at once."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="detail.back"),
        Binding("k", "kill", "Kill", id="detail.kill"),
        Binding("r", "relaunch", "Relaunch", id="detail.relaunch"),
    ]

    fleet: reactive[FleetSnapshot] = reactive(FleetSnapshot, always_update=True)
    """The newest fleet snapshot (set by the app)."""

    def __init__(
        self,
        gpu: int,
        fleet: FleetSnapshot,
        port: Fleet,
        refresh_s: float = 1.0,
    ) -> None:
        """Args:
        gpu: The GPU shown.
        fleet: The snapshot at the time of opening.
        port: The fleet: its capabilities, and its log reads (commands go up as messages).
        refresh_s: Seconds between reads of what the log appended.
        """
        super().__init__()
        self.gpu = gpu
        """The GPU shown."""
        self.port = port
        """What the fleet offers and reads."""
        self.refresh_s = refresh_s
        """Seconds between log reads."""
        self.set_reactive(DetailScreen.fleet, fleet)

    @property
    def panel(self) -> GpuPanel | None:
        """This GPU's panel in the newest snapshot."""
        return next((p for p in self.fleet.panels if p.gpu_index == self.gpu), None)

    @property
    def log_panel(self) -> LogPanel:
        """The log viewer."""
        return self.query_one(LogPanel)

    def compose(self) -> ComposeResult:
        """Numbers and allocation side by side, then the log viewer."""
        yield Header()
        with Horizontal(id="detail-top"):
            yield Static(id="detail-numbers")
            yield Static(id="detail-allocation")
        log = LogPanel(self.port.reads.log_tail, self.refresh_s, id="log-panel")
        log.log_path = self._log_path()
        yield log
        yield FleetFooter()

    def on_mount(self) -> None:
        """Title the boxes, draw the numbers."""
        self.title = f"GPU {self.gpu}"
        self.query_one("#detail-numbers").border_title = "Numbers"
        self.query_one("#detail-allocation").border_title = "Latency · allocation"
        self._show_numbers()

    def _log_path(self) -> str | None:
        panel = self.panel
        return None if panel is None or panel.server is None else panel.server.log_path

    def watch_fleet(self) -> None:
        """New numbers (and the log, when the server's changed). Not while its widgets are gone:
        a snapshot posted as the app closes reaches a screen still mounted but emptied."""
        if not self.is_mounted:
            return
        try:
            self._show_numbers()
            self.log_panel.log_path = self._log_path()
        except NoMatches:
            return

    def _show_numbers(self) -> None:
        panel = self.panel
        numbers = self.query_one("#detail-numbers", Static)
        allocation = self.query_one("#detail-allocation", Static)
        if panel is None:
            numbers.update(Content.styled(f"GPU {self.gpu} is not in the fleet", "$error"))
            allocation.update("")
            return
        numbers.update(numbers_text(panel))
        allocation.update(allocation_text(panel))

    def check_operation(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Kill and relaunch show disabled when the port lacks them."""
        kind = KINDS.get(action)
        return kind is None or kind in self.port.capabilities() or None

    def disabled_reason(self, action: str, parameters: tuple[object, ...]) -> str:
        """Why kill or relaunch is off: the port's reason."""
        kind = KINDS.get(action)
        return "" if kind is None else self.port.capabilities().reason(kind)

    def _confirm(self, title: str, message: Message) -> None:
        def done(confirmed: bool | None) -> None:
            if confirmed:
                self.post_message(message)

        affected = describe_servers(self.fleet, (self.gpu,))
        self.app.push_screen(ConfirmScreen(title, affected, "Restart"), done)

    def action_kill(self) -> None:
        """Stop this GPU's server, the way the operator chooses (drain, terminate, kill)."""

        def done(choice: StopChoice | None) -> None:
            if choice is not None:
                kill = Kill((self.gpu,), choice.mode, (), choice.drain_s)
                self.post_message(OperationRequested(kill))

        affected = describe_servers(self.fleet, (self.gpu,))
        self.app.push_screen(StopScreen(f"Stop the server on GPU {self.gpu}?", affected), done)

    def action_relaunch(self) -> None:
        """Relaunch this GPU's server, after confirmation."""
        relaunch = OperationRequested(Relaunch((self.gpu,)))
        self._confirm(f"Relaunch the server on GPU {self.gpu}?", relaunch)
