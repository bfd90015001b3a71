"""What the history keeps of a fleet snapshot and of the pipeline's status document (pure).

Per GPU the panel's numbers (utilisation, memory, tok/s, running, queued, each pool's use,
power, temperature, whether its server was ready, the latency percentiles, the draft's accept
length, tokens per joule) and for the fleet the job's rates and its latency, power and tokens
per joule: what a replay of the console at a past moment shows (``tui.history.replay``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.fleet.latency import LatencySummary
from tui.fleet.snapshot import FleetSnapshot, ServerState
from tui.history.store import Sample
from tui.pipeline.status import PipelineStatus


@dataclass(frozen=True, slots=True)
class Metric:
    """One series kind: its name in the store, its unit and its axis floor."""

    name: str
    """Name in the store and in ``HistoryStore.series``."""
    label: str
    """What it is, for a chart's title."""
    unit: str
    """Unit, for an axis."""
    floor: float
    """Smallest span of a chart's axis (an idle series draws a flat line, not noise)."""
    fleet: bool = False
    """A fleet series (``gpu=None``), else one per GPU."""


UTIL = Metric("util", "GPU utilisation", "%", 10.0)
"""NVML's GPU utilisation, percent."""
MEMORY = Metric("mem", "GPU memory used", "%", 10.0)
"""Memory used over the GPU's total, percent."""
TOK_S = Metric("tok_s", "generation", "tok/s", 50.0)
"""The server's generation throughput, tokens/s (its Decode lines)."""
RUNNING = Metric("running", "running requests", "req", 4.0)
"""Requests running on the server."""
QUEUED = Metric("queued", "queued requests", "req", 4.0)
"""Requests waiting in the server's queue."""
MEM_TOTAL = Metric("mem_total", "GPU memory", "B", float(1 << 30))
"""The GPU's memory in all, bytes (with ``mem``, the bytes in use)."""
KV = Metric("kv", "KV cache used", "%", 10.0)
"""The full-attention KV pool's use, percent."""
MAMBA = Metric("mamba", "Mamba cache used", "%", 10.0)
"""The Mamba state pool's use, percent."""
POWER = Metric("power", "GPU power", "W", 50.0)
"""Board power, watts."""
TEMP = Metric("temp", "GPU temperature", "°C", 10.0)
"""Core temperature."""
READY = Metric("ready", "server ready", "", 1.0)
"""1 while the server was ready, 0 otherwise (a bucket's mean: the share of it ready)."""
ACCEPT = Metric("accept", "accept length", "tok", 1.0)
"""The draft's accept length (only while the server runs one)."""
TOK_J = Metric("tok_j", "tokens per joule", "tok/J", 0.5)
"""Output tokens per joule over the energy window (``tui.fleet.energy``)."""
LATENCY_METRICS = {
    f"{part}_{q}": Metric(f"{part}_{q}", f"{label} {q}", "s", 0.01)
    for part, label in (("ttft", "TTFT"), ("itl", "inter-token"), ("e2e", "E2E"),
                        ("queue", "queue time"))
    for q in ("p50", "p90", "p99")
}  # fmt: skip
"""Each latency's percentiles over its window (``tui.fleet.latency``), seconds: per GPU, and
for the fleet (``gpu=None``)."""
FLEET_WATTS = Metric("watts", "fleet power", "W", 100.0, fleet=True)
"""Every metered GPU's mean power over the energy window."""
FLEET_TOK_J = Metric("tok_j", "fleet tokens per joule", "tok/J", 0.5, fleet=True)
"""The fleet's output tokens per joule over the energy window."""
OUT_TOK_S = Metric("out_tok_s", "output", "tok/s", 50.0, fleet=True)
"""The pipeline's output tokens/s over its last minute."""
REQ_S = Metric("req_s", "requests", "req/s", 1.0, fleet=True)
"""The pipeline's completed requests/s over its last minute."""

METRICS: dict[str, Metric] = {
    m.name: m
    for m in (UTIL, MEMORY, TOK_S, RUNNING, QUEUED, MEM_TOTAL, KV, MAMBA, POWER, TEMP, READY,
              ACCEPT, TOK_J, *LATENCY_METRICS.values(), OUT_TOK_S, REQ_S, FLEET_WATTS)
}  # fmt: skip
"""Every series kind the history keeps, by name (``tok_j`` and the latencies are kept per GPU
and for the fleet, ``watts`` for the fleet)."""


def _latency(t: float, gpu: int | None, latency: LatencySummary | None) -> list[Sample]:
    """The percentiles of a latency summary (those with an observation)."""
    if latency is None:
        return []
    out = []
    for part in ("ttft", "itl", "e2e", "queue"):
        found = getattr(latency, part)
        if found is None:
            continue
        for q in ("p50", "p90", "p99"):
            value = getattr(found, q)
            if value is not None:
                out.append(Sample(t, gpu, f"{part}_{q}", value))
    return out


def fleet_samples(snapshot: FleetSnapshot, slow: bool = True) -> list[Sample]:
    """The per-GPU readings of one fleet snapshot (what is unknown is left out, not zero).

    Args:
        snapshot: The monitor's snapshot.
        slow: Include the readings that move once a window reading, every 10 s or slower
            (the latency percentiles, tokens per joule, the fleet's power, the GPU's total
            memory, the draft's accept length):
            the recorder asks for them once a 5 s bucket, at its first snapshot (recorded every
            second they were half of the history's writes, each bucket's mean of one value).

    Returns:
        One sample per known value, at the snapshot's time.
    """
    t = snapshot.taken_at
    out: list[Sample] = []
    for panel in snapshot.panels:
        gpu, server, index = panel.gpu, panel.server, panel.gpu_index
        if gpu is not None:
            if gpu.utilization_gpu is not None:
                out.append(Sample(t, index, UTIL.name, float(gpu.utilization_gpu)))
            if gpu.memory_used is not None and gpu.memory_total:
                used = 100.0 * gpu.memory_used / gpu.memory_total
                out.append(Sample(t, index, MEMORY.name, used))
                if slow:
                    out.append(Sample(t, index, MEM_TOTAL.name, float(gpu.memory_total)))
            for metric, reading in ((POWER, gpu.power_w), (TEMP, gpu.temperature_c)):
                if reading is not None:
                    out.append(Sample(t, index, metric.name, float(reading)))
        energy = panel.energy
        if slow and energy is not None and energy.tokens_per_joule is not None:
            out.append(Sample(t, index, TOK_J.name, energy.tokens_per_joule))
        if server is not None:
            spec = server.spec
            for metric, value in (
                (TOK_S, server.gen_throughput),
                (RUNNING, server.running),
                (QUEUED, server.queued),
                (KV, None if server.token_usage is None else 100.0 * server.token_usage),
                (MAMBA, None if server.mamba_usage is None else 100.0 * server.mamba_usage),
                (READY, 1.0 if server.state is ServerState.READY else 0.0),
                (ACCEPT, spec.accept_length if spec is not None and slow else None),
            ):
                if value is not None:
                    out.append(Sample(t, index, metric.name, float(value)))
            if slow:
                out += _latency(t, index, server.latency)
    if not slow:
        return out
    out += _latency(t, None, snapshot.latency)
    fleet = snapshot.energy
    if fleet is not None:
        if fleet.watts is not None:
            out.append(Sample(t, None, FLEET_WATTS.name, fleet.watts))
        if fleet.tokens_per_joule is not None:
            out.append(Sample(t, None, FLEET_TOK_J.name, fleet.tokens_per_joule))
    return out


JOB_STALE_S = 15.0
"""A running pipeline's document not rewritten for this long (it rewrites it about once a
second) is a job that makes no progress: killed without a word, or hung."""


def job_idle(status: PipelineStatus | None, now: float) -> bool:
    """Whether the job makes no output now, as far as the console can tell.

    Args:
        status: The newest status document the console read (None: there is none).
        now: time.time() of the reading.

    Returns:
        True with no document, a pipeline that is not running (stopped, finished, failed), or a
        running one whose document is older than ``JOB_STALE_S``.
    """
    return status is None or status.state != "running" or now - status.updated_at > JOB_STALE_S


def idle_samples(t: float) -> list[Sample]:
    """The fleet's rates at zero: the console runs and the job makes no output (``job_idle``).

    Why: without them a stopped job was a gap in the chart, the same as a time no console
    watched; now a gap means only that (nothing recorded), and idle time is a line on 0.
    """
    return [Sample(t, None, OUT_TOK_S.name, 0.0), Sample(t, None, REQ_S.name, 0.0)]


def pipeline_samples(status: PipelineStatus, after: float | None = None) -> list[Sample]:
    """The fleet's rates from a status document, while the pipeline runs.

    A document that is not newer than ``after`` (the console re-reads an unchanged file every
    second), or of a pipeline that is not running (its rates are those of its last minute,
    no longer measured), gives nothing: the history shows a gap, never a stale rate.

    Args:
        status: The document.
        after: ``updated_at`` of the last document recorded.

    Returns:
        The output tok/s and req/s samples, at the document's time.
    """
    if status.state != "running" or (after is not None and status.updated_at <= after):
        return []
    t = status.updated_at
    return [
        Sample(t, None, OUT_TOK_S.name, status.rate_1m.output_tokens_per_s),
        Sample(t, None, REQ_S.name, status.rate_1m.requests_per_s),
    ]
