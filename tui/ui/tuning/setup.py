"""What the tuning form starts from (read in a thread while the form shows), and what it decides."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tui.profiles import Profile, ProfileError, diff
from tui.retune.preflight import Preflight
from tui.state.files import StateFileError
from tui.state.fleet_state import profile_of
from tui.ui.sources import FleetActions, RunningReader
from tui.ui.tuning.candidate import gpu_range, unique_name


class TuningBackend(Protocol):
    """What the form reads, checks and saves through: the console's backend on one node
    (``LocalTuning``), or a many-node console's agents (``tui.agent.tuning.NodesTuning``)."""

    def profile_names(self) -> list[str]:
        """Saved profile names. Blocking."""
        ...

    def current_profile(self) -> str | None:
        """The running profile's name (None = unknown). Blocking."""
        ...

    def load_profile(self, name: str) -> Profile:
        """The profile ``name`` as the form shows it. Blocking."""
        ...

    def save_profile(self, profile: Profile) -> object:
        """Save ``profile``; returns where (shown to the operator). Blocking."""
        ...

    async def preflight(self, profile: Profile, gpus: tuple[int, ...]) -> list[Preflight]:
        """The predictions of ``profile`` on ``gpus``; nothing is stopped."""
        ...

    def targets(self, gpus: tuple[int, ...]) -> tuple[int, ...]:
        """The GPUs an Apply of the form on ``gpus`` restarts (every node's, for ``T`` on
        many nodes)."""
        ...

    def gpu_label(self, gpu: int) -> str:
        """``gpu`` in a profile name: ``gpu3`` on one node, ``n2-gpu1`` (its node and its own
        number) on many."""
        ...


class LocalTuning:
    """The form's backend on one node: the console's own, GPUs as they are.

    Args:
        actions: The console's backend.
    """

    def __init__(self, actions: FleetActions) -> None:
        self._actions = actions

    def profile_names(self) -> list[str]:
        """The backend's profile names."""
        return self._actions.profile_names()

    def current_profile(self) -> str | None:
        """The backend's running profile."""
        return self._actions.current_profile()

    def load_profile(self, name: str) -> Profile:
        """The backend's saved profile."""
        return self._actions.load_profile(name)

    def save_profile(self, profile: Profile) -> object:
        """Saved by the backend; returns its path."""
        return self._actions.save_profile(profile)

    async def preflight(self, profile: Profile, gpus: tuple[int, ...]) -> list[Preflight]:
        """The backend's preflight."""
        return await self._actions.preflight(profile, gpus)

    def targets(self, gpus: tuple[int, ...]) -> tuple[int, ...]:
        """``gpus`` themselves."""
        return gpus

    def gpu_label(self, gpu: int) -> str:
        """``gpu3``."""
        return f"gpu{gpu}"


def tuning_backend(actions: FleetActions | TuningBackend, gpu: int | None) -> TuningBackend:
    """The form's backend for ``actions``: a many-node console's (its ``tuning(gpu)``), a
    backend that already is one, or the console's own on one node.

    Args:
        actions: The console's backend.
        gpu: The GPU the form opens on (None: all).

    Returns:
        The backend the form talks to.
    """
    make = getattr(actions, "tuning", None)
    if callable(make):
        made: TuningBackend = make(gpu)
        return made
    if hasattr(actions, "targets"):
        return actions  # type: ignore[return-value]
    return LocalTuning(actions)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class ApplyPlan:
    """What the form decided: apply profile ``name`` to ``gpus`` (already saved)."""

    name: str
    """Profile to apply."""
    gpus: tuple[int, ...]
    """GPUs to restart with it."""


class FormUnavailable(Exception):
    """The form cannot open: the message says why (shown to the operator as a warning)."""


@dataclass(frozen=True, slots=True)
class FormSetup:
    """Everything the form starts from."""

    running: Profile
    """The profile the fleet runs now: the starting point and the diff's left side."""
    names: tuple[str, ...]
    """Saved profile names (saving over one needs a confirmation)."""
    gpu: int | None
    """The GPU the form opens on (a per-GPU override), or None for all GPUs."""
    default_name: str
    """Pre-filled name of the new profile."""
    fleet_name: str = ""
    """The name proposed once the change is for every GPU ('' = ``default_name``)."""


def load_setup(
    actions: TuningBackend,
    gpu: int | None,
    fallback: str | None,
    running: RunningReader | None = None,
) -> FormSetup:
    """Read the running profile and the saved names. Blocking: call from a thread.

    Opened on one GPU, the form starts from the profile that GPU runs (the fleet state's
    ``current``): after a canary left GPU 0 on sim-aggressive in a sim-baseline fleet, ``t`` on
    GPU 0 named and filled in sim-baseline, so the 'change' diffed against what GPU 0 did not run.

    Args:
        actions: The form's backend.
        gpu: The GPU to tune, or None for all (a GPU outside the profile means all).
        fallback: Profile to start from when the backend does not know the running one.
        running: Which profile each GPU runs (None: only the fleet's is known).

    Returns:
        The setup.

    Raises:
        FormUnavailable: no running profile is known.
        ProfileError: the running profile's file is broken (naming why).
    """
    names = actions.profile_names()
    own = _gpu_profile(actions, gpu, running) if gpu is not None else None
    if own is None:
        name = actions.current_profile() or fallback
        if not name:
            raise FormUnavailable(
                "No running profile is known: start the console with --profile NAME."
            )
        own = actions.load_profile(name)
    if gpu is not None and gpu not in own.gpus:
        gpu = None
    fleet_name = unique_name(f"{own.name}-tuned", names)
    if gpu is None:
        return FormSetup(own, tuple(names), gpu, fleet_name, fleet_name)
    one = unique_name(f"{own.name}-{actions.gpu_label(gpu)}", names)
    return FormSetup(own, tuple(names), gpu, one, fleet_name)


def _gpu_profile(actions: TuningBackend, gpu: int, running: RunningReader | None) -> Profile | None:
    """The profile ``gpu`` runs, as the fleet state records it (None: not recorded, or the
    record cannot be read: the fleet's profile is the form's start then, as before).

    Loaded by its name through the backend, as the fleet's profile is (fitted to this fleet; a
    many-node backend reads it from the GPU's node); the recorded document itself when that name
    is no longer saved."""
    if running is None:
        return None
    try:
        state = running().get(gpu)
    except StateFileError:
        return None
    if state is None or state.current is None or not state.current_name:
        return None
    try:
        return actions.load_profile(state.current_name)
    except ProfileError:
        try:
            return profile_of(state.current)
        except ProfileError:
            return None


def unfit_reason(preflight: Sequence[Preflight] | None) -> str | None:
    """Why an Apply may not restart anything: the preflight says a GPU will not start.

    Args:
        preflight: The newest preflight of the form's values (None: not computed).

    Returns:
        One line naming the GPUs that do not fit, or None when none is predicted not to.
    """
    unfit = sorted(p.gpu for p in preflight or () if not p.fits)
    if not unfit:
        return None
    gpus = f"GPU {unfit[0]}" if len(unfit) == 1 else f"GPUs {gpu_range(unfit)}"
    return (
        f"the preflight says {gpus} will not start (see PREFLIGHT); change the values, or "
        "ctrl+t to restart anyway (it asks first)"
    )


def apply_question(
    running: Profile,
    profile: Profile,
    preflight: Sequence[Preflight] | None,
    names: Sequence[str],
    gpus: tuple[int, ...],
) -> tuple[str, str]:
    """What an Apply from the form asks before anything restarts.

    Args:
        running: The running profile.
        profile: The form's candidate.
        preflight: Its preflight, when computed.
        names: Saved profile names.
        gpus: The GPUs that restart.

    Returns:
        (title, detail): which GPUs restart with which profile; the changes, the GPUs the
        preflight says will not fit, and a saved profile the candidate replaces.
    """
    changes = [str(c) for c in diff(running, profile)]
    name = profile.name if changes else running.name
    lines = changes[:8] or ["(no change: a relaunch)"]
    if preflight is not None:
        lines += [f"GPU {p.gpu} {p.why_not}" for p in preflight if not p.fits]
    else:
        lines.append("preflight not computed yet")
    if changes and profile.name in names:
        lines.append(f"replaces the saved profile {profile.name!r}")
    servers = "server" if len(gpus) == 1 else "servers"
    title = (
        f"Restart GPU{'s' if len(gpus) > 1 else ''} {gpu_range(gpus)} "
        f"({len(gpus)} {servers}) with profile {name}?"
    )
    return title, "\n".join(lines)
