"""The keyboard flows before an operation: gather what the backend knows (off the loop), ask the
operator (picker, form, confirm), and return what to do. Run inside a screen's worker, since they
wait on modal screens."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from textual.app import App

from tui.ops.port import FleetReads
from tui.ops.types import GpuState
from tui.ui.confirm import ConfirmScreen
from tui.ui.retune.profile_picker import ProfilePickerScreen
from tui.ui.rollout.rollback_dialog import RollbackScreen
from tui.ui.tuning.candidate import gpu_range


@dataclass(frozen=True, slots=True)
class RelaunchChoice:
    """Relaunch ``gpus`` with ``profile`` (``same``: the running one, a plain relaunch)."""

    profile: str | None
    """Profile chosen (None when the backend knows no profiles)."""
    gpus: tuple[int, ...]
    """GPUs to restart."""
    same: bool
    """True when the chosen profile is the one running (relaunch), False for another (apply)."""


def _restart_title(gpus: tuple[int, ...], profile: str | None) -> str:
    servers = "server" if len(gpus) == 1 else "servers"
    plural = "s" if len(gpus) > 1 else ""
    what = f" with profile {profile}" if profile else ""
    return f"Restart GPU{plural} {gpu_range(gpus)} ({len(gpus)} {servers}){what}?"


async def choose_relaunch(
    app: App[None], reads: FleetReads, gpus: tuple[int, ...], affected: str
) -> RelaunchChoice | None:
    """Ask which profile (the running one preselected), then confirm what restarts.

    Args:
        app: The app, to show the modals.
        reads: The port's reads (profile names, the running profile).
        gpus: GPUs to restart.
        affected: The servers in words (ports, pids) for the confirm screen.

    Returns:
        The choice, or None when the operator backed out.
    """
    names, current = await asyncio.to_thread(
        lambda: (reads.profile_names(), reads.current_profile())
    )
    chosen = current
    if names:
        title = f"Relaunch GPU{'s' if len(gpus) > 1 else ''} {gpu_range(gpus)} with which profile?"
        chosen = await app.push_screen_wait(ProfilePickerScreen(title, names, current))
        if chosen is None:
            return None
    same = chosen == current
    how = "relaunched" if same else "stopped, its memory released, and launched with the profile"
    confirmed = await app.push_screen_wait(
        ConfirmScreen(_restart_title(gpus, chosen), f"Each server is {how}:\n{affected}", "Restart")
    )
    return RelaunchChoice(chosen, gpus, same) if confirmed else None


def rollback_targets(running: dict[int, GpuState], gpus: tuple[int, ...]) -> dict[str, list[int]]:
    """Previous profile name -> the GPUs of ``gpus`` that go back to it."""
    targets: dict[str, list[int]] = {}
    for gpu in gpus:
        entry = running.get(gpu)
        if entry is not None and entry.previous_name:
            targets.setdefault(entry.previous_name, []).append(gpu)
    return targets


def describe_rollback(running: dict[int, GpuState], gpus: tuple[int, ...]) -> tuple[str, str]:
    """The rollback question and its detail: which profile each GPU returns to.

    Args:
        running: Each GPU's current and previous profile.
        gpus: The fleet's GPUs.

    Returns:
        (title, detail) for the confirm screen.
    """
    targets = rollback_targets(running, gpus)
    if not targets:
        return (
            "Roll back to the previous profile?",
            "No previous profile is recorded here; the backend decides what to relaunch.",
        )
    names = sorted(targets)
    back = sorted(g for members in targets.values() for g in members)
    plural = "s" if len(back) > 1 else ""
    title = f"Roll back GPU{plural} {gpu_range(back)} to {', '.join(names)}?"
    lines = []
    for name in names:
        members = targets[name]
        now = sorted({running[g].current_name or "nothing" for g in members})
        lines.append(f"GPU {gpu_range(members)}: {', '.join(now)} -> {name}")
    lines.append(
        f"{len(back)} server{plural} stopped and relaunched, one at a time unless all at once "
        "is chosen; the fleet's throughput is measured before and after."
    )
    return title, "\n".join(lines)


@dataclass(frozen=True, slots=True)
class RollbackChoice:
    """A confirmed rollback: where to, in words, and which GPUs go back."""

    target: str
    """The previous profile name(s), comma-separated ('the previous profile' when unknown)."""
    gpus: tuple[int, ...]
    """GPUs with a previous profile recorded (the scope's GPUs when none is)."""
    scoped: bool = False
    """True when the operator chose the GPUs (marked GPUs or a node): only ``gpus`` go back;
    False for the fleet, where the backend returns every GPU that has a previous profile."""
    all_at_once: bool = False
    """Every GPU back together (the operator chose it); False: one GPU at a time."""


async def confirm_rollback(
    app: App[None],
    reader: Callable[[], dict[int, GpuState]],
    gpus: tuple[int, ...],
    scope: str = "",
    scoped: bool = False,
) -> RollbackChoice | None:
    """Read which profile each GPU ran before, and ask (naming it, the GPUs and the scope): one
    GPU at a time (``y``) or all at once (``a``).

    Args:
        app: The app, to show the confirm screen.
        reader: Each GPU's current and previous profile (blocking: run in a thread).
        gpus: The GPUs in scope (the fleet's, when nothing is marked).
        scope: The scope in words (``tui.ui.grid.scope.scope_words``), shown first.
        scoped: The operator chose ``gpus`` (marked GPUs or a node), not the fleet.

    Returns:
        The confirmed rollback, or None when the operator said no.
    """
    running = await asyncio.to_thread(reader)
    title, detail = describe_rollback(running, gpus)
    if scope:
        detail = f"Scope: {scope}\n{detail}"
    dialog = RollbackScreen(title, detail)
    confirmed: bool | None = await app.push_screen_wait(dialog)
    if not confirmed:
        return None
    targets = rollback_targets(running, gpus)
    back = tuple(sorted(g for members in targets.values() for g in members)) or gpus
    name = ", ".join(sorted(targets)) or "the previous profile"
    return RollbackChoice(name, back, scoped, dialog.all_at_once)
