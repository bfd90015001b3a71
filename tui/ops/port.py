"""The one port between a front end and the operations: what the console (and its tests) holds.

A port runs commands (``tui.ops.commands``) and reads the fleet; nothing else changes it. Two
implementations: ``tui.ops.local.LocalFleet`` (this node's ``FleetOps`` and its monitor) and
``tui.agent.nodes.Nodes`` (many nodes' agents); a read-only console's port is a local or remote
one behind ``ReadOnlyFleet``, whose capabilities are empty; the tests' recorder is a port too.

``capabilities()`` says what the port can run now, and for what it cannot, why in a few words:
the console shows a key disabled, and says why, from it alone (no probing the port for methods).
A port refuses a command it cannot run (``Refused``), whatever asked for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tui.fleet.snapshot import FleetSnapshot
from tui.ops.adoption import AdoptPlan
from tui.ops.alerts.engine import AlertFired
from tui.ops.commands import Kind, Op
from tui.ops.events import EventSink
from tui.ops.journal import JournalRead
from tui.ops.marks import OperationMark
from tui.pipeline.energy import JobEnergy
from tui.pipeline.status import PipelineStatus
from tui.profiles import Profile
from tui.retune.preflight import Preflight
from tui.state.fleet_state import GpuState

R = TypeVar("R")

READ_ONLY = "read-only"
"""What a read-only console's port says of every command it refuses."""


class Refused(RuntimeError):
    """The port cannot run this command now (the message says why, in one line)."""


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a port can run now, why not the rest, and what its operations do beyond their kind."""

    kinds: frozenset[Kind] = frozenset()
    """The families of commands it runs now."""
    why_not: Mapping[Kind, str] = field(default_factory=dict)
    """Why it cannot run a family it does not (a default reason otherwise)."""
    stops_pipeline_with_fleet: bool = False
    """Stopping the fleet also stops the pipeline (the quit dialog says so)."""
    starts_fresh_job: bool = False
    """Starting a finished job starts it afresh (the demo's job; a real job resumes)."""
    picks_controls: bool = False
    """It picks a canary's control GPUs itself (``FleetReads.canary_controls``) and rolls a
    worse candidate back (many nodes)."""
    follows_autotune: bool = False
    """It reads the autotune search's status (``FleetReads.autotune_status``): a console on
    the host the search runs on, even one that cannot start or steer it (read-only, watching)."""

    def __contains__(self, kind: object) -> bool:
        return kind in self.kinds

    def reason(self, kind: Kind) -> str:
        """Why ``kind`` is off ('' when it is on)."""
        if kind in self.kinds:
            return ""
        return self.why_not.get(kind, f"this console cannot {kind.value.replace('_', ' ')}")


@dataclass(frozen=True, slots=True)
class SearchStatus:
    """The autotune search as a port reads it."""

    doc: dict[str, Any] | None
    """Its status document (None: no search has run here)."""
    alive: bool
    """Whether the process the document names still runs."""


class Tuning(Protocol):
    """What the tuning form reads and checks through: one node's profiles, or (on many nodes)
    the agents' of the nodes it tunes. Blocking methods are called from a thread."""

    def profile_names(self) -> list[str]:
        """Saved profile names. Blocking."""
        ...

    def current_profile(self) -> str | None:
        """The running profile's name (None = unknown). Blocking."""
        ...

    def load_profile(self, name: str) -> Profile:
        """The profile ``name`` as the form shows it (raises ``ProfileError``). Blocking."""
        ...

    async def preflight(self, profile: Profile, gpus: tuple[int, ...]) -> list[Preflight]:
        """The predictions of ``profile`` on ``gpus``; nothing is stopped."""
        ...

    def targets(self, gpus: tuple[int, ...]) -> tuple[int, ...]:
        """The GPUs an Apply of the form on ``gpus`` restarts (every node's, for ``T`` on
        many nodes)."""
        ...

    def gpu_label(self, gpu: int) -> str:
        """``gpu`` in a profile name: ``gpu3`` on one node, ``n2-gpu1`` on many."""
        ...


class FleetReads(Protocol):
    """What a front end reads; nothing here changes the fleet. Blocking unless async."""

    def profile_names(self) -> list[str]:
        """Names of the saved profiles that can run here."""
        ...

    def current_profile(self) -> str | None:
        """The profile most of the fleet runs (None = unknown)."""
        ...

    def load_profile(self, name: str) -> Profile:
        """The saved profile ``name`` as it would run here (raises ``ProfileError``)."""
        ...

    def running(self) -> dict[int, GpuState]:
        """Each GPU's current and previous profile (what a rollback returns to)."""
        ...

    def journal(self) -> JournalRead:
        """Every journal entry, oldest first."""
        ...

    def marks(self) -> list[OperationMark]:
        """The journal's operations that changed servers (the chart's markers)."""
        ...

    def pipeline_status(self) -> PipelineStatus | None:
        """The job's status document (None: no job)."""
        ...

    def job_energy(self) -> JobEnergy | None:
        """The job's energy ledger, every run of it so far (None: no ledger, or not read here).
        Blocking."""
        ...

    def node_alerts(self) -> tuple[AlertFired, ...] | None:
        """The alerts firing now on the nodes this port reads, each naming its node, as their
        agents run, journal and post them (many nodes); None: the port carries no alerts, the
        console runs the rules itself (``tui.ui.alerts.host``: one node). Not blocking (the last
        poll's answers)."""
        ...

    def log_tail(self, path: Path, max_lines: int) -> list[str]:
        """The newest lines of a server's log as its panel names it (empty: unreadable)."""
        ...

    def canary_controls(self, gpu: int) -> tuple[int, ...] | None:
        """The control GPUs a canary on ``gpu`` would have now (None: every other GPU)."""
        ...

    def tuning(self, gpu: int | None) -> Tuning:
        """The tuning form's reads on ``gpu`` (None: every GPU)."""
        ...

    def autotune_status(self) -> SearchStatus | None:
        """The autotune search's status (None: this port follows no search, see
        ``Capabilities.follows_autotune``). Blocking.

        Raises:
            StateFileError: the status document cannot be read (naming it).
        """
        ...

    async def plan_adoption(
        self, ports: tuple[int, ...], gpus: tuple[int, ...], name: str
    ) -> AdoptPlan:
        """What adopting these servers as profile ``name`` would write (raises ``AdoptError``
        naming the field)."""
        ...


class Fleet(Protocol):
    """The port: a front end's only way to the fleet."""

    @property
    def reads(self) -> FleetReads:
        """What it reads."""
        ...

    def capabilities(self) -> Capabilities:
        """What it can run now (``run`` refuses the rest)."""
        ...

    async def snapshot(self) -> FleetSnapshot:
        """The fleet once (must not block the event loop)."""
        ...

    async def run(self, command: Op[R], sink: EventSink | None = None) -> R:
        """Run ``command``; ``sink`` gets its events, in order, on the caller's loop.

        Raises:
            Refused: its kind is not in ``capabilities()``.
        """
        ...


def refuse_unless_capable(caps: Capabilities, command: Op[Any]) -> None:
    """Raise ``Refused`` (its reason) unless ``caps`` offers ``command``'s kind."""
    if command.KIND not in caps:
        raise Refused(f"{type(command).__name__.lower()}: {caps.reason(command.KIND)}")


class ReadOnlyFleet:
    """A port that reads through ``inner`` and refuses every command.

    Args:
        inner: The console's port (local or remote).
    """

    def __init__(self, inner: Fleet) -> None:
        self.inner = inner
        """The port reads go to."""

    @property
    def reads(self) -> FleetReads:
        """The inner port's reads."""
        return self.inner.reads

    def capabilities(self) -> Capabilities:
        """Only the journal, a read; everything else is off: read-only. It follows the autotune
        search where the inner port does (a read)."""
        inner = self.inner.capabilities()
        journal = frozenset({Kind.JOURNAL}) & inner.kinds
        why = {kind: READ_ONLY for kind in Kind}
        return Capabilities(journal, why, follows_autotune=inner.follows_autotune)

    async def snapshot(self) -> FleetSnapshot:
        """The inner port's snapshot."""
        return await self.inner.snapshot()

    async def run(self, command: Op[R], sink: EventSink | None = None) -> R:
        """Refused, without asking the inner port."""
        raise Refused(
            f"{READ_ONLY} console: {type(command).__name__.lower()} refused (it changes the "
            "fleet or the job)"
        )
