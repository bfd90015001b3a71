"""What the HTTP layer needs to know about the running simulated server (mutable status)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tui.sglang.models import ModelSpec
from tui.sglang.plan_types import MemoryPlan
from tui.sim.scheduler import SimScheduler

SGLANG_VERSION = "0.5.23"
"""The SGLang version the simulator imitates."""


@dataclass
class SimState:
    """Shared by the startup sequence, the scheduler and the routes (one event loop, no locks)."""

    plan: MemoryPlan
    """The memory plan."""
    model: ModelSpec
    """The served model."""
    scheduler: SimScheduler
    """The scheduler."""
    server_args: dict[str, object]
    """Resolved server args (what server_args= and /server_info print)."""
    model_path: str
    """``--model-path``."""
    served_model_name: str
    """``--served-model-name`` or the model path."""
    launch_command: str
    """The argv, joined for display."""
    enable_metrics: bool
    """``--enable-metrics``."""
    emit: Callable[[str], None]
    """Log writer."""
    status: str = "starting"
    """starting, ready or draining."""
    startup_time: float = 0.0
    """Seconds from launch to ready."""
    counters: dict[str, int] = field(default_factory=dict)
    """Request counters by outcome (aborted, ...)."""

    @property
    def ready(self) -> bool:
        """Warmup done and not shutting down."""
        return self.status == "ready"
