"""The small protocols the retune engine drives, so tests inject fakes and the CLI the real parts.

The engine never imports process control, probes or the log parser directly: ``wiring.py`` adapts
the real implementations to these protocols.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from tui.retune.events import EffectiveValues, RequestedValues

SignalKind = Literal["phase", "error", "effective"]


@dataclass(frozen=True, slots=True)
class ServerSignal:
    """One fact the engine learns from a server's log (adapted from the log parser's events)."""

    kind: SignalKind
    """'phase' (startup progress), 'error' (OOM or crash), 'effective' (allocation facts)."""
    text: str = ""
    """The phase in words, or the raw error line."""
    reason: str | None = None
    """For errors: 'oom' or another reason."""
    effective: EffectiveValues = field(default_factory=EffectiveValues)
    """For 'effective': the values this line revealed (others None)."""


@dataclass(frozen=True, slots=True)
class GpuLaunchSpec:
    """What to launch on one GPU (built from the profile, per-GPU override applied)."""

    gpu: int
    """GPU index."""
    profile: str
    """Profile name."""
    requested: RequestedValues
    """The knobs it asks for (for the verify report)."""
    argv: tuple[str, ...] = ()
    """The exact launch argv."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment (CUDA_VISIBLE_DEVICES included)."""
    log_path: str = ""
    """Where the server logs."""
    port: int = 0
    """HTTP port."""


class LaunchedServer(Protocol):
    """A server the engine launched on one GPU."""

    pid: int
    """Main process id."""
    log_path: str
    """Its log file."""

    def exit_code(self) -> int | None:
        """The exit status once the main process has exited, else None."""
        ...

    def read_signals(self) -> Sequence[ServerSignal]:
        """New facts from the log since the last call (non-blocking, small reads)."""
        ...

    async def ready(self) -> bool:
        """True when ``/health_generate`` answers 200 (never just /model_info)."""
        ...

    async def effective(self) -> EffectiveValues:
        """Effective values from ``/server_info`` (empty record when unavailable)."""
        ...

    async def stop(self) -> tuple[int, ...]:
        """Stop the process group (SIGTERM, deadline, SIGKILL); returns every pid it had."""
        ...


class FleetTarget(Protocol):
    """Everything the engine does to the fleet, one GPU at a time."""

    def validate(self, gpus: Sequence[int]) -> list[str]:
        """Errors in the profile for these GPUs (field, value, allowed range); empty = valid."""
        ...

    def spec_for(self, gpu: int) -> GpuLaunchSpec:
        """The launch spec of this GPU (profile with its per-GPU override)."""
        ...

    async def stop_current(self, gpu: int) -> tuple[int, ...]:
        """Stop what the fleet runs on this GPU, if anything; returns the pids that were stopped."""
        ...

    async def wait_released(self, gpu: int, pids: Sequence[int], timeout_s: float) -> bool:
        """Wait until none of ``pids`` (when empty: no fleet process) holds memory on the GPU."""
        ...

    async def launch(self, spec: GpuLaunchSpec) -> LaunchedServer:
        """Start the server (raises LaunchError with a clear message when it cannot)."""
        ...

    def free_memory(self, gpu: int) -> int | None:
        """Free bytes on the GPU now, or None when no GPU source can say."""
        ...


class ThroughputProbe(Protocol):
    """Cumulative output tokens per GPU (e.g. sglang:generation_tokens_total from /metrics)."""

    async def counters(self, gpus: Sequence[int]) -> dict[int, float | None]:
        """The counter of each GPU now; None for a GPU that did not answer."""
        ...


class LaunchError(RuntimeError):
    """A launch that could not start (port held, stale process, died at once)."""
