"""One simulated server's resolved configuration and its log writer."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tui.sglang.models import ModelSpec
from tui.sglang.plan_types import MemoryPlan
from tui.sim import logfmt
from tui.sim.faults import Fault
from tui.sim.health import HealthEnv


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Everything one simulated server needs, resolved from its command line."""

    plan: MemoryPlan
    """The memory plan (may carry a failure)."""
    model: ModelSpec
    """The served model."""
    host: str
    """HTTP host."""
    port: int
    """HTTP port."""
    speed: float
    """``--sim-speed``: simulated seconds per wall second after startup."""
    startup_scale: float
    """Wall seconds per simulated second of startup (``--sim-startup-seconds`` or 1/speed)."""
    gpu_index: int
    """Simulated GPU index."""
    gpu_kind: str
    """Simulated GPU kind."""
    gpu_name: str
    """The GPU's name (``/v1/loads`` accelerator)."""
    root: Path
    """Simulated driver directory."""
    server_args: dict[str, object]
    """Resolved server args."""
    model_path: str
    """``--model-path``."""
    served_model_name: str
    """Served model name."""
    launch_command: str
    """argv joined."""
    enable_metrics: bool
    """``--enable-metrics``."""
    decode_log_interval: int
    """``--decode-log-interval``."""
    skip_warmup: bool
    """``--skip-server-warmup``."""
    info_logs: bool
    """False when --log-level hides INFO lines."""
    early_messages: tuple[str, ...]
    """Warnings printed during argument resolution."""
    seed: int
    """Random seed."""
    health: HealthEnv = field(default_factory=HealthEnv)
    """What the health handler reads from the environment."""
    faults: tuple[Fault, ...] = ()
    """``--sim-fault``: failures to suffer after readiness."""
    cuda_backing: bool = False
    """Allocate the memory for real on the GPU (``--gpu-backing cuda``)."""


class Emitter:
    """Writes SGLang-prefixed lines to stdout, flushing each (the launcher redirects it)."""

    def __init__(self, stream: IO[str], info: bool = True) -> None:
        """Args: stream: where lines go; info: print INFO-level lines."""
        self.stream = stream
        self.info_enabled = info

    def __call__(self, message: str, info: bool = True) -> None:
        """Print one message (INFO unless ``info`` is False)."""
        if info and not self.info_enabled:
            return
        self.stream.write(logfmt.stamp(message) + "\n")
        self.stream.flush()

    def raw(self, text: str) -> None:
        """Write ``text`` as is: a tqdm bar's redraw (``\\r`` first, a newline only at its end).

        tqdm writes to stderr; the launcher sends stdout and stderr to one log, and one stream
        here keeps their order."""
        self.stream.write(text)
        self.stream.flush()
