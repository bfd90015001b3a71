"""The keyboard flows before a canary or a rollout: pick a profile, confirm what restarts.

Run inside a screen's worker, since they wait on modal screens.
"""

from __future__ import annotations

import asyncio

from textual.app import App

from tui.ops.port import Fleet, FleetReads
from tui.ui.confirm import ConfirmScreen
from tui.ui.retune.profile_picker import ProfilePickerScreen
from tui.ui.rollout.describe import canary_question, rollout_question


async def _pick(app: App[None], reads: FleetReads, title: str) -> str | None:
    names, current = await asyncio.to_thread(
        lambda: (reads.profile_names(), reads.current_profile())
    )
    if not names:
        app.notify("No saved profiles to choose from.", title=title, severity="warning")
        return None
    # A canary or a rollout of the running profile changes nothing: the first other profile is
    # highlighted (Enter on the running one, preselected, started an A/A canary).
    return await app.push_screen_wait(ProfilePickerScreen(title, names, current, other_first=True))


async def choose_canary(
    app: App[None], port: Fleet, gpu: int, fleet: tuple[int, ...], affected: str
) -> str | None:
    """Ask which profile to try on ``gpu``, then confirm naming the GPU and the controls.

    Args:
        app: The app, to show the modals.
        port: The fleet (profile names, the running profile; who picks the controls).
        gpu: The canary GPU.
        fleet: Every GPU of the fleet.
        affected: The canary GPU's server in words (port, pid).

    Returns:
        The chosen profile, or None when the operator backed out.
    """
    profile = await _pick(app, port.reads, f"Canary on GPU {gpu}: try which profile?")
    if profile is None:
        return None
    # A many-node console's port picks the controls and rolls a worse candidate back.
    picks = port.capabilities().picks_controls
    title, detail = canary_question(profile, gpu, fleet, picks)
    confirmed = await app.push_screen_wait(
        ConfirmScreen(title, f"{detail}\n{affected}", "Start canary", destructive=False)
    )
    return profile if confirmed else None


async def choose_rollout(
    app: App[None], reads: FleetReads, gpus: tuple[int, ...], scope: str = ""
) -> str | None:
    """Ask which profile to roll out, then confirm (one GPU at a time, stop at a failure).

    Args:
        app: The app, to show the modals.
        reads: The port's reads (profile names, the running profile).
        gpus: The GPUs in scope (every GPU of the fleet when nothing is marked).
        scope: The scope in words (``tui.ui.grid.scope.scope_words``), shown first.

    Returns:
        The chosen profile, or None when the operator backed out.
    """
    profile = await _pick(app, reads, "Roll out which profile, one GPU at a time?")
    if profile is None:
        return None
    title, detail = rollout_question(profile, gpus)
    if scope:
        detail = f"Scope: {scope}\n{detail}"
    confirmed = await app.push_screen_wait(ConfirmScreen(title, detail, "Roll out"))
    return profile if confirmed else None
