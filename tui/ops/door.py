"""The operations core's door: fitting, the operation lock, the journal, typed events.

Every family of operations (``retune_ops``, ``lifecycle_ops``, ``trial_ops``, ``form_ops``) is a
mixin over ``OpsBase``; ``tui.ops.service.FleetOps`` joins them into the one door.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tui import paths
from tui.control.release import GpuPids
from tui.control.stop_release import StopReleased, StopTimeouts
from tui.ops.entries import (
    simple_entry,
)
from tui.ops.events import EventSink, OperationFinished, OperationStarted, OpEvent
from tui.ops.fit import fit_to_fleet
from tui.ops.journal import JournalEntry, JournalError, append, check_journal
from tui.ops.lock import OperationBusy, operation_lock
from tui.ops.runner import EngineRunner, gpu_pids_for
from tui.profiles import Profile, load_named
from tui.retune.calibration import CalibrationCache
from tui.retune.options import ApplyOptions
from tui.rollout.canary import (
    CanaryOptions,
)
from tui.rollout.rollout import (
    RolloutOptions,
)
from tui.state.files import check_room
from tui.state.fleet_state import (
    profile_of,
    read_fleet,
)
from tui.state.locks import LockBusy, hold

if TYPE_CHECKING:  # the pipeline's module is imported by the operations that start or stop it
    from tui.ops.pipeline import PipelineConfig

BAD_ARGUMENTS = "bad_arguments"
"""The log parser's reason for argparse's ``error:`` line: the server refused its arguments."""


class OperationError(RuntimeError):
    """An operation failed on some GPUs, or could not start; the message says which and why."""


class StopIncomplete(OperationError):
    """A stop left servers running: some GPU was refused (what runs there is not verified as
    the fleet's; nothing was signalled) or failed. The message names each; ``outcomes`` holds
    every GPU's."""

    def __init__(self, outcomes: Sequence[StopReleased]) -> None:
        self.outcomes = tuple(outcomes)
        """Every GPU's outcome, done ones included."""
        self.not_done = tuple(o for o in outcomes if not o.ok)
        """The GPUs whose server was not stopped."""
        super().__init__(outcome_summary(outcomes))


def outcome_summary(outcomes: Sequence[StopReleased]) -> str:
    """One line for a stop of several GPUs: what was refused or failed (with why), else what
    was done. Never "ok" for a GPU that was refused or failed."""
    not_done = [o for o in outcomes if not o.ok]
    if not_done:
        return "; ".join(f"{o.status} on GPU {o.gpu}: {o.message}" for o in not_done)
    return "; ".join(o.message for o in outcomes) or "nothing ran"


def outcomes_lost(outcomes: Sequence[StopReleased]) -> int | None:
    """The requests the stops dropped in flight (None: nothing was signalled, or some loss has
    no count)."""
    drains = [o.drain for o in outcomes if o.drain is not None]
    counts = [d.lost_in_flight for d in drains]
    if not drains or any(c is None for c in counts):
        return None
    return sum(c for c in counts if c is not None)


@dataclass(frozen=True, slots=True)
class OpsOptions:
    """How the operations run."""

    apply: ApplyOptions = field(default_factory=ApplyOptions)
    """Timeouts and throughput windows of an apply (relaunches and rollbacks measure nothing)."""
    stop: StopTimeouts = field(default_factory=StopTimeouts)
    """Drain, kill and memory-release deadlines."""
    canary: CanaryOptions = field(default_factory=CanaryOptions)
    """Windows and levels of a canary."""
    rollout: RolloutOptions = field(default_factory=RolloutOptions)
    """Timeouts and cost measurement of a rollout (its batch is per call)."""
    settle_s: float = 1.0
    """How long a started server is watched for dying at once (``start``)."""
    restore_args_failures: bool = True
    """Relaunch, with its previous profile, a GPU whose new server exited on its arguments."""
    state_lock_s: float | None = None
    """How long an operation waits, before it stops anything, for the fleet state's and the
    cordons' locks (None: ``tui.state.locks.LOCK_TIMEOUT_S``, 10 s); past it the operation is
    refused naming the holder."""
    card_bytes: int | None = None
    """The GPUs' capacity for the preflight where no NVIDIA driver answers (``--card``,
    ``--card-gb``: ``tui.gpu.cards``); None: the driver's, else no prediction."""


def gpus_text(gpus: Sequence[int]) -> str:
    return ",".join(str(g) for g in sorted(gpus))


class OpsBase:
    """What every operation shares: the fleet's profile, options, the lock and the journal.

    ``FleetOps`` (``tui.ops.service``) is this plus one mixin per family of operations.
    """

    def __init__(
        self,
        base: Profile | None = None,
        *,
        options: OpsOptions | None = None,
        by: str = "cli",
        pipeline: PipelineConfig | None = None,
        gpu_pids: GpuPids | None = None,
        stop_pipeline_with_fleet: bool = False,
    ) -> None:
        self.base = base
        """The fleet's profile, when known."""
        self.options = options or OpsOptions()
        """Options of every operation."""
        self.by = by
        """Who asks (journal)."""
        self.pipeline = pipeline
        """The console's pipeline, if any."""
        self.stop_pipeline_with_fleet = stop_pipeline_with_fleet
        """Whether stopping the fleet also stops the pipeline."""
        self._gpu_pids = gpu_pids
        self._calibrations = CalibrationCache()
        """The running servers' log sizes for the preflights, each log read once then followed
        (a prediction per keystroke of the tuning form must not re-read whole logs)."""

    # --- reading the fleet (blocking: call from a thread) ----------------------------------------

    def fit(self, profile: Profile) -> Profile:
        """``profile`` on the fleet's ports, host, logs and simulated hardware (what would run)."""
        return fit_to_fleet(profile, read_fleet(), self.base)

    def load(self, name: str) -> Profile:
        """A profile by name or path, fitted to the fleet (what an operation would launch).

        Raises:
            ProfileError: it cannot be loaded (naming every problem).
        """
        return self.fit(load_named(name))

    def profile_for(self, gpu: int) -> Profile:
        """The profile ``gpu`` runs (or ran last), as launched; else the fleet's profile.

        Raises:
            OperationError: nothing is known about the GPU and there is no fleet profile.
        """
        entry = read_fleet().get(gpu)
        doc = entry.current or entry.previous if entry is not None else None
        if doc is not None:
            return self.fit(profile_of(doc))
        if self.base is not None:
            return self.fit(self.base)
        raise OperationError(f"GPU {gpu}: no profile is known for it")

    def _gpu_pids_for(self, profile: Profile) -> GpuPids:
        return self._gpu_pids or gpu_pids_for(profile)

    def _pids_for_gpu(self, gpu: int) -> GpuPids:
        """Who holds memory on ``gpu``, by the engine of the profile it runs."""
        if self._gpu_pids is not None:
            return self._gpu_pids
        try:
            return gpu_pids_for(self.profile_for(gpu))
        except Exception:  # nothing known about the GPU: wait on nothing, the stop still ran
            return lambda g: set()

    def _runner(self, options: ApplyOptions | None = None) -> EngineRunner:
        return EngineRunner(options or self.options.apply, self.options.stop, self._gpu_pids)

    # --- the lock and the journal ---------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _operation(
        self, what: str, gpus: Sequence[int], sink: EventSink | None
    ) -> AsyncIterator[None]:
        """Hold the operation lock for ``what``, then every state lock the operation will need
        and a writable journal; report its start (the caller reports the end).

        Raises:
            OperationBusy: another operation holds the fleet.
            LockBusy: a state file's lock stayed held past ``OpsOptions.state_lock_s`` (its
                holder named; nothing was stopped).
            JournalError: the journal cannot be written (nothing was stopped).
        """
        held = contextlib.ExitStack()
        try:
            held.enter_context(operation_lock(what))
        except OperationBusy as busy:
            # The refusal is journalled too: who tried what, and who held the fleet.
            await self._journal_refusal(what, gpus, busy)
            raise
        with held:
            try:
                await asyncio.to_thread(self._take_state_locks, held)
            except LockBusy as busy:
                await self._journal_refusal(what, gpus, busy)
                raise
            emit(sink, OperationStarted(what, tuple(sorted(gpus))))
            yield

    def _take_state_locks(self, held: contextlib.ExitStack) -> None:
        """Before anything is stopped: the journal must be writable, and the fleet state's and
        the cordons' locks are taken (in that order, after the operation lock) and kept until
        the operation ends. A holder that never lets go then costs a refusal naming it, never a
        server stopped and left cordoned while its record waits on a lock for ever. A full state
        directory is a refusal too, for the same reason."""
        check_journal()
        check_room(paths.state_dir())
        locks = (paths.fleet_state_file(), paths.cordon_file())
        held.enter_context(hold(locks, self.options.state_lock_s))

    async def _journal_refusal(self, what: str, gpus: Sequence[int], why: Exception) -> None:
        now = time.time()
        kind = what.split(" ", 1)[0]
        entry = simple_entry(
            kind, now, now, False, tuple(sorted(gpus)), self.by, str(why), refused=(str(why),)
        )
        with contextlib.suppress(JournalError):  # a journal that cannot be written says so itself
            await asyncio.to_thread(append, entry)

    async def _journal(self, entry: JournalEntry, sink: EventSink | None, what: str) -> None:
        """Append the operation's entry (in a thread: it fsyncs) and report its end."""
        await asyncio.to_thread(append, entry)
        emit(sink, OperationFinished(what, entry.ok, entry.summary))

    def _loaded(self, profile: Profile | str) -> Profile:
        return self.fit(load_named(profile) if isinstance(profile, str) else profile)


def emit(sink: EventSink | None, event: OpEvent) -> None:
    if sink is not None:
        sink(event)
