"""The main process's serving state, as SGLang 0.5.23's TokenizerManager keeps it.

``server_status`` (Starting, Up, UnHealthy), ``gracefully_exit`` (a SIGTERM drain began),
``last_receive_tstamp`` (when any output last came back from the scheduler: what ``/health``
waits for) and ``rid_to_state`` (every request in flight, health probes included: what the drain
counts). ``is_healthy`` and ``is_ready`` are the source's (``srt/managers/tokenizer_manager.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from tui.sglang.builds import SGLANG_0_5_17
from tui.sglang.models import ModelSpec
from tui.sglang.plan_types import MemoryPlan
from tui.sim.http_metrics import HttpCounts
from tui.sim.scheduler import SimScheduler

SGLANG_VERSION = "0.5.23"
"""The SGLang version the simulator imitates (its default build's)."""


def sglang_version(build: str) -> str:
    """The ``version`` a server of ``build`` reports (the seed build's lines are 0.5.23's)."""
    return "0.5.17" if build == SGLANG_0_5_17 else SGLANG_VERSION


class ServerStatus(StrEnum):
    """``ServerStatus`` of ``srt/managers/tokenizer_manager.py``."""

    STARTING = "Starting"
    """Until the warmup request succeeded."""
    UP = "Up"
    """Serving."""
    UNHEALTHY = "UnHealthy"
    """A health check failed (a later one that succeeds sets Up again)."""


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
    emit: Callable[..., None]
    """Log writer."""
    gpu_name: str = "NVIDIA B200"
    """The accelerator's name (``/v1/loads``)."""
    server_status: ServerStatus = ServerStatus.STARTING
    """Starting until the warmup succeeded."""
    gracefully_exit: bool = False
    """A SIGTERM drain began."""
    is_pause: bool = False
    """``/pause_generation`` (not modelled: always False)."""
    last_receive_tstamp: float = field(default_factory=time.time)
    """time.time() of the last output from the scheduler."""
    rid_to_state: dict[str, float] = field(default_factory=dict)
    """Requests in flight (rid -> time.time() of arrival), health probes included."""
    startup_time: dict[str, object] = field(default_factory=dict)
    """The engine's startup timings (``/server_info``)."""
    counters: dict[str, int] = field(default_factory=dict)
    """Request counters by outcome (aborted, ...)."""
    http: HttpCounts = field(default_factory=HttpCounts)
    """Every HTTP request by endpoint (``--enable-metrics``: ``tui.sim.http_metrics``)."""
    on_first_request: Callable[[], None] | None = None
    """``auto_create_handle_loop``: installs the running-phase signal handlers, once."""

    def is_healthy(self) -> bool:
        """Startup completed and neither unhealthy nor shutting down."""
        return not self.gracefully_exit and self.server_status == ServerStatus.UP

    def is_ready(self) -> bool:
        """What ``/ready`` answers: healthy and not paused."""
        return not self.is_pause and self.is_healthy()

    def handle_loop(self) -> None:
        """Called by every request that reaches the scheduler (the first one sets up signals)."""
        hook, self.on_first_request = self.on_first_request, None
        if hook is not None:
            hook()

    def received(self) -> None:
        """An output came back from the scheduler."""
        self.last_receive_tstamp = time.time()
