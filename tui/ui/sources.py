"""The small protocols the console is built from, passed into ``FleetApp`` (tests swap them).

None of these import Textual: the core implements them (``FleetMonitor`` satisfies ``FleetPoller``),
tests implement them with fixed data and recording fakes.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import NoReturn, Protocol, runtime_checkable

from tui.control.adopt import ConfirmedServer
from tui.control.stop import StopMode
from tui.control.stop_release import StopReleased
from tui.fleet.snapshot import FleetSnapshot
from tui.logs.long_lines import tail_lines
from tui.ops.adoption import AdoptPlan, AdoptRequest
from tui.ops.console import LookSink
from tui.ops.events import EventSink
from tui.ops.journal import JournalRead, read_journal
from tui.ops.marks import OperationMark
from tui.pipeline.status import PipelineStatus, read_status
from tui.profiles import Profile
from tui.retune.events import ApplyResult
from tui.retune.preflight import Preflight
from tui.rollout.canary_result import CanaryResult
from tui.rollout.rollout import RolloutResult
from tui.state.fleet_state import GpuState, read_running


class FleetPoller(Protocol):
    """Produces one fleet snapshot per call; ``tui.fleet.monitor.FleetMonitor`` satisfies it."""

    async def poll(self) -> FleetSnapshot:
        """Sample the fleet once. Must not block the event loop (the monitor uses threads)."""
        ...


class StatusReader(Protocol):
    """Reads the pipeline status document. Blocking: the console calls it from a thread worker."""

    def __call__(self, path: Path) -> PipelineStatus | None:
        """Return the document at ``path``, or None when it is missing or malformed."""
        ...


class LogTail(Protocol):
    """Returns the last lines of a log file. Blocking: called from a thread worker."""

    def __call__(self, path: Path, max_lines: int) -> list[str]:
        """Return at most ``max_lines`` of the newest lines of ``path`` (empty when unreadable)."""
        ...


class RetuneMarks(Protocol):
    """Returns the operations that changed servers (the journal's, ``tui.ops.marks``).
    Blocking: thread worker."""

    def __call__(self) -> list[OperationMark]:
        """Return the markers, any order; empty when there is no journal."""
        ...


class Intent(StrEnum):
    """Families of operations a backend may or may not support yet."""

    KILL = "kill"
    """Kill the server on one GPU or on all of them."""
    RELAUNCH = "relaunch"
    """Relaunch the server on one GPU or on all of them."""
    TUNE = "tune"
    """Open the tuning form and apply a profile."""
    ROLLBACK = "rollback"
    """Return to the previous profile."""
    JOURNAL = "journal"
    """Show the journal of applies and rollouts."""
    PIPELINE = "pipeline"
    """Start and stop the generation pipeline."""
    STOP_FLEET = "stop_fleet"
    """Stop every server (offered when quitting)."""
    CANARY = "canary"
    """Try a profile on one GPU against the others over the same minutes."""
    ROLLOUT = "rollout"
    """Move the fleet to a profile a few GPUs at a time, stopping at the first failure."""
    CONFIRM = "confirm"
    """Say yes in a dialog that asks before a change (every confirmation asks about one)."""
    AUTOTUNE = "autotune"
    """Start, pause, resume or stop the autotune search (it changes the fleet by itself)."""
    ADOPT = "adopt"
    """Take over servers gpufleet did not launch (``gpufleet adopt``): writes a profile and the
    fleet state; signals nothing."""


class FleetActions(Protocol):
    """Operations the console asks the core to perform; later work implements them.

    The console only calls an operation whose intent ``supports`` says yes; the others are shown
    disabled. Each coroutine runs in a console worker, so it may take its time (it must not block
    the event loop: use ``asyncio.to_thread`` for blocking calls).
    """

    def supports(self, intent: Intent) -> bool:
        """Whether this backend implements ``intent`` now."""
        ...

    async def kill(
        self,
        gpus: tuple[int, ...],
        mode: StopMode = "drain",
        confirmed: tuple[ConfirmedServer, ...] = (),
        drain_s: float | None = None,
    ) -> Sequence[StopReleased]:
        """Stop the servers on ``gpus`` (drain: no in-flight request lost, unless a client
        keeps sending past the drain's deadline, ``drain_s`` when the operator gave one);
        ``confirmed``: the ``unknown`` servers the operator confirmed stopping (their pid
        alone is signalled). Returns each GPU's outcome (what the console says); a refusal or
        a failure raises."""
        ...

    async def relaunch(
        self, gpus: tuple[int, ...], confirmed: tuple[ConfirmedServer, ...] = ()
    ) -> Sequence[ApplyResult]:
        """Stop (if running) and start the servers on ``gpus`` with the current profile;
        ``confirmed`` as for ``kill``. Returns each run's result."""
        ...

    async def apply_profile(
        self, name: str, gpus: tuple[int, ...], on_event: EventSink | None = None
    ) -> ApplyResult:
        """Retune ``gpus`` with profile ``name``; ``on_event`` gets each retune event."""
        ...

    async def rollback(
        self,
        gpus: tuple[int, ...] | None = None,
        on_event: EventSink | None = None,
        all_at_once: bool = False,
    ) -> RolloutResult:
        """Walk ``gpus`` (None: every GPU with one recorded) back to the profile each ran before,
        one GPU at a time, each verified before the next (``all_at_once``: every GPU together),
        ending with the fleet's throughput verdict; ``on_event`` gets each retune event and
        the verdict's windows."""
        ...

    def profile_names(self) -> list[str]:
        """Names of the saved profiles. Blocking (reads files): called from a worker thread."""
        ...

    def current_profile(self) -> str | None:
        """Name of the profile the fleet runs now (None = unknown). Blocking."""
        ...

    def load_profile(self, name: str) -> Profile:
        """The saved profile ``name`` (raises ``ProfileError``). Blocking."""
        ...

    def save_profile(self, profile: Profile) -> Path:
        """Save ``profile`` under its name (replacing a file of that name). Blocking."""
        ...

    async def preflight(self, profile: Profile, gpus: tuple[int, ...]) -> list[Preflight]:
        """Predict what ``profile`` allocates on each of ``gpus`` (nothing is stopped)."""
        ...

    async def start_pipeline(self) -> None:
        """Start the generation pipeline detached, so it outlives the console."""
        ...

    async def stop_pipeline(self) -> None:
        """Stop the generation pipeline (it resumes from its done record when restarted)."""
        ...

    async def stop_fleet(self, on_event: EventSink | None = None) -> None:
        """Stop every server of the fleet; ``on_event`` gets the drain's progress."""
        ...

    async def canary(
        self,
        profile_name: str,
        gpu: int,
        on_event: EventSink | None = None,
        on_look: LookSink | None = None,
    ) -> CanaryResult:
        """Try ``profile_name`` on ``gpu`` against the other GPUs; ``on_event`` gets the
        restart's retune events, ``on_look`` each look of the measuring window."""
        ...

    async def rollout(
        self,
        profile_name: str,
        batch: int = 1,
        gpus: tuple[int, ...] | None = None,
        on_event: EventSink | None = None,
    ) -> RolloutResult:
        """Move every GPU of ``gpus`` (None: the fleet) not yet on ``profile_name`` to it,
        ``batch`` at a time, verified, stopping at the first failure; ``on_event`` gets every
        batch's retune events."""
        ...


@runtime_checkable
class Adopter(Protocol):
    """A backend that can take over servers gpufleet did not launch (the console's ``A``); the
    others (a many-node console's, a read-only one) are not, and the key is off."""

    def adoption_request(
        self, ports: tuple[int, ...], gpus: tuple[int, ...], name: str
    ) -> AdoptRequest:
        """What adopting these servers asks (the console's own log directory and host)."""
        ...

    async def plan_adoption(self, request: AdoptRequest) -> AdoptPlan:
        """What adopting would write (reads only; raises ``AdoptError`` naming the field)."""
        ...

    async def adopt(self, plan: AdoptPlan) -> None:
        """Write the plan: the profile, and each server recorded as the fleet's."""
        ...


class NoActions:
    """A backend that supports nothing: every operation key shows disabled, every operation is
    refused through ``refuse`` (a read-only console's backend refuses its own way)."""

    def refuse(self, operation: str) -> NoReturn:
        """Refuse ``operation`` (its name for the operator)."""
        raise NotImplementedError(operation)

    def supports(self, intent: Intent) -> bool:
        """Nothing is supported."""
        return False

    async def kill(
        self,
        gpus: tuple[int, ...],
        mode: StopMode = "drain",
        confirmed: tuple[ConfirmedServer, ...] = (),
        drain_s: float | None = None,
    ) -> Sequence[StopReleased]:
        """Refused (``refuse``)."""
        self.refuse("kill")

    async def relaunch(
        self, gpus: tuple[int, ...], confirmed: tuple[ConfirmedServer, ...] = ()
    ) -> Sequence[ApplyResult]:
        """Refused (``refuse``)."""
        self.refuse("relaunch")

    async def apply_profile(
        self, name: str, gpus: tuple[int, ...], on_event: EventSink | None = None
    ) -> ApplyResult:
        """Refused (``refuse``)."""
        self.refuse("apply")

    async def rollback(
        self,
        gpus: tuple[int, ...] | None = None,
        on_event: EventSink | None = None,
        all_at_once: bool = False,
    ) -> RolloutResult:
        """Refused (``refuse``)."""
        self.refuse("rollback")

    def profile_names(self) -> list[str]:
        """No profiles."""
        return []

    def current_profile(self) -> str | None:
        """Unknown."""
        return None

    def load_profile(self, name: str) -> Profile:
        """Refused (``refuse``)."""
        self.refuse("load profile")

    def save_profile(self, profile: Profile) -> Path:
        """Refused (``refuse``)."""
        self.refuse("save profile")

    async def preflight(self, profile: Profile, gpus: tuple[int, ...]) -> list[Preflight]:
        """Refused (``refuse``)."""
        self.refuse("preflight")

    async def start_pipeline(self) -> None:
        """Refused (``refuse``)."""
        self.refuse("start pipeline")

    async def stop_pipeline(self) -> None:
        """Refused (``refuse``)."""
        self.refuse("stop pipeline")

    async def stop_fleet(self, on_event: EventSink | None = None) -> None:
        """Refused (``refuse``)."""
        self.refuse("stop fleet")

    async def canary(
        self,
        profile_name: str,
        gpu: int,
        on_event: EventSink | None = None,
        on_look: LookSink | None = None,
    ) -> CanaryResult:
        """Refused (``refuse``)."""
        self.refuse("canary")

    async def rollout(
        self,
        profile_name: str,
        batch: int = 1,
        gpus: tuple[int, ...] | None = None,
        on_event: EventSink | None = None,
    ) -> RolloutResult:
        """Refused (``refuse``)."""
        self.refuse("rollout")


def read_pipeline_status(path: Path) -> PipelineStatus | None:
    """The default ``StatusReader``: the core's ``read_status``.

    Args:
        path: The status document.

    Returns:
        The parsed document, or None when missing or malformed.
    """
    return read_status(path)


def tail_file(path: Path, max_lines: int) -> list[str]:
    """The default ``LogTail``: the last ``max_lines`` lines (at most 1 MiB of them), each cut at
    64 KiB (``tui.logs.long_lines``).

    Args:
        path: The log file.
        max_lines: How many lines at most.

    Returns:
        The lines without their newlines; empty when the file cannot be read.
    """
    return tail_lines(path, max_lines)


class JournalReader(Protocol):
    """Reads the journal of applies. Blocking: called from a thread worker."""

    def __call__(self) -> JournalRead:
        """Every entry, oldest first, and how many lines could not be read."""
        ...


class RunningReader(Protocol):
    """Which profile each GPU runs now and ran before (what a rollback returns to). Blocking."""

    def __call__(self) -> dict[int, GpuState]:
        """GPU index -> its current and previous profile documents."""
        ...


def read_default_journal() -> JournalRead:
    """The default ``JournalReader``: the journal at ``tui.paths.journal_file()``."""
    return read_journal()


def read_default_running() -> dict[int, GpuState]:
    """The default ``RunningReader``: the fleet state store."""
    return read_running()


def no_retune_marks() -> list[OperationMark]:
    """The default ``RetuneMarks`` until the journal exists: none."""
    return []
