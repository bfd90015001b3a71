"""The core's types a front end shows, in one place: what the console imports beside the port.

The console (``tui.ui``) reaches the fleet through ``tui.ops`` only (an import-linter contract
in pyproject.toml): the results, events and records of the layers below the operations core
that it draws come from here, so the console depends on the operations' vocabulary, never on
how each layer computes it.
"""

from __future__ import annotations

from tui.control.adopt import ConfirmedServer
from tui.control.launch import LOG_KEEP
from tui.control.stop import StopMode
from tui.control.stop_release import DrainProgress, StopReleased
from tui.retune.events import (
    ApplyFinished,
    ApplyRefused,
    ApplyResult,
    EffectiveValues,
    GpuFailed,
    GpuPhase,
    GpuReady,
    MeasureProgress,
    RequestedValues,
    ThroughputComparison,
    VerifyReport,
    lost_summary,
)
from tui.retune.preflight import Preflight, planned_for_lines
from tui.rollout.canary_result import CanaryLook, CanaryResult
from tui.rollout.fleet_verdict import fleet_line
from tui.rollout.rollout import RolloutResult
from tui.rollout.stats import PairedEstimate
from tui.state.files import StateFileError
from tui.state.fleet_state import GpuState, profile_of, read_fleet

__all__ = [
    "LOG_KEEP",
    "ApplyFinished",
    "ApplyRefused",
    "ApplyResult",
    "CanaryLook",
    "CanaryResult",
    "ConfirmedServer",
    "DrainProgress",
    "EffectiveValues",
    "GpuFailed",
    "GpuPhase",
    "GpuReady",
    "GpuState",
    "MeasureProgress",
    "PairedEstimate",
    "Preflight",
    "RequestedValues",
    "RolloutResult",
    "StateFileError",
    "StopMode",
    "StopReleased",
    "ThroughputComparison",
    "VerifyReport",
    "fleet_line",
    "lost_summary",
    "planned_for_lines",
    "profile_of",
    "read_fleet",
]
