"""The local port: this node's ``FleetOps`` and its monitor, as the console (and the agent) use
them (``tui.ops.port.Fleet``).

An adapter, not a second door: every command goes to the operations service. It adds what only
a front end needs: what it can run now (a console watching ports offers only adoption until its
servers are adopted), the monitor's STOPPING marks while a GPU's server is being stopped, and
the reads (profiles, journal, status document, logs) the console shows.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from tui import paths
from tui.control.stop_release import DrainProgress
from tui.fleet.snapshot import FleetSnapshot
from tui.logs.long_lines import tail_lines
from tui.ops.adoption import AdoptPlan, AdoptRequest
from tui.ops.alerts.engine import AlertFired
from tui.ops.commands import (
    Adopt,
    Apply,
    Canary,
    Kill,
    Kind,
    Op,
    Relaunch,
    Restore,
    Rollback,
    Rollout,
    Saved,
    SaveProfile,
    StartAutotune,
    StartPipeline,
    SteerAutotune,
    StopFleet,
    StopPipeline,
)
from tui.ops.events import EventSink, OpEvent
from tui.ops.journal import JournalRead, read_journal
from tui.ops.marks import OperationMark
from tui.ops.port import (
    Capabilities,
    FleetReads,
    Refused,
    SearchStatus,
    Tuning,
    refuse_unless_capable,
)
from tui.ops.service import FleetOps
from tui.pipeline.energy import JobEnergy, ledger_path, read_ledger
from tui.pipeline.status import PipelineStatus, read_status
from tui.profiles import Profile, ProfileError
from tui.retune.events import GpuFailed, GpuPhase
from tui.retune.preflight import Preflight
from tui.state.fleet_state import GpuState, profile_of, read_running

R = TypeVar("R")

WATCHING = "it only watches ports until their servers are adopted (A)"
"""Why a console watching ports runs nothing but the adoption."""


class Monitor(Protocol):
    """The fleet monitor as the port uses it (``tui.fleet.monitor.FleetMonitor``)."""

    async def poll(self) -> FleetSnapshot:
        """One snapshot."""
        ...

    def mark_stopping(self, gpu: int, stopping: bool = True) -> None:
        """Show ``gpu``'s server as stopping (until it is gone), or withdraw the mark."""
        ...

    def log_paths(self) -> dict[int, str]:
        """The logs it follows, by GPU (the preflight calibrates on them)."""
        ...


class Autotune(Protocol):
    """The detached autotune search as a port starts, steers and reads it (``tui.autotune``,
    which sits above the operations core: the console's wiring passes it in,
    ``tui.console_wiring.DetachedAutotune``). Blocking: the port calls it from a thread."""

    def start(self, argv: Sequence[str]) -> object:
        """Start ``gpufleet autotune start`` with ``argv``, detached."""
        ...

    def steer(self, action: str) -> None:
        """Ask the running search to pause, resume or stop."""
        ...

    def status(self) -> SearchStatus:
        """The search's status document and whether its process runs (raises
        ``StateFileError`` when the document cannot be read)."""
        ...


class LocalFleet:
    """This node's fleet: commands through ``FleetOps``, reads from its files and monitor.

    Args:
        ops: The operations service.
        monitor: The fleet monitor (snapshots, STOPPING marks, the logs the preflight
            calibrates on); None: no snapshots, marks or logs (a caller such as the CLI).
        watching: A console watching ports, not a profile's fleet: it offers only adoption
            until its servers are adopted, then everything a profile's console offers.
        log_dir: With ``watching``: where the watched servers log (None: their stdout files).
        log_pattern: Their log file name in it.
        status_path: The job's status document (default: the state directory's).
        marks: The journal's markers for the chart (default: none).
        autotune: Starts and steers the autotune search (None: no autotune here).
    """

    def __init__(
        self,
        ops: FleetOps,
        monitor: Monitor | None = None,
        *,
        watching: bool = False,
        log_dir: str | None = None,
        log_pattern: str = "sglang_gpu{gpu}.log",
        status_path: Path | None = None,
        marks: Callable[[], list[OperationMark]] | None = None,
        autotune: Autotune | None = None,
    ) -> None:
        self.ops = ops
        """The one door."""
        self.monitor = monitor
        """The fleet monitor."""
        self.watching = watching
        """Watching ports, not yet adopted."""
        self.log_dir = log_dir
        """Where watched servers log."""
        self.log_pattern = log_pattern
        """Their log file name."""
        self.status_path = status_path or paths.pipeline_status_file()
        """The job's status document."""
        self._marks = marks
        self.autotune = autotune
        """The autotune search's control, if any."""

    @property
    def reads(self) -> FleetReads:
        """This port reads itself."""
        return self

    def capabilities(self) -> Capabilities:
        """Every kind (the pipeline's with a pipeline, autotune's with its control); a watching
        console only adoption (and the journal) until adopted."""
        kinds = set(Kind)
        why: dict[Kind, str] = {}
        if self.ops.pipeline is None:
            kinds.discard(Kind.PIPELINE)
            why[Kind.PIPELINE] = "this console knows no generation pipeline to start or stop"
        if self.autotune is None:
            kinds.discard(Kind.AUTOTUNE)
            why[Kind.AUTOTUNE] = "this console has no autotune search (gpufleet autotune start)"
        if self.watching:
            kinds &= {Kind.ADOPT, Kind.JOURNAL}
            why |= {kind: WATCHING for kind in Kind if kind not in kinds}
        return Capabilities(
            frozenset(kinds),
            why,
            stops_pipeline_with_fleet=self.ops.stop_pipeline_with_fleet
            and self.ops.pipeline is not None,
            starts_fresh_job=self.ops.starts_fresh_job,
            follows_autotune=self.autotune is not None,
        )

    async def snapshot(self) -> FleetSnapshot:
        """The monitor's snapshot (an empty fleet without one)."""
        return await self.monitor.poll() if self.monitor is not None else FleetSnapshot()

    # --- commands ---------------------------------------------------------------------------

    async def run(self, command: Op[R], sink: EventSink | None = None) -> R:
        """Run ``command`` through ``FleetOps`` (see each command).

        Raises:
            Refused: this port cannot run its kind now.
        """
        refuse_unless_capable(self.capabilities(), command)
        return cast(R, await self._run(command, self.sink(sink)))

    async def _run(self, command: Op[Any], sink: EventSink) -> object:
        ops = self.ops
        match command:
            case Kill(gpus, mode, confirmed, drain_s):
                found = {c.gpu: c for c in confirmed}
                return await self._kill(gpus, sink, mode, confirmed=found, drain_s=drain_s)
            case Relaunch(gpus, confirmed, mode):
                found = {c.gpu: c for c in confirmed}
                return tuple(await ops.relaunch(gpus, sink, mode, confirmed=found))
            case Apply(profile, gpus, measure, mode):
                return await ops.apply(profile, gpus, sink, measure=measure, mode=mode)
            case Rollback(gpus, batch, all_at_once):
                return await ops.rollout_back(gpus, batch, sink, all_at_once=all_at_once)
            case Restore(gpus, expect):
                return await ops.rollback(gpus, sink, expect=expect)
            case Canary(profile, gpu):
                return await ops.canary(profile, gpu, sink)
            case Rollout(profile, batch, gpus):
                return await ops.rollout(profile, batch, gpus, sink)
            case StopFleet(mode):
                return tuple(await ops.stop_fleet(sink, mode))
            case StartPipeline():
                await ops.start_pipeline()
                return None
            case StopPipeline():
                await ops.stop_pipeline()
                return None
            case Adopt(plan):
                adopted = await ops.adopt(plan, sink)
                self.ops.base, self.watching = plan.profile, False  # it operates them from now
                return adopted
            case SaveProfile(profile):
                return Saved((str(await asyncio.to_thread(ops.save_profile, profile)),))
            case StartAutotune(argv) if self.autotune is not None:
                await asyncio.to_thread(self.autotune.start, argv)  # detached: nothing to wait on
                return None
            case SteerAutotune(action) if self.autotune is not None:
                await asyncio.to_thread(self.autotune.steer, action)
                return None
        raise Refused(f"{type(command).__name__}: not a command this port runs")

    async def _kill(self, gpus: Sequence[int], sink: EventSink, *args: Any, **kw: Any) -> object:
        for gpu in gpus:
            self.mark(gpu, True)
        try:
            return tuple(await self.ops.kill(gpus, sink, *args, **kw))
        finally:
            # The stop ended, either way: a server it stopped is gone (its panel says so at
            # the next poll), one it did not is not stopping. A mark kept after a stop that
            # acted on nothing read "stopping" for 70 s while the server kept serving.
            for gpu in gpus:
                self.mark(gpu, False)

    def mark(self, gpu: int, stopping: bool) -> None:
        """Show ``gpu`` as STOPPING (or withdraw the mark) on the monitor, if there is one."""
        # On the event loop: the monitor is not thread-safe. Its mark clears itself once the
        # process is gone, so only a failed stop withdraws it.
        if self.monitor is not None:
            with contextlib.suppress(ValueError):  # a GPU the monitor does not show
                self.monitor.mark_stopping(gpu, stopping)

    def sink(self, on_event: EventSink | None) -> EventSink:
        """``on_event`` with the STOPPING marks added."""

        def sink(event: OpEvent) -> None:
            starts_stop = isinstance(event, GpuPhase) and event.phase == "stopping"
            drains = isinstance(event, DrainProgress) and event.stage == "draining"
            if (starts_stop or drains) and isinstance(event, GpuPhase | DrainProgress):
                self.mark(event.gpu, True)
            elif isinstance(event, GpuFailed):
                # Whatever failed (the stop refused or failed, or the launch after it): a
                # server that still runs is not stopping any more; one that is gone clears its
                # mark anyway. A mark left on read "stopping" for ever.
                self.mark(event.gpu, False)
            if on_event is not None:
                on_event(event)

        return sink

    # --- reads ------------------------------------------------------------------------------

    def profile_names(self) -> list[str]:
        """Names of the profiles that can run on this fleet. Blocking."""
        return self.ops.profile_names()

    def current_profile(self) -> str | None:
        """The profile most of the fleet runs. Blocking."""
        return self.ops.current_profile()

    def load_profile(self, name: str) -> Profile:
        """The profile ``name`` as it would run on this fleet (fitted): the saved one, else the
        one a GPU runs under that name (an apply from the tuning form writes no file). Blocking.

        Raises:
            ProfileError: it cannot be loaded, and no GPU runs it.
        """
        try:
            return self.ops.load(name)
        except ProfileError:
            running = [s.current for s in read_running().values() if s.current_name == name]
            if not running or running[0] is None:
                raise
            return self.ops.fit(profile_of(running[0]))

    async def preflight(self, profile: Profile, gpus: tuple[int, ...]) -> list[Preflight]:
        """Predicted allocation of ``profile`` on ``gpus`` (nothing is stopped), calibrated on
        the logs the monitor follows."""
        logs = self.monitor.log_paths() if self.monitor is not None else None
        return await self.ops.preflight(profile, gpus, logs)

    def targets(self, gpus: tuple[int, ...]) -> tuple[int, ...]:
        """An Apply restarts ``gpus`` themselves."""
        return gpus

    def gpu_label(self, gpu: int) -> str:
        """``gpu3``."""
        return f"gpu{gpu}"

    def tuning(self, gpu: int | None) -> Tuning:
        """The form's reads are this port's own."""
        return self

    def autotune_status(self) -> SearchStatus | None:
        """The search's status on this node (None: no autotune control was given). Blocking."""
        return self.autotune.status() if self.autotune is not None else None

    def running(self) -> dict[int, GpuState]:
        """The fleet state's current and previous profile of each GPU. Blocking."""
        return read_running()

    def journal(self) -> JournalRead:
        """The journal at ``tui.paths.journal_file()``. Blocking."""
        return read_journal()

    def marks(self) -> list[OperationMark]:
        """The journal's markers (none unless the console asked for them). Blocking."""
        return self._marks() if self._marks is not None else []

    def pipeline_status(self) -> PipelineStatus | None:
        """The status document, or None when missing or malformed. Blocking."""
        return read_status(self.status_path)

    def job_energy(self) -> JobEnergy | None:
        """The ledger ``gpufleet generate`` keeps beside the job's status document."""
        return read_ledger(ledger_path(self.status_path))

    def node_alerts(self) -> tuple[AlertFired, ...] | None:
        """None: the console runs this node's rules itself (``tui.ui.alerts``)."""
        return None

    def log_tail(self, path: Path, max_lines: int) -> list[str]:
        """The last ``max_lines`` lines (at most 1 MiB of them, each cut at 64 KiB). Blocking."""
        return tail_lines(path, max_lines)

    def canary_controls(self, gpu: int) -> tuple[int, ...] | None:
        """Every other running GPU is the control (``FleetOps.canary``)."""
        return None

    async def plan_adoption(
        self, ports: tuple[int, ...], gpus: tuple[int, ...], name: str
    ) -> AdoptPlan:
        """What adopting these servers would write (reads only), their logs in the console's
        ``--log-dir`` when it has one.

        Raises:
            AdoptError: bad input or a port that cannot be adopted (one line naming it).
        """
        request = AdoptRequest(ports, name, gpus, self.log_dir, self.log_pattern)
        return await self.ops.plan_adoption(request)
