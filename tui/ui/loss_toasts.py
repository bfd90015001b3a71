"""What the console's toast says once a stop or a relaunch ended: "Done" only when nothing was
lost; a drain that ran past its deadline while a client kept sending (its requests in flight
dropped by the group's signal) is an error naming each GPU's loss."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tui.control.stop_release import StopReleased
from tui.retune.events import ApplyResult
from tui.ui.describe import stop_words
from tui.ui.messages import KillRequested, RelaunchRequested
from tui.ui.sources import FleetActions

LOSS_TOAST_S = 30.0
"""How long a loss stays on screen (an error the operator must read, not a passing note)."""


@dataclass(frozen=True, slots=True)
class Toast:
    """One notification."""

    message: str
    """Its text."""
    title: str = "Done"
    """Its title."""
    severity: Literal["information", "warning", "error"] = "information"
    """How it is drawn."""
    timeout: float | None = None
    """Seconds on screen (None: Textual's default)."""


def after_kill(asked: str, outcomes: Sequence[StopReleased]) -> Toast:
    """The toast of a stop: what each GPU's stop did (``stop_words``: "Stopped" only where a
    server was stopped), or each GPU's loss when a drain timed out."""
    lost = [f"GPU {o.gpu}: {o.drain_note}" for o in outcomes if o.drain_note]
    if any(o.drain_timed_out for o in outcomes):
        title = "Stopped: the drain timed out, requests lost"
        return Toast("\n".join(lost), title, "error", LOSS_TOAST_S)
    if any(o.client_still_sending for o in outcomes):
        title = "Stopped, but a client was still sending: requests may be lost"
        return Toast("\n".join(lost), title, "error", LOSS_TOAST_S)
    title, text = stop_words(outcomes, asked)
    return Toast("\n".join([text, *lost]), title)


def after_relaunch(what: str, results: Sequence[ApplyResult]) -> Toast:
    """The toast of a relaunch: ``what``, unless an old server's drain timed out."""
    reports = [r for result in results for r in result.reports]
    if any(r.lost_requests for r in reports):
        lost = [f"GPU {r.gpu}: {r.drain_note}" for r in reports if r.drain_note]
        title = f"{what}, but a drain timed out: requests lost"
        if not any(r.drain_timed_out or r.lost_in_flight for r in reports):
            title = f"{what}, but a client was still sending: requests may be lost"
        return Toast("\n".join(lost), title, "error", LOSS_TOAST_S)
    return Toast(what)


def _gpus(gpus: Sequence[int]) -> str:
    return ", ".join(str(gpu) for gpu in gpus)


async def stop_and_say(actions: FleetActions, message: KillRequested) -> Toast:
    """Stop the servers ``message`` names (drain, terminate or kill); its toast."""
    asked = f"stop GPU {_gpus(message.gpus)} ({message.mode})"
    outcomes = await actions.kill(message.gpus, message.mode, message.confirmed, message.drain_s)
    return after_kill(asked, outcomes)


async def relaunch_and_say(actions: FleetActions, message: RelaunchRequested) -> Toast:
    """Relaunch the servers ``message`` names; its toast."""
    results = await actions.relaunch(message.gpus, message.confirmed)
    return after_relaunch(f"relaunched GPU {_gpus(message.gpus)}", results)
