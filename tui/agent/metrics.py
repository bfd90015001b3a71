"""The agent's ``/metrics``: Prometheus text from the newest fleet view, built with
``prometheus_client`` (a custom collector; nothing is sampled inside a scrape).

Names follow Prometheus' conventions (units in the name, base units: bytes, seconds, ratios
0-1; ``_total`` only for counters; ``_info`` for the profile); every per-GPU series has the labels
``node``, ``gpu`` and ``port`` (the job's series ``node`` only).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerState
from tui.ops.alerts.engine import AlertFired
from tui.pipeline.energy import JobEnergy
from tui.pipeline.status import PipelineStatus

GPU_LABELS = ("node", "gpu", "port")
"""Labels of every per-GPU series."""
JOB_STATES = ("running", "finished", "stopped", "failed")
"""The pipeline status document's states."""


@dataclass(frozen=True, slots=True)
class AgentView:
    """What the agent knows at one moment: the monitor's snapshot and the rest it serves."""

    node: str
    """The node's name (label ``node``)."""
    snapshot: FleetSnapshot
    """The newest fleet snapshot."""
    profiles: dict[int, str] = field(default_factory=dict)
    """GPU -> the profile its server runs (from the fleet state)."""
    pipeline: PipelineStatus | None = None
    """The job's status document, when there is one."""
    polled_at: float = 0.0
    """time.time() when this view was built."""
    poll_seconds: float = 0.0
    """How long building it took."""
    polls: int = 0
    """Views built since the agent started."""
    previous: dict[int, str] = field(default_factory=dict)
    """GPU -> the profile it ran before its last change (what a rollback returns to)."""
    alerts: tuple[AlertFired, ...] = ()
    """The alerts firing now (``tui.ops.alerts``)."""
    job_energy: JobEnergy | None = None
    """The job's energy ledger beside its status document (``tui.pipeline.energy``)."""


def _port(panel: GpuPanel) -> str:
    return str(panel.server.port) if panel.server is not None else ""


class AgentCollector(Collector):
    """Renders the newest ``AgentView`` on each scrape.

    Args:
        view: Returns the newest view (the agent's poll loop replaces it about once a second).
    """

    def __init__(self, view: Callable[[], AgentView]) -> None:
        self._view = view

    def collect(self) -> Iterator[Metric]:
        """Every family, built from one view."""
        view = self._view()
        yield from _gpu_families(view)
        yield from _server_families(view)
        yield from _job_families(view)
        yield from _agent_families(view)


def _gauges(names: dict[str, str], labels: tuple[str, ...]) -> dict[str, GaugeMetricFamily]:
    return {name: GaugeMetricFamily(name, help_, labels=labels) for name, help_ in names.items()}


_GPU_GAUGES = {
    "gpufleet_gpu_memory_used_bytes": "GPU memory in use (NVML, or the simulated GPU)",
    "gpufleet_gpu_memory_total_bytes": "GPU memory in all",
    "gpufleet_gpu_utilization_ratio": "GPU busy fraction over the driver's last interval, 0-1",
    "gpufleet_gpu_temperature_celsius": "GPU temperature",
    "gpufleet_gpu_power_watts": "GPU power draw",
    "gpufleet_gpu_power_limit_watts": "GPU power limit",
}


def _gpu_families(view: AgentView) -> Iterator[Metric]:
    families = _gauges(_GPU_GAUGES, GPU_LABELS)
    for panel in view.snapshot.panels:
        gpu = panel.gpu
        if gpu is None:
            continue
        labels = [view.node, str(panel.local_index), _port(panel)]
        values = {
            "gpufleet_gpu_memory_used_bytes": gpu.memory_used,
            "gpufleet_gpu_memory_total_bytes": gpu.memory_total,
            "gpufleet_gpu_utilization_ratio": (
                None if gpu.utilization_gpu is None else gpu.utilization_gpu / 100.0
            ),
            "gpufleet_gpu_temperature_celsius": gpu.temperature_c,
            "gpufleet_gpu_power_watts": gpu.power_w,
            "gpufleet_gpu_power_limit_watts": gpu.power_limit_w,
        }
        for name, value in values.items():
            if value is not None:
                families[name].add_metric(labels, float(value))
    yield from families.values()


_SERVER_GAUGES = {
    "gpufleet_server_max_running_requests_requested": "--max-running-requests as given",
    "gpufleet_server_max_running_requests_effective": "max running requests after SGLang's caps",
    "gpufleet_server_max_running_requests_capped": "1 when SGLang capped the requested value",
    "gpufleet_server_kv_cache_tokens": "KV pool size in tokens (max_total_num_tokens)",
    "gpufleet_server_mamba_cache_slots": "Mamba state slots allocated (max_mamba_cache_size)",
    "gpufleet_server_running_requests": "requests running now",
    "gpufleet_server_queued_requests": "requests waiting in the queue",
    "gpufleet_server_kv_cache_usage_ratio": "full-attention KV token usage, 0-1",
    "gpufleet_server_mamba_cache_usage_ratio": "Mamba slot usage, 0-1",
    "gpufleet_server_generation_tokens_per_second": "generation throughput (last reading)",
    "gpufleet_server_spec_accept_length": "speculative decoding accept length",
    "gpufleet_server_ready_timestamp_seconds": "time.time() when the server was first seen ready",
}


def _server_families(view: AgentView) -> Iterator[Metric]:
    state = GaugeMetricFamily(
        "gpufleet_server_state",
        "1 for the server's lifecycle state, 0 for the others",
        labels=(*GPU_LABELS, "state"),
    )
    info = InfoMetricFamily(
        "gpufleet_server_profile", "the tuning profile the server runs", labels=GPU_LABELS
    )
    families = _gauges(_SERVER_GAUGES, GPU_LABELS)
    for panel in view.snapshot.panels:
        server = panel.server
        if server is None:
            continue
        labels = [view.node, str(panel.local_index), str(server.port)]
        for each in ServerState:
            state.add_metric([*labels, each.value], 1.0 if server.state is each else 0.0)
        profile = view.profiles.get(panel.local_index)
        if profile:
            info.add_metric(labels, {"profile": profile})
        values: dict[str, float | int | None] = {
            "gpufleet_server_max_running_requests_requested": server.max_running_requested,
            "gpufleet_server_max_running_requests_effective": server.max_running_effective,
            "gpufleet_server_max_running_requests_capped": int(server.capped),
            "gpufleet_server_kv_cache_tokens": server.kv_tokens,
            "gpufleet_server_mamba_cache_slots": server.mamba_slots,
            "gpufleet_server_running_requests": server.running,
            "gpufleet_server_queued_requests": server.queued,
            "gpufleet_server_kv_cache_usage_ratio": server.token_usage,
            "gpufleet_server_mamba_cache_usage_ratio": server.mamba_usage,
            "gpufleet_server_generation_tokens_per_second": server.gen_throughput,
            "gpufleet_server_spec_accept_length": server.accept_len,
            "gpufleet_server_ready_timestamp_seconds": server.ready_at,
        }
        for name, value in values.items():
            if value is not None:
                families[name].add_metric(labels, float(value))
    yield state
    yield info
    yield from families.values()


def _job_families(view: AgentView) -> Iterator[Metric]:
    status = view.pipeline
    if status is None:
        return
    node = [view.node]
    prompts = GaugeMetricFamily(
        "gpufleet_job_prompts", "valid prompts in the job", labels=("node",)
    )
    prompts.add_metric(node, float(status.total))
    yield prompts
    done = CounterMetricFamily(
        "gpufleet_job_prompts_done", "prompts durably committed", labels=("node",)
    )
    done.add_metric(node, float(status.done))
    yield done
    failed = CounterMetricFamily(
        "gpufleet_job_prompts_failed", "prompts that used up their retries", labels=("node",)
    )
    failed.add_metric(node, float(status.failed))
    yield failed
    gauges = {
        "gpufleet_job_in_flight_requests": float(status.in_flight),
        "gpufleet_job_requests_per_second": status.rate_1m.requests_per_s,
        "gpufleet_job_output_tokens_per_second": status.rate_1m.output_tokens_per_s,
    }
    if status.eta_s is not None:
        gauges["gpufleet_job_eta_seconds"] = float(status.eta_s)
    for name, value in gauges.items():
        family = GaugeMetricFamily(name, name.replace("_", " "), labels=("node",))
        family.add_metric(node, value)
        yield family
    state = GaugeMetricFamily(
        "gpufleet_job_state", "1 for the job's state", labels=("node", "state")
    )
    for each in JOB_STATES:
        state.add_metric([view.node, each], 1.0 if status.state == each else 0.0)
    yield state


def _agent_families(view: AgentView) -> Iterator[Metric]:
    node = [view.node]
    age = GaugeMetricFamily(
        "gpufleet_agent_view_timestamp_seconds",
        "time.time() when the served view was built",
        labels=("node",),
    )
    age.add_metric(node, view.polled_at)
    yield age
    took = GaugeMetricFamily(
        "gpufleet_agent_poll_duration_seconds", "how long the last view took", labels=("node",)
    )
    took.add_metric(node, view.poll_seconds)
    yield took
    polls = CounterMetricFamily("gpufleet_agent_polls", "views built", labels=("node",))
    polls.add_metric(node, float(view.polls))
    yield polls
