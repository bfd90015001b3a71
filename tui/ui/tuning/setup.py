"""What the tuning form starts from (read in a thread while the form shows), and what it decides."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tui.ops.port import Tuning
from tui.ops.types import GpuState, Preflight, StateFileError, profile_of
from tui.profiles import Profile, ProfileError, diff
from tui.ui.tuning.candidate import gpu_range, unique_name


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
    tuning: Tuning,
    gpu: int | None,
    fallback: str | None,
    running: Callable[[], dict[int, GpuState]] | None = None,
) -> FormSetup:
    """Read the running profile and the saved names. Blocking: call from a thread.

    Opened on one GPU, the form starts from the profile that GPU runs (the fleet state's
    ``current``): after a canary left GPU 0 on sim-aggressive in a sim-baseline fleet, ``t`` on
    GPU 0 named and filled in sim-baseline, so the 'change' diffed against what GPU 0 did not run.

    Args:
        tuning: The form's reads (``Fleet.reads.tuning``).
        gpu: The GPU to tune, or None for all (a GPU outside the profile means all).
        fallback: Profile to start from when the backend does not know the running one.
        running: Which profile each GPU runs (None: only the fleet's is known).

    Returns:
        The setup.

    Raises:
        FormUnavailable: no running profile is known.
        ProfileError: the running profile's file is broken (naming why).
    """
    names = tuning.profile_names()
    own = _gpu_profile(tuning, gpu, running) if gpu is not None else None
    if own is None:
        name = tuning.current_profile() or fallback
        if not name:
            raise FormUnavailable(
                "No running profile is known: start the console with --profile NAME."
            )
        own = tuning.load_profile(name)
    if gpu is not None and gpu not in own.gpus:
        gpu = None
    fleet_name = unique_name(f"{own.name}-tuned", names)
    if gpu is None:
        return FormSetup(own, tuple(names), gpu, fleet_name, fleet_name)
    one = unique_name(f"{own.name}-{tuning.gpu_label(gpu)}", names)
    return FormSetup(own, tuple(names), gpu, one, fleet_name)


def _gpu_profile(
    tuning: Tuning, gpu: int, running: Callable[[], dict[int, GpuState]] | None
) -> Profile | None:
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
        return tuning.load_profile(state.current_name)
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
        lines.append(f"a saved profile is named {profile.name!r} too: it is not changed")
    servers = "server" if len(gpus) == 1 else "servers"
    title = (
        f"Restart GPU{'s' if len(gpus) > 1 else ''} {gpu_range(gpus)} "
        f"({len(gpus)} {servers}) with profile {name}?"
    )
    return title, "\n".join(lines)
