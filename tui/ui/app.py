"""``FleetApp``: wires the sources to the screens, runs the polls, performs the intents."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from typing import Any

from textual import events, work
from textual.app import App
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from tui import paths, plain
from tui.fleet.snapshot import FleetSnapshot
from tui.history import HistoryRecorder
from tui.ops.commands import Apply, Canary, Command, Kind, Op, Rollback, Rollout, StopFleet
from tui.ops.events import OpEvent
from tui.ops.marks import mark_time
from tui.ops.port import Fleet, ReadOnlyFleet
from tui.ops.types import DrainProgress
from tui.ui.alerts.host import ALERTS_BINDING, AlertsHost
from tui.ui.commands import BindingCommands
from tui.ui.detail.detail_screen import DetailScreen
from tui.ui.gate import why_key_is_off
from tui.ui.help_screen import HelpScreen, help_sections
from tui.ui.loss_toasts import asked, toast_after
from tui.ui.main_screen import MainScreen
from tui.ui.messages import (
    FleetUpdated,
    OperationRequested,
    PanelOpened,
    PipelineStatusRead,
)
from tui.ui.operation_host import OperationHost
from tui.ui.pipeline.chart_read import SeriesSource
from tui.ui.quit_screen import AfterFailedStop, QuitChoice, QuitScreen, StopFailedScreen
from tui.ui.readonly import READ_ONLY
from tui.ui.retune.apply_screen import ApplyScreen
from tui.ui.rollout.canary_screen import CanaryScreen
from tui.ui.rollout.rollout_screen import RolloutScreen

FLEET_POLL = "fleet-poll"
"""Worker group of the fleet poll."""
PIPELINE_READ = "pipeline-status"
"""What a failed read of the status document is logged as (it runs in the fleet poll)."""
ACTIONS = "actions"
"""Worker group of backend operations."""
QUIT = "quit"
"""Worker group of the stop that ends the console."""
SOON_POLL_S = 0.2
"""The fleet poll's interval while a snapshot asks for a sooner refresh (a server warming up:
its ready line then shows within a fraction of a second)."""
HISTORY = "history-write"
"""Worker group of the history's batched writes."""


class FleetApp(OperationHost, AlertsHost):
    """The console. Every source is a constructor argument, so tests and the demo inject theirs."""

    CSS_PATH = "app.tcss"
    TITLE = "gpufleet"
    COMMANDS = App.COMMANDS | {BindingCommands}
    BINDINGS = [
        Binding("question_mark", "help", "Keys", id="app.help", key_display="?"),
        Binding("q", "request_quit", "Quit", id="app.quit"),
        ALERTS_BINDING,
    ]

    def __init__(
        self,
        port: Fleet,
        *,
        profile: str | None = None,
        poll_interval_s: float = 1.0,
        readonly: bool = False,
        node_groups: bool = False,
        history: HistoryRecorder | None = None,
    ) -> None:
        """Args:
        port: The fleet: its snapshots, its reads, and every operation (``tui.ops.port``).
        profile: Profile named on the command line (offered by the tune key).
        poll_interval_s: Seconds from the end of one poll to the start of the next (and between
            reads of the status document).
        readonly: Watch only: every key that changes the fleet or the job is disabled and the
            port is wrapped in ``ReadOnlyFleet``, which refuses every command.
        node_groups: Group the panels by node (a console over many nodes' agents).
        history: Records every snapshot and status document (default: the state directory's
            ``tui.paths.history_file()``); the generation pane's chart reads it back.
        """
        super().__init__()
        self.readonly = readonly
        """Whether the console only watches (``tui.ui.gate`` reads it)."""
        self.port: Fleet = ReadOnlyFleet(port) if readonly else port
        """The fleet (read-only: wrapped so that every command is refused)."""
        self.profile = profile
        """The profile from the command line."""
        self.poll_interval_s = poll_interval_s
        """Seconds between polls."""
        self._status_wait = float("inf")
        """Seconds of poll delays since the status document was read (again at the interval)."""
        self._status_posted: PipelineStatusRead | None = None
        """The last status reading handed down (an equal one is not posted again)."""
        self.history: HistoryRecorder = history or HistoryRecorder.at(paths.history_file())
        """The fleet's time series, written in batches from a thread worker."""
        self.chart_source: SeriesSource | None = None
        """Where the generation pane's chart reads instead of ``history`` (``--prometheus``)."""
        self.close_on_exit: Callable[[], Awaitable[None]] | None = None
        """Closed on the console's loop as it quits (a many-node port's HTTP client, kept open
        for its whole life)."""
        self.freeze_heap = False
        """Once the first snapshot is drawn, move every object alive then out of the garbage
        collector's scans (``freeze_startup_heap``). The console's command sets it; tests,
        which run many apps in one process, do not."""
        self.main_screen = MainScreen(self.port, profile, node_groups=node_groups)
        """The grid screen (the app's base screen)."""
        # Many nodes: the agents' alerts come with the port (an in-memory read); no rules here.
        self.alerts_from_nodes = self.port.reads.node_alerts() is not None  # tui.ui.alerts

    def get_default_screen(self) -> MainScreen:
        """The grid is the base screen."""
        return self.main_screen

    def on_mount(self) -> None:
        """Start the poll: one worker for the console's life (see ``poll_fleet``)."""
        if self.readonly:
            self.title = f"{self.TITLE} ({READ_ONLY})"
        self.poll_fleet()

    # --- polls -----------------------------------------------------------------------------

    @work(exclusive=True, group=FLEET_POLL, exit_on_error=False)
    async def poll_fleet(self) -> None:
        """Poll for the console's life: a snapshot, then the interval's sleep (shorter while a
        snapshot asks for a sooner refresh), so polls never overlap. Why one loop: a worker
        and a timer per poll cost Textual a task, three state messages, a timer and a callback
        whose signature it inspects, each second; here a poll costs one message (two when the
        status document is read). The sleep is the app loop's own, so every other pump (the
        detail screen's included) runs between polls as before."""
        while True:
            soon = False
            try:
                soon = await self._poll_once()
            except Exception as error:  # one failed poll must never end the polling
                self.log.error(f"{FLEET_POLL} failed: {error!r}")
            delay = min(SOON_POLL_S, self.poll_interval_s) if soon else self.poll_interval_s
            self._status_wait += delay
            await asyncio.sleep(delay)

    async def _poll_once(self) -> bool:
        """Take one fleet snapshot and post it; once per ``poll_interval_s``, read the status
        document alongside. Returns whether the snapshot asks for a sooner refresh."""
        status = None
        if self._status_wait >= self.poll_interval_s:  # not at every sooner poll
            self._status_wait = 0.0
            status = asyncio.ensure_future(self._read_status())
        try:
            snapshot = await self.port.snapshot()
        finally:
            if status is not None:
                await status
        self.post_message(FleetUpdated(snapshot))
        return snapshot.refresh_soon

    async def _read_status(self) -> None:
        """Read the status document and the retune marks in a thread and post them; a failed
        read is logged (the fleet poll goes on)."""

        reads = self.port.reads

        def read() -> PipelineStatusRead:
            status = reads.pipeline_status()
            return PipelineStatusRead(status, tuple(sorted(reads.marks(), key=mark_time)))

        try:
            reading = await asyncio.to_thread(read)
        except Exception as error:
            self.log.error(f"{PIPELINE_READ} failed: {error!r}")
            return
        # The same document and marks as last time (no pipeline, or one between its writes):
        # nothing to hand down, so no message to dispatch each second. The history keeps a
        # document's rates once anyway, and the screen's reactives ignore an equal value.
        last = self._status_posted
        if (
            last is not None
            and last.status == reading.status
            and last.retune_marks == reading.retune_marks
        ):
            return
        self._status_posted = reading
        self.post_message(reading)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Report failed operations without stopping."""
        if event.state is WorkerState.ERROR:
            group = event.worker.group
            self.log.error(f"{group} failed: {event.worker.error!r}")
            if group == ACTIONS:
                self.notify(str(event.worker.error), title="Operation failed", severity="error")

    def on_fleet_updated(self, message: FleetUpdated) -> None:
        """Hand the snapshot down to every screen that shows the fleet, and to the history."""
        self.history.add_fleet(message.snapshot)
        if self.freeze_heap:
            self.freeze_heap = False
            if not plain.off("gcfreeze"):  # GPUFLEET_PLAIN=gcfreeze: the collector as it comes
                self.call_after_refresh(freeze_startup_heap)
        if self.history.due:  # a thread only every few seconds, for the batch
            self.write_history()
        self.main_screen.fleet = message.snapshot
        carried = self.port.reads.node_alerts() if self.alerts_from_nodes else None
        self.feed_alerts(message.snapshot, self.main_screen.pipeline_status, carried)
        for screen in self.screen_stack:
            # A screen closed as the console quits is still on the stack, without its widgets:
            # the poll, which runs until the app's workers are cancelled, may post to it then.
            if isinstance(screen, DetailScreen) and screen.is_running:
                screen.fleet = message.snapshot

    def on_pipeline_status_read(self, message: PipelineStatusRead) -> None:
        """Hand the reading to the main screen, and its rates to the history."""
        self.history.add_pipeline(message.status)
        self.main_screen.record_pipeline(message.status, message.retune_marks)

    @work(thread=True, group=HISTORY, exit_on_error=False)
    def write_history(self) -> None:
        """Write the history's batch when one is due (every few seconds), off the loop."""
        self.history.flush_if_due()

    async def on_unmount(self) -> None:
        """Write what the history still holds; close what lives as long as the console."""
        self.history.close()
        await self.close_alerts()  # tui.ui.alerts
        if self.close_on_exit is not None:
            await self.close_on_exit()

    @property
    def fleet(self) -> FleetSnapshot:
        """The newest snapshot."""
        return self.main_screen.fleet

    # --- screens ---------------------------------------------------------------------------

    def on_key(self, event: events.Key) -> None:
        """A key typed into a bar that is opening is its text (a burst: '/ready'); a key
        whose binding is off says why, naming it (it did nothing, silently). Runs before the
        bindings are tried: what is off now is what the key will not do."""
        screen = self.screen
        if isinstance(screen, MainScreen) and screen.take_typed(event):
            return
        off = why_key_is_off(screen, event.key)
        if off is None:
            return
        what, why = off
        key = self.get_key_display(Binding(event.key, "", ""))
        self.notify(f"{key} ({what}) is off: {why}", title="Key off", severity="warning", timeout=4)

    def on_panel_opened(self, message: PanelOpened) -> None:
        """Open the detail of a panel."""
        self.push_screen(DetailScreen(message.gpu, self.fleet, self.port))

    def action_help(self) -> None:
        """Show every key."""
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(help_sections(self.BINDINGS), readonly=self.readonly))

    def action_request_quit(self) -> None:
        """Ask what to do with the fleet, then quit (or not)."""
        if isinstance(self.screen, QuitScreen):
            return
        capabilities = self.port.capabilities()
        can_stop = Kind.STOP_FLEET in capabilities
        stops = capabilities.stops_pipeline_with_fleet
        screen = QuitScreen(
            can_stop, len(self.fleet.panels), readonly=self.readonly, stops_pipeline=stops
        )
        self.push_screen(screen, self._quit_chosen)

    def _quit_chosen(self, choice: QuitChoice | None) -> None:
        if choice is QuitChoice.STOP_FLEET:
            # A drain takes seconds to minutes: the stop runs in a worker and the console stays
            # live (grid, details, logs) until it is over; then it closes.
            self.notify("draining and stopping every server...", title="Quitting")
            self.run_worker(self._stop_then_exit(), group=QUIT, exclusive=True, exit_on_error=False)
        elif choice is QuitChoice.KEEP_FLEET:
            self.exit()

    async def _stop_then_exit(self) -> None:
        def progress(event: OpEvent) -> None:
            if isinstance(event, DrainProgress):
                load = "" if event.running is None else f", {event.running} running"
                self.sub_title = (
                    f"quitting: GPU {event.gpu} {event.stage} {event.elapsed_s:.0f} s{load}"
                )

        try:
            await self.port.run(StopFleet(), progress)
        except Exception as error:  # servers still run: never close on them unasked
            self.sub_title = ""
            self.notify(str(error), title="Stopping the fleet failed", severity="error")
            self.push_screen(StopFailedScreen(str(error)), self._after_failed_stop)
            return
        self.exit()

    def _after_failed_stop(self, choice: AfterFailedStop | None) -> None:
        if choice is AfterFailedStop.RETRY:
            self.notify("stopping every server again...", title="Quitting")
            self.run_worker(self._stop_then_exit(), group=QUIT, exclusive=True, exit_on_error=False)
        elif choice is AfterFailedStop.LEAVE:
            self.exit()

    # --- commands from the screens, run on the port -------------------------------------------

    async def on_operation_requested(self, message: OperationRequested) -> None:
        """Run a command: an apply, a canary, a rollout or a rollback in the background, its
        report shown (live phases, verify report, verdict); any other in a worker, its outcome
        toasted (a refusal or a failure is the worker's error, ``on_worker_state_changed``)."""
        report = self._report_of(message.command, message.words)
        if report is not None:
            await self.start_operation(report)
        else:
            self._perform(message.command)

    def _report_of(self, command: Command, words: str) -> Screen[Any] | None:
        match command:
            case Apply():
                return ApplyScreen(self.port, command)
            case Canary(_, gpu):
                fleet = tuple(panel.gpu_index for panel in self.fleet.panels)
                controls = self.port.reads.canary_controls(gpu)
                return CanaryScreen(self.port, command, fleet, controls)
            case Rollout() | Rollback():
                return RolloutScreen(self.port, command, words)
        return None

    def _perform(self, command: Op[Any]) -> None:
        async def run() -> None:
            toast = toast_after(command, await self.port.run(command))  # a loss is never "Done"
            self.main_screen.refresh_bindings()  # an adoption turns every key on
            self.notify(
                toast.message, title=toast.title, severity=toast.severity, timeout=toast.timeout
            )

        self.run_worker(run(), group=ACTIONS, exit_on_error=False, name=asked(command))


def freeze_startup_heap() -> None:
    """Collect once, then freeze what is alive: the console's long-lived objects (Textual's DOM
    and styles, the modules' objects, ~100k) go to a generation the collector never scans.

    Why: a full (generation 2) collection walked all of them, 25 ms each on the H200, every
    half a minute or so under load (~5% of the console's CPU); what the console allocates
    afterwards is collected as before. CPython's documented use of ``gc.freeze``.
    """
    gc.collect()
    gc.freeze()
