"""What the tuning form starts from (read in a thread while the form shows), and what it decides."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tui.profiles import Profile, diff
from tui.retune.preflight import Preflight
from tui.ui.sources import FleetActions
from tui.ui.tuning.candidate import gpu_range, unique_name


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


def load_setup(actions: FleetActions, gpu: int | None, fallback: str | None) -> FormSetup:
    """Read the running profile and the saved names. Blocking: call from a thread.

    Args:
        actions: The backend.
        gpu: The GPU to tune, or None for all (a GPU outside the profile means all).
        fallback: Profile to start from when the backend does not know the running one.

    Returns:
        The setup.

    Raises:
        FormUnavailable: no running profile is known.
        ProfileError: the running profile's file is broken (naming why).
    """
    names = actions.profile_names()
    name = actions.current_profile() or fallback
    if not name:
        raise FormUnavailable("No running profile is known: start the console with --profile NAME.")
    running = actions.load_profile(name)
    if gpu is not None and gpu not in running.gpus:
        gpu = None
    base = f"{running.name}-gpu{gpu}" if gpu is not None else f"{running.name}-tuned"
    return FormSetup(running, tuple(names), gpu, unique_name(base, names))


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
