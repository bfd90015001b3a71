"""What the console's toast says once a command ended: "Done" only when nothing was lost; a
drain that ran past its deadline while a client kept sending (its requests in flight dropped by
the group's signal) is an error naming each GPU's loss."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tui.ops.commands import (
    Adopt,
    Kill,
    Op,
    Relaunch,
    SaveProfile,
    StartAutotune,
    StartPipeline,
    SteerAutotune,
    StopPipeline,
)
from tui.ops.types import ApplyResult, StopReleased
from tui.ui.describe import stop_words

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


def asked(command: Op[Any]) -> str:
    """What the operator asked, in words (the worker's name; a toast's start)."""
    match command:
        case Kill(gpus, mode):
            return f"stop GPU {_gpus(gpus)} ({mode})"
        case Relaunch(gpus):
            return f"relaunch GPU {_gpus(gpus)}"
        case StartPipeline():
            return "start the pipeline"
        case StopPipeline():
            return "stop the pipeline"
        case Adopt(plan):
            return f"adopt {plan.summary()}"
        case SaveProfile(profile):
            return f"save {profile.name}"
        case StartAutotune():
            return "start the autotune search"
        case SteerAutotune(action):
            return f"{action} the autotune search"
    return type(command).__name__.lower()


def toast_after(command: Op[Any], result: object) -> Toast:
    """The toast once ``command`` ended with ``result`` (what it did, or what it lost)."""
    match command, result:
        case Kill(), tuple() as outcomes:
            return after_kill(asked(command), [o for o in outcomes if isinstance(o, StopReleased)])
        case Relaunch(gpus), tuple() as results:
            done = [r for r in results if isinstance(r, ApplyResult)]
            return after_relaunch(f"relaunched GPU {_gpus(gpus)}", done)
        case StartPipeline(), _:
            return Toast("pipeline started")
        case StopPipeline(), _:
            return Toast("pipeline stopped")
        case StartAutotune(), _:
            return Toast("autotune search started (detached: it runs on if the console closes)")
        case SteerAutotune(action), _:
            # A request in the search's control file: it has not paused or stopped yet.
            return Toast(f"asked the search to {action}", "Asked")
        case Adopt(plan), _:
            return Toast(
                f"adopted {plan.summary()}; nothing was signalled ({plan.path})", "Adopted"
            )
    return Toast(asked(command))
