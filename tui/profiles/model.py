"""The tuning profile: one immutable description of a whole fleet launch.

A profile says which engine to run (real SGLang or the simulator), on which GPUs and ports, where
each server logs, which environment it gets, and the SGLang flags shared by every GPU, with per-GPU
overrides so one change can be tried on one GPU first. ``tui.profiles.parse`` builds it from TOML
(validating everything), ``tui.profiles.launch_args`` turns it into argv, env and log paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal

from tui.sglang.knobs import TUNED

FlagValue = str | int | float | bool
"""Value of a pass-through SGLang flag; ``True`` is a bare flag, ``False`` leaves it out."""

EngineKind = Literal["sglang", "sim"]

AUTO = "auto"
"""Spelling, in a per-GPU override, of "let SGLang decide" for a knob the shared flags set."""

KNOBS = TUNED
"""The four tuning knobs, first-class: each optional, absent meaning SGLang's automatic value
(their ranges and couplings: ``tui.sglang.knobs.KNOB_TABLE``)."""


@dataclass(frozen=True, slots=True)
class ServerFlags:
    """SGLang flags for one server (shared by the fleet, or resolved for one GPU). None = auto."""

    model_path: str | None = None
    """``--model-path``: weights directory or hub id."""
    mem_fraction_static: float | None = None
    """``--mem-fraction-static``: share of free memory for pools (every numeric field's range:
    its row of ``tui.sglang.knobs.KNOB_TABLE``)."""
    max_mamba_cache_size: int | None = None
    """``--max-mamba-cache-size``: Mamba state slots."""
    mamba_full_memory_ratio: float | None = None
    """``--mamba-full-memory-ratio``: Mamba pool size relative to the KV pool."""
    max_running_requests: int | None = None
    """``--max-running-requests``; SGLang may cap it (Mamba slots per request)."""
    mamba_radix_cache_strategy: str | None = None
    """``--mamba-radix-cache-strategy``: auto, no_buffer, extra_buffer or extra_buffer_lazy."""
    speculative_algorithm: str | None = None
    """``--speculative-algorithm``: EAGLE, EAGLE3, NEXTN, STANDALONE or NGRAM."""
    speculative_num_steps: int | None = None
    """``--speculative-num-steps``."""
    speculative_eagle_topk: int | None = None
    """``--speculative-eagle-topk``."""
    speculative_num_draft_tokens: int | None = None
    """``--speculative-num-draft-tokens``."""
    extra_flags: tuple[tuple[str, FlagValue], ...] = ()
    """Any other SGLang flag, (snake_case name, value), passed through in this order."""


SERVER_FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(ServerFlags) if f.name != "extra_flags"
)
"""Named (first-class) server fields, in argv order."""


@dataclass(frozen=True, slots=True)
class GpuOverride:
    """Per-GPU changes on top of the shared flags (``[gpu.N]`` in the TOML)."""

    gpu: int
    """GPU index the override applies to."""
    values: tuple[tuple[str, str | int | float | None], ...] = ()
    """(server field, value) pairs; None resets that field to SGLang's auto."""
    extra_flags: tuple[tuple[str, FlagValue], ...] = ()
    """Pass-through flags added or replaced for this GPU."""
    device: int | None = None
    """The physical GPU this slot's server runs on (its ``CUDA_VISIBLE_DEVICES``, the device
    whose memory and driver readings are its own) when that is not the slot's own index:
    several servers sharing one card (``[gpu.1] device = 0``). None: the slot's index."""


@dataclass(frozen=True, slots=True)
class Engine:
    """What program serves: real SGLang or the simulator (same flags either way)."""

    kind: EngineKind = "sglang"
    """``sglang``: ``<python> -m sglang.launch_server``; ``sim``: ``<this python> -m tui sim``."""
    sglang_version: str | None = None
    """SGLang release the profile targets (its flag table judges the argv): one gpufleet ships a
    table for, or ``"auto"`` (the one ``python`` has, ``tui.profiles.sglang_release``); None:
    the newest."""
    python: str = "python"
    """Python executable for the real engine (a name on PATH or an absolute path)."""
    legacy_mamba_flag: bool = False
    """Emit ``--mamba-scheduler-strategy``, the name before the rename (a deprecated alias up to
    SGLang 0.5.19, refused from 0.5.20)."""
    sim_gpu: str = "b200"
    """Simulated GPU kind (sim engine only)."""
    sim_speed: float = 1.0
    """Simulator time compression (sim engine only; 1 = real time)."""
    sim_model: str | None = None
    """Simulated model (sim engine only; None = the simulator's default)."""


DEVICE_MAX = 255
"""The highest physical GPU index a slot may name (``[gpu.N] device``)."""

DRAIN_TIMEOUT_MAX_S = 10.0**6
"""The longest drain deadline a profile (or ``--drain-timeout``) may set, in seconds."""


@dataclass(frozen=True, slots=True)
class StopSettings:
    """How the fleet's servers are stopped (``[stop]`` in the TOML)."""

    drain_timeout_s: float | None = None
    """Seconds a server may drain (SIGTERM to its main pid) before its process group is
    signalled and what it has in flight is lost, in (0, 10^6]; None: gpufleet's default (60).
    A client that never stops sending keeps a SGLang drain going until this deadline."""


@dataclass(frozen=True, slots=True)
class Profile:
    """A complete, validated fleet launch description."""

    name: str
    """Profile name (file stem by default)."""
    note: str = ""
    """Free text: why this profile exists."""
    engine: Engine = field(default_factory=Engine)
    """Which program serves."""
    gpus: tuple[int, ...] = ()
    """GPU indices, one server each."""
    ports: tuple[int, ...] = ()
    """HTTP port of each GPU's server, in the order of ``gpus``."""
    host: str = "127.0.0.1"
    """Address every server binds."""
    log_dir: str = "{state}/logs"
    """Log directory; ``{state}`` stands for gpufleet's state directory."""
    log_file: str = "sglang_gpu{gpu}.log"
    """Log file name pattern; ``{gpu}`` and ``{port}`` are filled in."""
    env: tuple[tuple[str, str], ...] = ()
    """Extra environment for every server."""
    server: ServerFlags = field(default_factory=ServerFlags)
    """Flags shared by every GPU."""
    overrides: tuple[GpuOverride, ...] = ()
    """Per-GPU overrides, by GPU index."""
    stop: StopSettings = field(default_factory=StopSettings)
    """How its servers are stopped (the drain's deadline)."""

    def port_for(self, gpu: int) -> int:
        """The port of GPU ``gpu``'s server.

        Raises:
            KeyError: the GPU is not part of this profile.
        """
        if gpu not in self.gpus:
            raise KeyError(f"GPU {gpu} is not in profile {self.name!r} (GPUs {list(self.gpus)})")
        return self.ports[self.gpus.index(gpu)]

    def override_for(self, gpu: int) -> GpuOverride | None:
        """This GPU's override, if the profile has one."""
        return next((o for o in self.overrides if o.gpu == gpu), None)

    def device_for(self, gpu: int) -> int:
        """The physical GPU slot ``gpu``'s server runs on: its ``[gpu.N] device``, else ``gpu``.

        Raises:
            KeyError: the GPU is not part of this profile.
        """
        self.port_for(gpu)
        override = self.override_for(gpu)
        return gpu if override is None or override.device is None else override.device

    def neighbours_of(self, gpu: int) -> tuple[int, ...]:
        """The profile's other slots whose servers run on slot ``gpu``'s device."""
        device = self.device_for(gpu)
        return tuple(g for g in self.gpus if g != gpu and self.device_for(g) == device)
