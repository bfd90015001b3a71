"""``FleetApp``: wires the sources to the screens, runs the polls, performs the intents."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual import events, work
from textual.app import App
from textual.binding import Binding
from textual.worker import Worker, WorkerState

from tui import paths, plain
from tui.control.stop_release import DrainProgress
from tui.fleet.snapshot import FleetSnapshot
from tui.history import HistoryRecorder
from tui.ops.events import OpEvent
from tui.ops.marks import mark_time
from tui.ui.alerts.host import ALERTS_BINDING, AlertsHost
from tui.ui.commands import BindingCommands
from tui.ui.detail.detail_screen import DetailScreen
from tui.ui.gate import why_key_is_off
from tui.ui.help_screen import HelpScreen, help_sections
from tui.ui.loss_toasts import Toast, relaunch_and_say, stop_and_say
from tui.ui.main_screen import MainScreen
from tui.ui.messages import (
    AdoptRequested,
    ApplyProfileRequested,
    FleetUpdated,
    KillRequested,
    PanelOpened,
    PipelineStartRequested,
    PipelineStatusRead,
    PipelineStopRequested,
    RelaunchRequested,
    RollbackRequested,
)
from tui.ui.operation_host import OperationHost
from tui.ui.pipeline.chart_read import SeriesSource
from tui.ui.quit_screen import AfterFailedStop, QuitChoice, QuitScreen, StopFailedScreen
from tui.ui.readonly import READ_ONLY, ReadOnlyActions
from tui.ui.retune.apply_screen import ApplyScreen
from tui.ui.rollout.canary_screen import CanaryScreen
from tui.ui.rollout.messages import CanaryRequested, RolloutRequested
from tui.ui.rollout.rollout_screen import RolloutScreen
from tui.ui.sources import (
    Adopter,
    FleetActions,
    FleetPoller,
    Intent,
    JournalReader,
    LogTail,
    NoActions,
    RetuneMarks,
    RunningReader,
    StatusReader,
    no_retune_marks,
    read_default_journal,
    read_default_running,
    read_pipeline_status,
    tail_file,
)

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
        poller: FleetPoller,
        *,
        actions: FleetActions | None = None,
        status_reader: StatusReader = read_pipeline_status,
        status_path: Path | None = None,
        log_tail: LogTail = tail_file,
        retune_marks: RetuneMarks = no_retune_marks,
        profile: str | None = None,
        poll_interval_s: float = 1.0,
        journal_reader: JournalReader = read_default_journal,
        running_reader: RunningReader = read_default_running,
        readonly: bool = False,
        node_groups: bool = False,
        history: HistoryRecorder | None = None,
    ) -> None:
        """Args:
        poller: Gives one fleet snapshot per call (``FleetMonitor``).
        actions: The backend for operations; None supports nothing yet.
        status_reader: Reads the pipeline status document (blocking, run in a thread).
        status_path: The status document; defaults to ``paths.pipeline_status_file()``.
        log_tail: Reads the newest lines of a log (blocking, run in a thread).
        retune_marks: Retune timestamps from the journal (blocking, run in a thread).
        profile: Profile named on the command line (offered by the tune key).
        poll_interval_s: Seconds from the end of one poll to the start of the next (and between
            reads of the status document).
        journal_reader: Reads the journal (journal screen, apply screen; blocking, in a thread).
        running_reader: Each GPU's current and previous profile (rollback confirm; blocking).
        readonly: Watch only: every key that changes the fleet or the job is disabled and the
            backend is wrapped in ``ReadOnlyActions``, which refuses every change.
        node_groups: Group the panels by node (a console over many nodes' agents).
        history: Records every snapshot and status document (default: the state directory's
            ``tui.paths.history_file()``); the generation pane's chart reads it back.
        """
        super().__init__()
        self.poller = poller
        """The fleet source."""
        self.readonly = readonly
        """Whether the console only watches (``tui.ui.gate`` reads it)."""
        backend: FleetActions = actions or NoActions()
        self.actions: FleetActions = ReadOnlyActions(backend) if readonly else backend
        """The backend (read-only: wrapped so that every change is refused)."""
        self.status_reader = status_reader
        """The status document source."""
        self.status_path = status_path or paths.pipeline_status_file()
        """Where the status document is."""
        self.log_tail = log_tail
        """The log source for the detail screen."""
        self.retune_marks = retune_marks
        """The journal's retune timestamps."""
        self.profile = profile
        """The profile from the command line."""
        self.poll_interval_s = poll_interval_s
        """Seconds between polls."""
        self._status_wait = float("inf")
        """Seconds of poll delays since the status document was read (again at the interval)."""
        self._status_posted: PipelineStatusRead | None = None
        """The last status reading handed down (an equal one is not posted again)."""
        self.journal_reader = journal_reader
        """The journal source."""
        self.history = history or HistoryRecorder.at(paths.history_file())
        """The fleet's time series, written in batches from a thread worker."""
        self.chart_source: SeriesSource | None = None
        """Where the generation pane's chart reads instead of ``history`` (``--prometheus``)."""
        self.close_on_exit: Callable[[], Awaitable[None]] | None = None
        """Closed on the console's loop as it quits (a many-node console's HTTP client, kept
        open for its whole life)."""
        self.freeze_heap = False
        """Once the first snapshot is drawn, move every object alive then out of the garbage
        collector's scans (``freeze_startup_heap``). The console's command sets it; tests,
        which run many apps in one process, do not."""
        self.main_screen = MainScreen(
            self.actions,
            profile,
            running_reader=running_reader,
            journal_reader=journal_reader,
            node_groups=node_groups,
        )
        """The grid screen (the app's base screen)."""

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
            snapshot = await self.poller.poll()
        finally:
            if status is not None:
                await status
        self.post_message(FleetUpdated(snapshot))
        return snapshot.refresh_soon

    async def _read_status(self) -> None:
        """Read the status document and the retune marks in a thread and post them; a failed
        read is logged (the fleet poll goes on)."""

        def read() -> PipelineStatusRead:
            status = self.status_reader(self.status_path)
            return PipelineStatusRead(status, tuple(sorted(self.retune_marks(), key=mark_time)))

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
        self.feed_alerts(message.snapshot, self.main_screen.pipeline_status)  # tui.ui.alerts
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
        self.push_screen(DetailScreen(message.gpu, self.fleet, self.actions, self.log_tail))

    def action_help(self) -> None:
        """Show every key."""
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(help_sections(self.BINDINGS), readonly=self.readonly))

    def action_request_quit(self) -> None:
        """Ask what to do with the fleet, then quit (or not)."""
        if isinstance(self.screen, QuitScreen):
            return
        can_stop = self.actions.supports(Intent.STOP_FLEET)
        stops = getattr(self.actions, "stops_pipeline_with_fleet", False) is True
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
            await self.actions.stop_fleet(progress)
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

    # --- intents from the screens, performed by the backend ---------------------------------------

    def _perform(self, what: str, operation: Callable[[], Awaitable[Toast | None]]) -> None:
        async def run() -> None:
            toast = await operation() or Toast(what)  # a loss is never "Done" (loss_toasts)
            self.notify(
                toast.message, title=toast.title, severity=toast.severity, timeout=toast.timeout
            )

        self.run_worker(run(), group=ACTIONS, exit_on_error=False, name=what)

    def on_kill_requested(self, message: KillRequested) -> None:
        """Stop servers (drain, terminate or kill, as chosen); the toast says what each GPU's
        stop did, a drain that timed out as an error naming its loss (a refusal or a failure is
        the worker's error, ``on_worker_state_changed``)."""
        self._perform(
            f"stop GPU {_gpus(message.gpus)}", lambda: stop_and_say(self.actions, message)
        )

    def on_adopt_requested(self, message: AdoptRequested) -> None:
        """Write the adoption the dialog showed; from then on the console operates them."""
        adopter = self.actions
        if not isinstance(adopter, Adopter):
            return
        plan = message.plan

        async def run() -> None:
            await adopter.adopt(plan)
            self.main_screen.refresh_bindings()  # every key now operates the adopted servers
            self.notify(
                f"adopted {plan.summary()}; nothing was signalled ({plan.path})", title="Adopted"
            )

        self.run_worker(run(), group=ACTIONS, exit_on_error=False, name=f"adopt {plan.summary()}")

    def on_relaunch_requested(self, message: RelaunchRequested) -> None:
        """Relaunch servers."""
        self._perform(
            f"relaunch GPU {_gpus(message.gpus)}", lambda: relaunch_and_say(self.actions, message)
        )

    async def on_apply_profile_requested(self, message: ApplyProfileRequested) -> None:
        """Retune with a profile, in the background, its report shown (live phases, verify
        report, verdict)."""
        await self.start_operation(
            ApplyScreen(self.actions, message.profile, message.gpus, self.journal_reader)
        )

    async def on_rollback_requested(self, message: RollbackRequested) -> None:
        """Roll back in the background, walked like a rollout (one GPU at a time unless the
        operator chose all at once), its report shown: per-GPU progress, the fleet verdict."""
        await self.start_operation(
            RolloutScreen(
                self.actions,
                message.target,
                gpus=message.gpus if message.scoped else None,
                rollback=True,
                all_at_once=message.all_at_once,
            )
        )

    async def on_canary_requested(self, message: CanaryRequested) -> None:
        """Run a canary in the background, its report shown: phases and looks, the verdict."""
        fleet = tuple(panel.gpu_index for panel in self.fleet.panels)
        # A many-node console's backend picks the controls (every node's GPUs on the profile).
        pick = getattr(self.actions, "canary_controls", None)
        controls = tuple(pick(message.gpu)) if callable(pick) else None
        await self.start_operation(
            CanaryScreen(self.actions, message.profile, message.gpu, fleet, controls)
        )

    async def on_rollout_requested(self, message: RolloutRequested) -> None:
        """Run a rollout in the background, its report shown: per-GPU progress, the summary.
        Started from a canary's report, that report closes (its `o` is spent)."""
        await self.start_operation(
            RolloutScreen(self.actions, message.profile, message.batch, message.gpus)
        )

    def on_pipeline_start_requested(self, message: PipelineStartRequested) -> None:
        """Start the pipeline."""
        self._perform("pipeline started", self.actions.start_pipeline)

    def on_pipeline_stop_requested(self, message: PipelineStopRequested) -> None:
        """Stop the pipeline."""
        self._perform("pipeline stopped", self.actions.stop_pipeline)


def _gpus(gpus: tuple[int, ...]) -> str:
    return ", ".join(str(gpu) for gpu in gpus)


def freeze_startup_heap() -> None:
    """Collect once, then freeze what is alive: the console's long-lived objects (Textual's DOM
    and styles, the modules' objects, ~100k) go to a generation the collector never scans.

    Why: a full (generation 2) collection walked all of them, 25 ms each on the H200, every
    half a minute or so under load (~5% of the console's CPU); what the console allocates
    afterwards is collected as before. CPython's documented use of ``gc.freeze``.
    """
    gc.collect()
    gc.freeze()
