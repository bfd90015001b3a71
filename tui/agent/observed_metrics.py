"""The agent's ``/metrics`` of what the peers show, as gpufleet's own series: each server's latency
percentiles with their counts, its pools and draft, each GPU's energy and tokens per joule, the
fleet's latency and energy, the GPU that stands out, the alerts firing, the job's energy.

Prometheus conventions as ``tui.agent.metrics`` (base units, ratios 0-1, ``_total`` for
counters); per-GPU series carry ``node``, ``gpu`` and ``port``, the fleet's and the job's
``node``. A latency whose window has not begun (one scrape: every observation since the server
started) has no ``gpufleet_server_latency_window_seconds``: Prometheus' own
``histogram_quantile`` over SGLang's histograms is the alternative.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tui.agent.metrics import GPU_LABELS, AgentView
from tui.fleet.latency import LatencySummary

KINDS = ("ttft", "itl", "e2e", "queue")
"""The latencies (``LatencySummary`` fields), the ``kind`` label."""
PERCENTILES = ("p50", "p90", "p99")
"""The ``percentile`` label's values (``Percentiles`` fields). Not ``quantile``: that label is a
Prometheus summary's, and these are gauges over a window (promtool's lint says so)."""


def _latency(
    latency: LatencySummary | None,
    labels: list[str],
    seconds: GaugeMetricFamily,
    counts: GaugeMetricFamily,
    window: GaugeMetricFamily,
) -> None:
    if latency is None:
        return
    if latency.window_s is not None:
        window.add_metric(labels, latency.window_s)
    for kind in KINDS:
        found = getattr(latency, kind)
        if found is None:
            continue
        if found.count is not None:
            counts.add_metric([*labels, kind], float(found.count))
        for field in PERCENTILES:
            value = getattr(found, field)
            if value is not None:
                seconds.add_metric([*labels, kind, field], value)


def _latency_families(
    prefix: str, what: str, labels: tuple[str, ...]
) -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
    return (
        GaugeMetricFamily(
            f"{prefix}_latency_seconds",
            f"{what}'s latency percentile over its window (kind: ttft, itl, e2e, queue)",
            labels=(*labels, "kind", "percentile"),
        ),
        GaugeMetricFamily(
            f"{prefix}_latency_observations",
            f"observations {what}'s percentiles come from (requests; tokens for itl)",
            labels=(*labels, "kind"),
        ),
        GaugeMetricFamily(
            f"{prefix}_latency_window_seconds",
            f"seconds {what}'s percentiles cover (absent: since the server started)",
            labels=labels,
        ),
    )


class ObservedCollector(Collector):
    """Renders this module's families from the newest ``AgentView`` on each scrape (beside
    ``tui.agent.metrics.AgentCollector``, in the same registry).

    Args:
        view: Returns the newest view.
    """

    def __init__(self, view: Callable[[], AgentView]) -> None:
        self._view = view

    def collect(self) -> Iterator[Metric]:
        """Every family, built from one view."""
        view = self._view()
        yield from _server_families(view)
        yield from _gpu_families(view)
        yield from _fleet_families(view)
        yield from _job_families(view)


def _server_families(view: AgentView) -> Iterator[Metric]:
    seconds, counts, window = _latency_families("gpufleet_server", "the server", GPU_LABELS)
    gauges = {
        name: GaugeMetricFamily(name, help_, labels=GPU_LABELS)
        for name, help_ in (
            ("gpufleet_server_swa_cache_usage_ratio", "sliding-window KV token usage, 0-1"),
            ("gpufleet_server_prefix_cache_hit_ratio", "the prefix cache hit rate, 0-1"),
            ("gpufleet_server_spec_accept_rate", "the draft's accept rate, 0-1"),
            ("gpufleet_server_spec_steps", "the draft's steps in use"),
        )
    }
    for panel in view.snapshot.panels:
        server = panel.server
        if server is None:
            continue
        labels = [view.node, str(panel.local_index), str(server.port)]
        _latency(server.latency, labels, seconds, counts, window)
        spec = server.spec
        for name, value in (
            ("gpufleet_server_swa_cache_usage_ratio", server.swa_usage),
            ("gpufleet_server_prefix_cache_hit_ratio", server.cache_hit_rate),
            ("gpufleet_server_spec_accept_rate", spec.accept_rate if spec else None),
            ("gpufleet_server_spec_steps", spec.steps if spec else None),
        ):
            if value is not None:
                gauges[name].add_metric(labels, float(value))
    yield from (seconds, counts, window, *gauges.values())


def _gpu_families(view: AgentView) -> Iterator[Metric]:
    joules = CounterMetricFamily(
        "gpufleet_gpu_energy_joules",
        "joules the GPU used since the agent began metering (driver counter, else power)",
        labels=GPU_LABELS,
    )
    watts = GaugeMetricFamily(
        "gpufleet_gpu_mean_power_watts", "mean power over the energy window", labels=GPU_LABELS
    )
    per_joule = GaugeMetricFamily(
        "gpufleet_gpu_tokens_per_joule",
        "output tokens per joule over the energy window",
        labels=GPU_LABELS,
    )
    for panel in view.snapshot.panels:
        energy = panel.energy
        if energy is None:
            continue
        port = str(panel.server.port) if panel.server is not None else ""
        labels = [view.node, str(panel.local_index), port]
        joules.add_metric(labels, energy.joules)
        if energy.watts is not None:
            watts.add_metric(labels, energy.watts)
        if energy.tokens_per_joule is not None:
            per_joule.add_metric(labels, energy.tokens_per_joule)
    yield from (joules, watts, per_joule)


def _fleet_families(view: AgentView) -> Iterator[Metric]:
    node = [view.node]
    snapshot = view.snapshot
    seconds, counts, window = _latency_families("gpufleet_fleet", "the fleet", ("node",))
    _latency(snapshot.latency, node, seconds, counts, window)
    yield from (seconds, counts, window)
    energy = snapshot.energy
    for name, help_, value in (
        ("gpufleet_fleet_power_watts", "every metered GPU's mean power over the window",
         energy.watts if energy else None),
        ("gpufleet_fleet_tokens_per_joule", "every GPU's output tokens over every GPU's joules",
         energy.tokens_per_joule if energy else None),
    ):  # fmt: skip
        family = GaugeMetricFamily(name, help_, labels=("node",))
        if value is not None:
            family.add_metric(node, value)
        yield family
    imbalance = GaugeMetricFamily(
        "gpufleet_imbalance_score",
        "how far the GPU's reading stands from the fleet median, in spreads (only those past 3.5)",
        labels=("node", "gpu", "reading"),
    )
    for outlier in snapshot.imbalance:
        imbalance.add_metric([view.node, str(outlier.gpu), outlier.reading], outlier.score)
    yield imbalance
    firing = GaugeMetricFamily(
        "gpufleet_alert_firing", "1 for each alert firing now", labels=("node", "rule", "subject")
    )
    for alert in view.alerts:
        firing.add_metric([view.node, alert.rule, alert.subject], 1.0)
    yield firing


def _job_families(view: AgentView) -> Iterator[Metric]:
    ledger = view.job_energy
    if ledger is None:
        return
    node = [view.node]
    for name, help_, value in (
        ("gpufleet_job_energy_joules", "joules the node's GPUs used while the job ran, every run",
         ledger.joules),
        ("gpufleet_job_output_tokens", "the job's output tokens, every run",
         float(ledger.output_tokens)),
        ("gpufleet_job_tokens_per_joule", "the job's output tokens per joule",
         ledger.tokens_per_joule),
    ):  # fmt: skip
        family = GaugeMetricFamily(name, help_, labels=("node",))
        if value is not None:
            family.add_metric(node, value)
        yield family
