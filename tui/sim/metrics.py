"""``/metrics``: the scheduler's state in Prometheus text with SGLang's metric names."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tui.sglang.models import GIB
from tui.sim.state import SimState

LABELS = ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank")


class _SchedulerCollector(Collector):
    """Reads the scheduler at scrape time (nothing to update between scrapes)."""

    def __init__(self, state: SimState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        s = self.state
        sch, plan = s.scheduler, s.plan
        values = [s.served_model_name, "unified", "0", "0", "0"]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(f"sglang:{name}", doc, labels=LABELS)
            family.add_metric(values, value)
            return family

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(f"sglang:{name}", doc, labels=LABELS)
            family.add_metric(values, value)
            return family

        used = sch.used_tokens()
        total = plan.max_total_num_tokens
        yield gauge("num_running_reqs", "The number of running requests.", len(sch.running))
        yield gauge(
            "num_queue_reqs", "The number of requests in the waiting queue.", len(sch.waiting)
        )
        yield gauge("num_grammar_queue_reqs", "Requests in the grammar queue.", 0)
        yield gauge(
            "gen_throughput", "The generation throughput (token/s).", sch.last_gen_throughput
        )
        yield gauge("cache_hit_rate", "The prefix cache hit rate.", 0.0)
        yield gauge("full_token_usage", "Full-attention KV usage.", sch.token_usage())
        yield gauge("mamba_usage", "Mamba state usage.", sch.mamba_usage())
        yield gauge(
            "token_usage", "Max of full/swa/mamba usage.", max(sch.token_usage(), sch.mamba_usage())
        )
        yield gauge("num_used_tokens", "Used KV tokens.", used)
        yield gauge("kv_used_tokens", "Used KV tokens.", used)
        yield gauge("kv_available_tokens", "Free KV tokens.", max(total - used, 0))
        yield gauge("mamba_used_tokens", "Mamba slots used.", sch.mamba_num())
        yield gauge(
            "mamba_available_tokens",
            "Mamba slots free.",
            max(plan.max_mamba_cache_size - sch.mamba_num(), 0),
        )
        if plan.speculative:
            yield gauge("spec_accept_length", "Speculative accept length.", sch.accept)
            rate = (sch.accept - 1) / max(plan.num_draft_tokens - 1, 1)
            yield gauge("spec_accept_rate", "Speculative accept rate.", rate)
        yield gauge("utilization", "Scheduler utilization.", sch.utilization() / 100.0)
        yield gauge("is_cuda_graph", "Whether the batch ran a CUDA graph.", 1.0)
        yield gauge("max_total_num_tokens", "KV pool tokens.", total)
        yield gauge("context_len", "Context length.", plan.context_len)
        yield gauge("page_size", "Page size.", plan.page_size)
        yield gauge(
            "max_running_requests", "Effective max running requests.", plan.max_running_requests
        )
        yield gauge(
            "weight_memory_usage_gb",
            "Weights (GB).",
            (plan.weight_bytes + plan.draft_weight_bytes) / GIB,
        )
        yield gauge("kv_cache_memory_usage_gb", "KV cache (GB).", plan.kv_bytes / GIB)
        yield gauge("graph_memory_usage_gb", "CUDA graphs (GB).", plan.graph_bytes / GIB)
        yield gauge(
            "startup_available_gpu_memory_gb",
            "Free after startup (GB).",
            plan.available_gpu_mem_bytes / GIB,
        )
        yield counter("prompt_tokens", "Prompt tokens processed.", sch.prompt_tokens_total)
        yield counter(
            "generation_tokens", "Generation tokens produced.", sch.generation_tokens_total
        )
        yield counter("cached_tokens", "Prefix-cache hit tokens.", 0)
        yield counter("num_requests", "Requests finished.", sch.requests_total)
        yield counter("num_aborted_requests", "Requests aborted.", s.counters.get("aborted", 0))


def build_registry(state: SimState) -> CollectorRegistry:
    """A registry exposing the server's metrics.

    Args:
        state: the server.

    Returns:
        The registry (render with ``render``).
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SchedulerCollector(state))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """Prometheus text exposition of the registry."""
    return generate_latest(registry)
