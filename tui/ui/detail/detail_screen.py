"""One GPU in full: every number, the allocation lines, and a filterable tail of its log."""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Footer, Header, Input, Log, Static
from textual.worker import Worker, WorkerState

from tui.control.stop import StopMode
from tui.fleet.snapshot import FleetSnapshot, GpuPanel
from tui.ui.confirm import ConfirmScreen
from tui.ui.describe import describe_servers
from tui.ui.format import NA, gib, num, pct
from tui.ui.gate import ReadOnlyGate
from tui.ui.grid.gpu_panel import error_line, max_running, pressure_line, state_line
from tui.ui.messages import KillRequested, RelaunchRequested
from tui.ui.sources import FleetActions, Intent, LogTail
from tui.ui.stop_screen import StopScreen

LOG_LINES = 500
"""How many of the newest log lines the detail screen keeps."""


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
            Content(
                f"running {num(server.running)}  queued {num(server.queued)}  "
                f"token usage {pct(server.token_usage, 100)}  "
                f"mamba usage {pct(server.mamba_usage, 100)}"
            ),
            Content(
                f"gen {num(server.gen_throughput, 1)} tok/s  "
                f"accept length {num(server.accept_len, 2)}"
            ),
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
    for extra in (pressure_line(server), error_line(server)):
        if extra is not None:
            lines.append(extra)
    return Content("\n").join(lines)


def allocation_text(panel: GpuPanel) -> Content:
    """The startup allocation lines, or why there are none."""
    if panel.server is None or not panel.server.allocation_lines:
        return Content.styled("no allocation lines yet", "$text-muted")
    return Content("\n").join(Content(line) for line in panel.server.allocation_lines)


class DetailScreen(ReadOnlyGate[None]):
    """Detail of GPU ``gpu``. The app sets ``fleet``; the log tail is read in a thread worker."""

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
    DetailScreen #log-filter {
        margin: 0 0;
    }
    DetailScreen Log {
        height: 1fr;
        border: round $panel-lighten-2;
    }
    """

    AUTO_FOCUS = "#detail-log"
    """The log, not the filter, has focus at first, so the screen's keys work at once."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="detail.back"),
        Binding("slash", "focus_filter", "Filter log", id="detail.filter"),
        Binding("k", "kill", "Kill", id="detail.kill"),
        Binding("r", "relaunch", "Relaunch", id="detail.relaunch"),
    ]

    fleet: reactive[FleetSnapshot] = reactive(FleetSnapshot, always_update=True)
    """The newest fleet snapshot (set by the app)."""
    log_lines: reactive[tuple[str, ...]] = reactive(())
    """The newest lines of the server's log."""
    log_filter: reactive[str] = reactive("")
    """Case-insensitive substring the log lines must contain."""

    class LogRead(Message):
        """The log tail worker read the newest lines."""

        def __init__(self, lines: tuple[str, ...]) -> None:
            self.lines = lines
            """The lines, oldest first."""
            super().__init__()

        def can_replace(self, message: Message) -> bool:
            """Only the newest read matters."""
            return isinstance(message, DetailScreen.LogRead)

    def __init__(
        self,
        gpu: int,
        fleet: FleetSnapshot,
        actions: FleetActions,
        log_tail: LogTail,
        refresh_s: float = 1.0,
    ) -> None:
        """Args:
        gpu: The GPU shown.
        fleet: The snapshot at the time of opening.
        actions: The backend (only ``supports`` is used; intents go up as messages).
        log_tail: Reads the newest lines of a log file (blocking; run in a thread).
        refresh_s: Seconds between log reads.
        """
        super().__init__()
        self.gpu = gpu
        """The GPU shown."""
        self.actions = actions
        """What the backend can do."""
        self.log_tail = log_tail
        """The log source."""
        self.refresh_s = refresh_s
        """Seconds between log reads."""
        self.set_reactive(DetailScreen.fleet, fleet)

    @property
    def panel(self) -> GpuPanel | None:
        """This GPU's panel in the newest snapshot."""
        return next((p for p in self.fleet.panels if p.gpu_index == self.gpu), None)

    def compose(self) -> ComposeResult:
        """Numbers and allocation side by side, then the filter and the log."""
        yield Header()
        with Horizontal(id="detail-top"):
            yield Static(id="detail-numbers")
            yield Static(id="detail-allocation")
        with Vertical():
            yield Input(placeholder="filter the log (/)", id="log-filter")
            yield Log(id="detail-log", max_lines=LOG_LINES, auto_scroll=True)
        yield Footer()

    def on_mount(self) -> None:
        """Title the boxes, draw the numbers, start reading the log."""
        self.title = f"GPU {self.gpu}"
        self.query_one("#detail-numbers").border_title = "Numbers"
        self.query_one("#detail-allocation").border_title = "Allocation"
        self.query_one("#detail-log").border_title = "Log"
        self._show_numbers()
        self.read_log()

    def watch_fleet(self) -> None:
        """New numbers."""
        if self.is_mounted:
            self._show_numbers()

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

    @work(thread=True, exclusive=True, group="log-tail", exit_on_error=False)
    def read_log(self) -> None:
        """Read the newest log lines off the event loop and post them."""
        panel = self.panel
        path = None if panel is None or panel.server is None else panel.server.log_path
        lines = tuple(self.log_tail(Path(path), LOG_LINES)) if path else ()
        self.post_message(self.LogRead(lines))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Re-arm the log read once the previous one finished, so reads never overlap."""
        finished = (WorkerState.SUCCESS, WorkerState.ERROR)
        if event.worker.group == "log-tail" and event.state in finished:
            self.set_timer(self.refresh_s, self.read_log)

    def on_detail_screen_log_read(self, message: LogRead) -> None:
        """Keep the lines (the log redraws only when they changed)."""
        self.log_lines = message.lines

    def on_input_changed(self, event: Input.Changed) -> None:
        """Filter as the user types."""
        self.log_filter = event.value

    def watch_log_lines(self) -> None:
        """Redraw the log."""
        self._show_log()

    def watch_log_filter(self) -> None:
        """Redraw the log."""
        self._show_log()

    def _show_log(self) -> None:
        log = self.query_one("#detail-log", Log)
        needle = self.log_filter.lower()
        log.clear()
        log.write_lines(line for line in self.log_lines if needle in line.lower())

    def check_operation(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Kill and relaunch show disabled when the backend lacks them."""
        if action == "kill":
            return self.actions.supports(Intent.KILL) or None
        if action == "relaunch":
            return self.actions.supports(Intent.RELAUNCH) or None
        return True

    def action_focus_filter(self) -> None:
        """Type to filter the log."""
        self.query_one("#log-filter", Input).focus()

    def _confirm(self, title: str, message: Message) -> None:
        def done(confirmed: bool | None) -> None:
            if confirmed:
                self.post_message(message)

        affected = describe_servers(self.fleet, (self.gpu,))
        self.app.push_screen(ConfirmScreen(title, affected), done)

    def action_kill(self) -> None:
        """Stop this GPU's server, the way the operator chooses (drain, terminate, kill)."""

        def done(mode: StopMode | None) -> None:
            if mode is not None:
                self.post_message(KillRequested((self.gpu,), mode))

        affected = describe_servers(self.fleet, (self.gpu,))
        self.app.push_screen(StopScreen(f"Stop the server on GPU {self.gpu}?", affected), done)

    def action_relaunch(self) -> None:
        """Relaunch this GPU's server, after confirmation."""
        self._confirm(f"Relaunch the server on GPU {self.gpu}?", RelaunchRequested((self.gpu,)))
