"""``/metrics``: the scheduler's state in Prometheus text, with SGLang 0.5.23's metric names only
(``--sim-build 0.5.17``: the names a real 0.5.17 exported, ``ABSENT_0517`` left out, its labels).

Names, help texts and labels are ``srt/observability/metrics_collector.py``'s (scheduler gauges
and constants, ``realtime_tokens_total`` by mode, the tokenizer-side counters that move when a
request finishes). There is no ``sglang:max_running_requests`` in SGLang: the effective value is
in ``/server_info`` and ``/v1/loads``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from tui.sglang.builds import SGLANG_0_5_17
from tui.sglang.models import GIB
from tui.sim import shapes
from tui.sim.latency import Recorded
from tui.sim.state import SimState

LABELS = ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank")
"""The scheduler collector's labels (single GPU: no dp_rank)."""

LABELS_0517 = ("engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank")
"""0.5.17's scheduler labels, in the order a real one printed them."""

TOKENIZER_LABELS_0517 = ("engine_type", "is_streaming", "model_name")
"""0.5.17's tokenizer-side counters' labels (``prompt_tokens_total`` and its kind)."""

ABSENT_0517 = frozenset({"num_retracted_requests", "cached_tokens", "num_aborted_requests"})
"""Counters the simulator exports for 0.5.23 that a real 0.5.17 did not."""


class _SchedulerCollector(Collector):
    """Reads the scheduler at scrape time (nothing to update between scrapes)."""

    def __init__(self, state: SimState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        s = self.state
        sch, plan = s.scheduler, s.plan
        v0517 = plan.build == SGLANG_0_5_17
        labels = LABELS_0517 if v0517 else LABELS
        values = (
            ["unified", s.served_model_name, "0", "0", "0"]
            if v0517
            else [s.served_model_name, "unified", "0", "0", "0"]
        )

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(f"sglang:{name}", doc, labels=labels)
            family.add_metric(values, value)
            return family

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            if v0517 and name in _TOKENIZER_COUNTERS:
                family = CounterMetricFamily(f"sglang:{name}", doc, labels=TOKENIZER_LABELS_0517)
                family.add_metric(["unified", "false", s.served_model_name], value)
                return family
            family = CounterMetricFamily(f"sglang:{name}", doc, labels=labels)
            family.add_metric(values, value)
            return family

        used = sch.used_tokens()
        total = plan.max_total_num_tokens
        yield gauge("num_running_reqs", "The number of running requests.", len(sch.running))
        yield gauge(
            "num_queue_reqs", "The number of requests in the waiting queue.", len(sch.waiting)
        )
        yield gauge(
            "num_grammar_queue_reqs", "The number of requests in the grammar waiting queue.", 0
        )
        yield gauge(
            "gen_throughput", "The generation throughput (token/s).", sch.last_gen_throughput
        )
        yield gauge("cache_hit_rate", "The prefix cache hit rate.", 0.0)
        yield gauge("decode_sum_seq_lens", "The sum of all sequence lengths in decode.", used)
        yield gauge("token_usage", "The token usage.", max(sch.token_usage(), sch.mamba_usage()))
        yield gauge(
            "full_token_usage", "The token usage for full attention layers.", sch.token_usage()
        )
        yield gauge(
            "swa_token_usage", "The token usage for SWA layers.", 0.0
        )  # no simulated model has sliding-window layers
        yield gauge("mamba_usage", "The token usage for Mamba layers.", sch.mamba_usage())
        yield gauge("num_used_tokens", "The number of used tokens.", used)
        yield gauge(
            "kv_available_tokens",
            "Number of free token slots in the KV cache pool.",
            max(total - used, 0),
        )
        yield gauge("kv_used_tokens", "Number of used token slots in the KV cache pool.", used)
        yield gauge(
            "mamba_available_tokens",
            "Number of free slots in the Mamba state pool.",
            max(plan.max_mamba_cache_size - sch.mamba_num(), 0),
        )
        yield gauge(
            "mamba_used_tokens", "Number of used slots in the Mamba state pool.", sch.mamba_num()
        )
        if plan.speculative or v0517:  # 0.5.17 exports them always (0.0 without a draft)
            yield gauge(
                "spec_accept_length",
                "The average acceptance length of speculative decoding.",
                sch.accept if plan.speculative else 0.0,
            )
            rate = (sch.accept - 1) / max(plan.num_draft_tokens - 1, 1)
            yield gauge(
                "spec_accept_rate", "The average acceptance rate of speculative decoding.", rate
            )
            # A chain draft (topk 1): one draft step per draft token but the first.
            drafts = plan.num_draft_tokens if plan.speculative else 0
            yield gauge("spec_num_steps", "The number of speculative steps.", max(drafts - 1, 0))
            yield gauge("spec_num_draft_tokens", "The number of draft tokens.", drafts)
        yield gauge("num_retracted_reqs", "The number of retracted requests.", sch.last_retracted)
        yield gauge("num_paused_reqs", "The number of paused requests by async weight sync.", 0)
        yield gauge("utilization", "The utilization.", sch.utilization() / 100.0)
        yield gauge(
            "is_cuda_graph",
            "Whether the batch is using CUDA graph.",
            1.0 if sch.graphs or not v0517 else 0.0,
        )
        yield gauge(
            "max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", total
        )
        yield gauge(
            "weight_memory_usage_gb",
            "Memory used by model weights in GB.",
            (plan.weight_bytes + plan.draft_weight_bytes) / GIB,
        )
        yield gauge(
            "kv_cache_memory_usage_gb",
            "Memory used by the KV cache pools in GB.",
            plan.kv_bytes / GIB,
        )
        graph = GaugeMetricFamily(
            "sglang:graph_memory_usage_gb",
            "Memory used by captured device graphs in GB.",
            labels=[*LABELS, "phase"],
        )
        for phase, used_gb in shapes.graph_memory(s).items():
            graph.add_metric([*values, phase], used_gb)
        yield graph
        yield gauge("page_size", "KV cache page size in tokens.", plan.page_size)
        yield gauge("num_pages", "Number of KV cache pages.", total // max(plan.page_size, 1))
        yield gauge("context_len", "Maximum context length.", plan.context_len)
        yield gauge(
            "startup_available_gpu_memory_gb",
            "Available GPU memory in GB at startup.",
            plan.available_gpu_mem_bytes / GIB,
        )
        realtime = CounterMetricFamily(
            "sglang:realtime_tokens",
            "Total number of tokens processed (updated on each log interval). "
            "mode: prefill_compute, prefill_cache, decode.",
            labels=[*LABELS, "mode"],
        )
        for mode in ("prefill_compute", "prefill_cache", "decode"):
            realtime.add_metric([*values, mode], sch.realtime_tokens.get(mode, 0.0))
        yield realtime
        if not v0517:
            yield counter(
                "num_retracted_requests",
                "Total number of retracted requests.",
                sch.retracted_total,
            )
        yield counter(
            "prompt_tokens", "Number of prefill tokens processed.", sch.prompt_tokens_total
        )
        yield counter(
            "generation_tokens",
            "Number of generation tokens processed.",
            sch.generation_tokens_total,
        )
        if not v0517:
            yield counter("cached_tokens", "Number of cached prompt tokens.", 0)
        yield counter("num_requests", "Number of requests processed.", sch.requests_total)
        if not v0517:
            yield counter(
                "num_aborted_requests",
                "Number of requests aborted.",
                s.counters.get("aborted", 0),
            )
        stream = (["unified", "false", s.served_model_name], TOKENIZER_LABELS_0517)
        tokenizer = (values[:2] if not v0517 else ["unified", s.served_model_name], labels[:2])
        latency = sch.latency
        for name, doc, recorded, (label_values, label_names) in (
            ("queue_time_seconds", "Histogram of queueing time in seconds.", latency.queue,
             (values, labels)),
            ("time_to_first_token_seconds", "Histogram of time to first token in seconds.",
             latency.ttft, stream),
            ("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
             latency.itl, tokenizer),
            ("e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
             latency.e2e, stream),
        ):  # fmt: skip
            yield _histogram(name, doc, recorded, label_values, label_names)


def _histogram(
    name: str, doc: str, recorded: Recorded, values: list[str], labels: tuple[str, ...]
) -> HistogramMetricFamily:
    """One latency histogram with SGLang's name and labels (``tui.sim.latency``)."""
    family = HistogramMetricFamily(f"sglang:{name}", doc, labels=labels)
    family.add_metric(values, recorded.buckets(), recorded.total)
    return family


class _HttpCollector(Collector):
    """The HTTP middleware's counters (``tui.sim.http_metrics``), read at scrape time."""

    def __init__(self, state: SimState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        yield from self.state.http.families()


_TOKENIZER_COUNTERS = frozenset({"prompt_tokens", "generation_tokens", "num_requests"})
"""Counters the tokenizer manager keeps (its own labels in 0.5.17)."""


def build_registry(state: SimState) -> CollectorRegistry:
    """A registry exposing the server's metrics.

    Args:
        state: the server.

    Returns:
        The registry (render with ``render``).
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SchedulerCollector(state))
    registry.register(_HttpCollector(state))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """Prometheus text exposition of the registry."""
    return generate_latest(registry)
