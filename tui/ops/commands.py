"""The operations as data: one frozen command for each thing a front end asks of the fleet.

The console's keys, the agent's API and the tests' recorder all speak these: a front end builds
a command and hands it to a port (``tui.ops.port.Fleet.run``), which runs it on this node's
``FleetOps`` (``tui.ops.local``) or on the agents of many nodes (``tui.agent.nodes``, through
the agent's codec, where the same command is decoded and run on the node's own port). Each
command names the result it returns (``Op[R]``: ``run(Kill(...))`` is typed as the stops'
outcomes) and its ``KIND``, the family a port offers or refuses (``Fleet.capabilities``).

A command checks its own arguments: one that cannot be run raises ``ValueError`` naming the
field and what is allowed, before anything is asked of the fleet.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Generic, TypeVar

from tui.control.adopt import ConfirmedServer
from tui.control.stop import StopMode
from tui.control.stop_release import StopReleased
from tui.ops.adoption import AdoptPlan
from tui.profiles import Profile
from tui.retune.events import ApplyResult
from tui.rollout.canary_result import CanaryResult
from tui.rollout.rollout import RolloutResult

R = TypeVar("R")

MAX_BATCH = 64
"""Largest rollout batch accepted."""
MAX_DRAIN_S = 10**6
"""Longest drain deadline accepted, in seconds."""


class Kind(StrEnum):
    """The families of commands a port may offer (``Fleet.capabilities``), and the journal."""

    KILL = "kill"
    """Stop the servers on some GPUs."""
    RELAUNCH = "relaunch"
    """Relaunch the servers on some GPUs with what each runs."""
    TUNE = "tune"
    """Apply a profile, or save one (the tuning form)."""
    ROLLBACK = "rollback"
    """Return GPUs to the profile each ran before."""
    JOURNAL = "journal"
    """Read the journal of operations (a read: read-only consoles show it too)."""
    PIPELINE = "pipeline"
    """Start and stop the generation pipeline."""
    STOP_FLEET = "stop_fleet"
    """Stop every server (offered when quitting)."""
    CANARY = "canary"
    """Try a profile on one GPU against the others over the same minutes."""
    ROLLOUT = "rollout"
    """Move the fleet to a profile a few GPUs at a time, stopping at the first failure."""
    AUTOTUNE = "autotune"
    """Start, pause, resume or stop the autotune search (it changes the fleet by itself)."""
    ADOPT = "adopt"
    """Take over servers gpufleet did not launch: writes a profile and the fleet state."""


class Op(Generic[R]):
    """Every command: ``R`` is what running it returns."""

    __slots__ = ()

    KIND: ClassVar[Kind]
    """The family a port must offer to run it."""
    WIRE: ClassVar[str | None] = None
    """Its name on the agent's operations API (None: not sent to an agent that way)."""


def _gpus_given(gpus: tuple[int, ...], what: str) -> None:
    if not gpus:
        raise ValueError(f"gpus: {what} needs a non-empty list of GPU indices")


def _profile_name(profile: Profile | str) -> str:
    return profile if isinstance(profile, str) else profile.name


@dataclass(frozen=True, slots=True)
class Kill(Op[tuple[StopReleased, ...]]):
    """Stop the servers on ``gpus`` and wait for their memory."""

    KIND = Kind.KILL
    WIRE = "kill"

    gpus: tuple[int, ...]
    """The GPUs."""
    mode: StopMode = "drain"
    """drain (no request in flight lost), terminate or kill."""
    confirmed: tuple[ConfirmedServer, ...] = ()
    """Servers the operator confirmed stopping although the fleet cannot verify them as its
    own (the console's ``unknown``): their pid alone is signalled."""
    drain_s: float | None = None
    """The drain's deadline the operator gave (None: the profiles', else 60 s)."""

    def __post_init__(self) -> None:
        _gpus_given(self.gpus, "kill")
        if self.drain_s is not None and not 0 < self.drain_s <= MAX_DRAIN_S:
            raise ValueError(f"drain_s: {self.drain_s!r} must be seconds in (0, {MAX_DRAIN_S}]")


@dataclass(frozen=True, slots=True)
class Relaunch(Op[tuple[ApplyResult, ...]]):
    """Stop and start each GPU's own profile again, verified."""

    KIND = Kind.RELAUNCH
    WIRE = "relaunch"

    gpus: tuple[int, ...]
    """The GPUs."""
    confirmed: tuple[ConfirmedServer, ...] = ()
    """As ``Kill.confirmed``: servers holding the ports that the operator confirmed stopping."""
    mode: StopMode = "drain"
    """How the running servers are stopped."""

    def __post_init__(self) -> None:
        _gpus_given(self.gpus, "relaunch")


@dataclass(frozen=True, slots=True)
class Apply(Op[ApplyResult]):
    """Retune ``gpus`` with ``profile`` (stop, release, launch, verify, measure, journal)."""

    KIND = Kind.TUNE
    WIRE = "apply"

    profile: Profile | str
    """The profile itself (the tuning form's, never written to disk to be applied), or a saved
    profile's name (each node's own, on many nodes)."""
    gpus: tuple[int, ...] | None = None
    """The GPUs (None: every GPU of the profile)."""
    measure: bool | None = None
    """Measure the throughput before and after (None: the port's default)."""
    mode: StopMode = "drain"
    """How the running servers are stopped."""

    @property
    def name(self) -> str:
        """The profile's name."""
        return _profile_name(self.profile)


@dataclass(frozen=True, slots=True)
class Rollback(Op[RolloutResult]):
    """Walk GPUs back to the profile each ran before, verified, then the fleet's verdict."""

    KIND = Kind.ROLLBACK
    WIRE = "rollout_back"

    gpus: tuple[int, ...] | None = None
    """The GPUs (None: every GPU with a previous profile recorded)."""
    batch: int = 1
    """GPUs restarted together."""
    all_at_once: bool = False
    """Every GPU back together (the operator chose it)."""

    def __post_init__(self) -> None:
        _batch(self.batch)


@dataclass(frozen=True, slots=True)
class Restore(Op[ApplyResult]):
    """Relaunch, at once, each GPU's previous profile (a canary judged across nodes undoes its
    candidate this way)."""

    KIND = Kind.ROLLBACK
    WIRE = "rollback"

    gpus: tuple[int, ...] | None = None
    """The GPUs (None: every GPU with a previous profile recorded)."""
    expect: str | None = None
    """Only if every GPU still runs this profile (another operation may have changed it)."""


@dataclass(frozen=True, slots=True)
class Canary(Op[CanaryResult]):
    """Try ``profile`` on ``gpu`` while the other GPUs keep theirs, and judge it."""

    KIND = Kind.CANARY
    WIRE = "canary"

    profile: Profile | str
    """The candidate (itself, or a saved profile's name)."""
    gpu: int
    """The canary GPU."""

    @property
    def name(self) -> str:
        """The candidate's name."""
        return _profile_name(self.profile)


@dataclass(frozen=True, slots=True)
class Rollout(Op[RolloutResult]):
    """Move every GPU not yet on ``profile`` to it, ``batch`` at a time, each batch verified;
    stop at the first failure."""

    KIND = Kind.ROLLOUT
    WIRE = "rollout"

    profile: Profile | str
    """The profile (itself, or a saved profile's name)."""
    batch: int = 1
    """GPUs restarted together."""
    gpus: tuple[int, ...] | None = None
    """The GPUs it may restart (None: the fleet)."""

    def __post_init__(self) -> None:
        _batch(self.batch)

    @property
    def name(self) -> str:
        """The profile's name."""
        return _profile_name(self.profile)


def _batch(batch: int) -> None:
    if not 1 <= batch <= MAX_BATCH:
        raise ValueError(f"batch: {batch!r} must be an integer in 1-{MAX_BATCH}")


@dataclass(frozen=True, slots=True)
class StopFleet(Op[tuple[StopReleased, ...]]):
    """Stop every server of the fleet (and the pipeline, where the port stops it too)."""

    KIND = Kind.STOP_FLEET
    WIRE = "stop_fleet"

    mode: StopMode = "drain"
    """How the servers are stopped."""


@dataclass(frozen=True, slots=True)
class StartPipeline(Op[None]):
    """Start the generation pipeline detached (it resumes from its done record)."""

    KIND = Kind.PIPELINE


@dataclass(frozen=True, slots=True)
class StopPipeline(Op[None]):
    """Stop the generation pipeline."""

    KIND = Kind.PIPELINE


@dataclass(frozen=True, slots=True)
class Adopt(Op[AdoptPlan]):
    """Write what ``plan`` shows: its profile, and each server recorded as the fleet's."""

    KIND = Kind.ADOPT

    plan: AdoptPlan
    """The plan the operator saw (``FleetReads.plan_adoption``)."""


@dataclass(frozen=True, slots=True)
class Saved:
    """Where a profile was saved, node by node."""

    paths: tuple[str, ...]
    """Each file written (``node:path`` on many nodes)."""
    failures: tuple[str, ...] = ()
    """One line per node that did not save it (refused, unreachable)."""

    def __str__(self) -> str:
        return "; ".join(self.paths + tuple(f"NOT SAVED {f}" for f in self.failures))


@dataclass(frozen=True, slots=True)
class SaveProfile(Op[Saved]):
    """Save ``profile`` under its name (replacing a file of that name); nothing restarts."""

    KIND = Kind.TUNE

    profile: Profile
    """The profile."""
    gpus: tuple[int, ...] = ()
    """The GPUs it is for (a many-node console saves it on their nodes)."""


@dataclass(frozen=True, slots=True)
class StartAutotune(Op[None]):
    """Start the autotune search detached, with ``gpufleet autotune start``'s options."""

    KIND = Kind.AUTOTUNE

    argv: tuple[str, ...]
    """The options (``tui.autotune.options.request_argv``)."""


@dataclass(frozen=True, slots=True)
class SteerAutotune(Op[None]):
    """Ask the running search to pause, resume or stop (between its steps)."""

    KIND = Kind.AUTOTUNE

    action: str
    """pause, resume or stop."""

    def __post_init__(self) -> None:
        if self.action not in ("pause", "resume", "stop"):
            raise ValueError(f"action: {self.action!r} is not one of pause, resume, stop")


Command = (
    Kill
    | Relaunch
    | Apply
    | Rollback
    | Restore
    | Canary
    | Rollout
    | StopFleet
    | StartPipeline
    | StopPipeline
    | Adopt
    | SaveProfile
    | StartAutotune
    | SteerAutotune
)
"""Every command a front end may send."""
