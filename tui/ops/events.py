"""Every event an operation of the operations core emits, as one typed union.

The console, the CLI and (later) the autotuner subscribe to an operation with an ``EventSink``
and dispatch on the event's type; nothing crosses the boundary as ``object``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tui.control.stop_release import DrainProgress
from tui.retune.events import (
    ApplyFinished,
    ApplyRefused,
    GpuFailed,
    GpuPhase,
    GpuReady,
    MeasureProgress,
)
from tui.rollout.canary_result import CanaryLook
from tui.rollout.rollout import RolloutStep


@dataclass(frozen=True, slots=True)
class OperationStarted:
    """An operation took the fleet (it holds the operation lock)."""

    operation: str
    """e.g. 'apply sim-aggressive to GPUs 0-6'."""
    gpus: tuple[int, ...]
    """GPUs it will touch."""


@dataclass(frozen=True, slots=True)
class OperationFinished:
    """An operation ended (it released the lock)."""

    operation: str
    """Same words as its start."""
    ok: bool
    """It did all it set out to do."""
    summary: str
    """One line for the operator."""


OpEvent = (
    OperationStarted
    | OperationFinished
    | GpuPhase
    | GpuReady
    | GpuFailed
    | MeasureProgress
    | ApplyRefused
    | ApplyFinished
    | DrainProgress
    | CanaryLook
    | RolloutStep
)
"""Anything an operation reports while it runs."""

EventSink = Callable[[OpEvent], None]
"""Receives an operation's events, in order, on the event loop that runs it."""
