"""The immutable fleet snapshot the console renders: one panel per GPU.

The monitor (``tui.fleet.monitor``) builds it from the GPU source, each server's HTTP probes and
each server's log events; the UI only reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from tui.fleet.energy import FleetEnergy, GpuEnergy
from tui.fleet.imbalance import Outlier
from tui.fleet.latency import LatencySummary
from tui.fleet.running_profiles import RunningProfile
from tui.fleet.speculative import SpecDecode
from tui.gpu.snapshot import GpuSnapshot


class ServerState(StrEnum):
    """Lifecycle of one SGLang server as the console sees it."""

    ABSENT = "absent"
    """No server is configured or found for this GPU."""
    STARTING = "starting"
    """Process alive, not yet ready; ``phase`` says which startup phase the log reached."""
    READY = "ready"
    """``/ready`` answered 200 (SGLang sets Up once its warmup request succeeded)."""
    FAILED = "failed"
    """The log showed an OOM or crash, or the process exited while starting."""
    STOPPED = "stopped"
    """The process exited because it was stopped: gpufleet stopped it (the fleet state dropped
    its record, its address was cordoned, the console asked) or it drained on a SIGTERM (its log
    says so, whoever sent it)."""
    CRASHED = "crashed"
    """The process died without being stopped (killed, OOM, a segfault, an exit nobody asked
    for): ``exit_status`` says how when the kernel still knew, ``last_error`` what the log said
    last. Also a server the fleet state records that no longer runs (it was never stopped)."""
    STALE = "stale"
    """The process is alive but probes time out: not dead, not known to be healthy."""
    STUCK = "stuck"
    """It answers (``/ready`` 200) but has requests and makes no progress: no decode or prefill
    step, no token counted, no batch line, for longer than the liveness bound
    (``tui.fleet.liveness``). A hung scheduler can keep ``/health`` at 200."""
    STOPPING = "stopping"
    """A stop was requested and the process has not exited yet."""
    UNKNOWN = "unknown"
    """Something serves the GPU's port that the fleet state does not record there (no record,
    or another process than the recorded one): not counted ready, never signalled without the
    operator's confirmation naming its pid and command line, and then only that pid."""


@dataclass(frozen=True, slots=True)
class ServerSnapshot:
    """Everything known about the server on one GPU at one moment."""

    port: int
    """HTTP port."""
    state: ServerState
    """Lifecycle state."""
    pid: int | None = None
    """Main server process id, when found."""
    phase: str = ""
    """Current startup phase from the log (e.g. 'loading weights', 'capturing CUDA graphs')."""
    log_path: str | None = None
    """The server's log file."""
    kv_tokens: int | None = None
    """KV pool size in tokens (max_total_num_tokens)."""
    mamba_slots: int | None = None
    """max_mamba_cache_size as allocated."""
    max_running_requested: int | None = None
    """--max-running-requests as the server reports it (``/server_info`` or its args line):
    what the profile asked, or SGLang's own reset when the profile left it auto (48 with
    speculative decoding). What the profile asked is ``profile.asked``."""
    max_running_effective: int | None = None
    """Effective max running requests after SGLang's caps."""
    capped: bool = False
    """True when SGLang capped the requested max running requests (warning line or server_info)."""
    running: int | None = None
    """Requests running now."""
    queued: int | None = None
    """Requests waiting in the queue."""
    token_usage: float | None = None
    """KV (full-attention) token usage, 0..1."""
    mamba_usage: float | None = None
    """Mamba slot usage, 0..1."""
    swa_usage: float | None = None
    """Sliding-window KV usage, 0..1 (0 on a model without SWA layers; None: not exported)."""
    cache_hit_rate: float | None = None
    """The prefix cache hit rate, 0..1."""
    gen_throughput: float | None = None
    """Generation throughput in tokens/s (last reading)."""
    accept_len: float | None = None
    """Speculative decoding accept length."""
    spec: SpecDecode | None = None
    """The draft it runs (accept length and rate, steps); None when it runs none."""
    latency: LatencySummary | None = None
    """TTFT, inter-token, E2E and queue-time percentiles over the rolling window
    (``tui.fleet.latency``); None before its first ``/metrics`` reading with histograms."""
    throughput_history: tuple[float, ...] = ()
    """Recent gen throughput readings, oldest first, for the sparkline."""
    allocation_lines: tuple[str, ...] = ()
    """The startup allocation lines (weights, Mamba cache, KV cache, pool summary, caps)."""
    last_error: str | None = None
    """The last error line (OOM, crash) from the log, if any."""
    error_reason: str | None = None
    """'oom' or another reason for the last error."""
    error_fatal: bool = True
    """Whether that error means the server is going down or cannot serve (False: one request
    failed, e.g. an input too long; shown as a warning)."""
    stuck_for_s: float | None = None
    """Seconds without progress while requests wait, when that passed the liveness bound."""
    pressure: str | None = None
    """The last memory-pressure event in a few words ('retracted 3', 'prefill OOM')."""
    pressure_age_s: float | None = None
    """Seconds since that event (from its log stamp), when known."""
    ready_at: float | None = None
    """time.time() when the server was first seen ready."""
    updated_at: float = 0.0
    """time.time() of the newest information in this snapshot."""
    profile: RunningProfile | None = None
    """The profile the fleet state records for this GPU (None: none recorded)."""
    load_age_s: float | None = None
    """Seconds since running, queued and the usages were last read from the server (its
    ``/metrics``); None when never read (they may then come from the log)."""
    throughput_age_s: float | None = None
    """Seconds since the last Decode line (``gen_throughput`` has already been decayed by it,
    ``tui.fleet.freshness``); None when none was seen since the launch."""
    cmdline: tuple[str, ...] = ()
    """The main process's command line, when known (what an ``unknown`` server is named by)."""
    start_ticks: int | None = None
    """The main process's start in clock ticks since boot, when known: a confirmation to stop
    an ``unknown`` server names this very process."""
    stranger: bool = False
    """A process of this host serves the port and the fleet state records nothing of this GPU
    on it: gpufleet neither launched nor adopted it (a fleet watched with ``--ports``, or a
    profile's console on servers started by the operator's own script). Nothing would verify
    it as the fleet's: a stop names it and asks, as for ``unknown`` (``gpufleet adopt`` takes
    it over instead)."""
    exit_status: str | None = None
    """How a crashed server ended: ``killed by SIGKILL``, ``exit code 1``, or ``exit status
    unknown`` (the kernel keeps it only until the process's parent reaps it, and gpufleet is
    rarely that parent); None unless ``state`` is crashed."""


@dataclass(frozen=True, slots=True)
class GpuPanel:
    """One panel of the grid: a GPU and the server that runs on it."""

    gpu_index: int
    """Which GPU this panel is for."""
    gpu: GpuSnapshot | None
    """Latest GPU reading; None when no source can read this GPU."""
    server: ServerSnapshot | None
    """The server on this GPU; None when the fleet has none for it."""
    gpu_note: str = ""
    """Why ``gpu`` is None, in plain words."""
    node: str = ""
    """The node this GPU is on, in a console over many nodes' agents ("" on one node); its
    ``gpu_index`` is then ``node position * NODE_STRIDE + the GPU's index on the node``."""
    energy: GpuEnergy | None = None
    """Joules, mean power and output tokens per joule (``tui.fleet.energy``); None before a
    reading of its power or energy counter."""
    device: int | None = None
    """The physical GPU ``gpu`` reads when it is not this slot's own index: a slot whose
    server shares another's card (two panels then show the same card). None: its own."""

    @property
    def on_device(self) -> str:
        """' · on device 0' for a slot sharing another's card, else ''."""
        return "" if self.device is None else f" · on device {self.device}"

    @property
    def local_index(self) -> int:
        """The GPU's index on its own node."""
        return self.gpu_index % NODE_STRIDE if self.node else self.gpu_index


NODE_STRIDE = 100
"""Panels of the k-th node (from 0) of a many-node console are numbered k*100 + the GPU's index."""


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """One node of a many-node console: whether its agent answers."""

    name: str
    """The node's name (its agent's ``--node``, else its address)."""
    address: str
    """The agent's ``host:port``."""
    reachable: bool
    """Its agent answered the last poll."""
    last_answer_at: float | None = None
    """time.time() of its agent's last answer (None: never)."""
    error: str = ""
    """Why the last poll failed, in plain words."""
    readonly: bool = False
    """The agent refuses every write (``--readonly``)."""


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    """The whole fleet at one moment."""

    panels: tuple[GpuPanel, ...] = field(default_factory=tuple)
    """One per GPU, in GPU index order."""
    gpu_source: str = ""
    """describe() of the GPU source, for the header."""
    taken_at: float = 0.0
    """time.time() of the snapshot."""
    nodes: tuple[NodeStatus, ...] = ()
    """The nodes, in order, in a console over many nodes' agents (empty on one node)."""
    refresh_soon: bool = False
    """A server is about to become ready (warming up): poll again sooner than usual, so the
    ready line shows within a fraction of a second."""
    latency: LatencySummary | None = None
    """The fleet's latency percentiles: the live servers' windows summed bucket by bucket."""
    energy: FleetEnergy | None = None
    """The fleet's joules, power and tokens per joule (every metered GPU's summed)."""
    imbalance: tuple[Outlier, ...] = ()
    """GPUs whose queue, running, KV use or tok/s stands out from the fleet beyond its noise
    (``tui.fleet.imbalance``)."""
