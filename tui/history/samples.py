"""What the history keeps of a fleet snapshot and of the pipeline's status document (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from tui.fleet.snapshot import FleetSnapshot
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
OUT_TOK_S = Metric("out_tok_s", "output", "tok/s", 50.0, fleet=True)
"""The pipeline's output tokens/s over its last minute."""
REQ_S = Metric("req_s", "requests", "req/s", 1.0, fleet=True)
"""The pipeline's completed requests/s over its last minute."""

METRICS: dict[str, Metric] = {
    m.name: m for m in (UTIL, MEMORY, TOK_S, RUNNING, QUEUED, OUT_TOK_S, REQ_S)
}
"""Every series kind the history keeps, by name."""


def fleet_samples(snapshot: FleetSnapshot) -> list[Sample]:
    """The per-GPU readings of one fleet snapshot (what is unknown is left out, not zero).

    Args:
        snapshot: The monitor's snapshot.

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
        if server is not None:
            for metric, value in (
                (TOK_S, server.gen_throughput),
                (RUNNING, server.running),
                (QUEUED, server.queued),
            ):
                if value is not None:
                    out.append(Sample(t, index, metric.name, float(value)))
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
