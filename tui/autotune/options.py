"""What a search is asked to do, and how it ended (values shared by the search, the CLI and the
console)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tui.autotune.budget import Budget, Spent
from tui.autotune.record import CandidateRecord
from tui.autotune.space import SearchSpace
from tui.rollout.canary import CanaryOptions
from tui.rollout.rollout import RolloutOptions


class SearchRefused(RuntimeError):
    """The search cannot start (another one runs, too few GPUs, a mixed fleet); nothing ran."""


@dataclass(frozen=True, slots=True)
class AutotuneOptions:
    """What to search, within which budget, and how each step measures."""

    space: SearchSpace = field(default_factory=SearchSpace.default)
    """Knobs and their values."""
    budget: Budget = field(default_factory=Budget)
    """Wall time, exploration GPU-seconds, largest regression."""
    gpu: int | None = None
    """The canary GPU (default: the lowest running GPU)."""
    canary: CanaryOptions = field(default_factory=CanaryOptions)
    """How each canary measures."""
    rollout: RolloutOptions = field(default_factory=RolloutOptions)
    """How a winner is rolled out."""
    mean_output_tokens: int = 2500
    """The job's mean output length (the cheap model's KV room per request)."""
    poll_s: float = 0.25
    """How often control requests are read while waiting."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    """How a search ended."""

    phase: str
    """finished, stopped or failed."""
    reason: str
    """Why, in words."""
    incumbent: str
    """The profile every GPU runs at the end."""
    records: tuple[CandidateRecord, ...]
    """Every candidate considered."""
    spent: Spent
    """What it spent."""
    stale: dict[str, Any] | None = None
    """The status of an earlier search that died, found at start."""
