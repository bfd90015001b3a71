"""The small protocols the retune engine drives, so tests inject fakes and the CLI the real parts.

The engine never imports process control, probes or the log parser directly: ``wiring.py`` adapts
the real implementations to these protocols.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
    host: str = "127.0.0.1"
    """Address it serves on."""
    device: int | None = None
    """The physical GPU it runs on (its ``CUDA_VISIBLE_DEVICES``; None: ``gpu``)."""

    @property
    def device_index(self) -> int:
        """The physical GPU whose memory it will hold."""
        return self.gpu if self.device is None else self.device


@dataclass(frozen=True, slots=True)
class Stopped:
    """What stopping a GPU's server did (the process stop and the GPU-memory release wait)."""

    ok: bool
    """Nothing of the server runs and its GPU memory is released."""
    message: str = ""
    """One line for the operator."""
    refused: bool = False
    """Nothing was signalled: what runs there is not verified as the fleet's server."""
    drain_timed_out: bool = False
    """The old server's drain ran past its deadline: it was signalled while it served."""
    lost_in_flight: int | None = None
    """Requests the stop dropped in flight (0: none; None: nothing was signalled, or some were
    and how many is unknown)."""
    drain_note: str = ""
    """What the stop did to the requests, when that is news (``drain timed out after 60 s: ...;
    ...: 16 in-flight requests lost``); "" when it drained."""
    client_still_sending: bool = False
    """The drain ended while a client was still sending: requests may have been lost."""
    arrived_during_drain: int | None = None
    """Requests that arrived after the SIGTERM (None: not counted)."""


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

    async def stop(self) -> Stopped:
        """Stop it and wait until its GPU memory is released (the one stop-and-release)."""
        ...


class FleetTarget(Protocol):
    """Everything the engine does to the fleet, one GPU at a time."""

    def validate(self, gpus: Sequence[int]) -> list[str]:
        """Errors in the profile for these GPUs (field, value, allowed range); empty = valid."""
        ...

    def spec_for(self, gpu: int) -> GpuLaunchSpec:
        """The launch spec of this GPU (profile with its per-GPU override)."""
        ...

    async def stop_current(self, gpu: int, on_stage: Callable[[str], None]) -> Stopped:
        """Stop what the fleet runs on this GPU, if anything, and wait for its GPU memory;
        ``on_stage`` gets each stage as it begins ('draining', 'waiting for GPU memory
        release'), on the event loop."""
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
