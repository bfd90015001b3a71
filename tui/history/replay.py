"""The recorded history as a snapshot source: the fleet as the panels showed it at a past moment.

``HistorySource.snapshot_at(t)`` reads every series' bucket that holds ``t`` (``HistoryStore
.values_at``: 5 s buckets for the last 2 hours, 1 minute for 2 days, 15 minutes after) and builds
the same ``FleetSnapshot`` the monitor builds, so the console's screens can show it read-only
with a time cursor (``gpufleet replay``). What it holds is what was recorded
(``tui.history.samples``), each value the mean of its bucket (the slow ones, the latency
percentiles, tokens per joule, the accept length, as they were at the bucket's first snapshot:
they move once a window reading, every 10 s, and are recorded once a bucket): a reading that
was not recorded (the allocation lines, the log, a server's port) is None or empty, never
invented, and a moment with no console running shows no panels. A server's state is READY when
it was ready for most of the bucket, else STOPPED (what it was in between is not recorded).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tui.fleet.energy import FleetEnergy, GpuEnergy
from tui.fleet.latency import LatencySummary, Percentiles
from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerSnapshot, ServerState
from tui.fleet.speculative import SpecDecode
from tui.gpu.snapshot import GpuSnapshot
from tui.history.store import HistoryStore

Values = Mapping[tuple[int | None, str], float]


@dataclass(frozen=True, slots=True)
class Replayed:
    """The fleet at a past moment, as recorded."""

    snapshot: FleetSnapshot
    """The panels' values then (``taken_at``: the moment asked)."""
    bucket_start: float
    """time.time() of the recorded bucket's start."""
    bucket_s: int
    """The bucket's width: its values are the means over it."""


def _latency(values: Values, gpu: int | None) -> LatencySummary | None:
    parts = {}
    for part in ("ttft", "itl", "e2e", "queue"):
        p50, p90, p99 = (values.get((gpu, f"{part}_{q}")) for q in ("p50", "p90", "p99"))
        if p50 is not None or p90 is not None or p99 is not None:
            parts[part] = Percentiles(p50, p90, p99, count=None)  # the count is not recorded
    return LatencySummary(None, **parts) if parts else None


def _server(values: Values, gpu: int) -> ServerSnapshot | None:
    def get(name: str) -> float | None:
        return values.get((gpu, name))

    ready = get("ready")
    if ready is None:
        return None
    usage = {name: None if (v := get(name)) is None else v / 100.0 for name in ("kv", "mamba")}
    accept = get("accept")
    running, queued = get("running"), get("queued")
    return ServerSnapshot(
        port=0,
        state=ServerState.READY if ready >= 0.5 else ServerState.STOPPED,
        running=None if running is None else round(running),
        queued=None if queued is None else round(queued),
        token_usage=usage["kv"],
        mamba_usage=usage["mamba"],
        gen_throughput=get("tok_s"),
        accept_len=accept,
        spec=SpecDecode(None, accept, None, None, None) if accept is not None else None,
        latency=_latency(values, gpu),
    )


def _gpu(values: Values, gpu: int, t: float) -> GpuSnapshot | None:
    def get(name: str) -> float | None:
        return values.get((gpu, name))

    if all(get(name) is None for name in ("util", "mem", "power", "temp")):
        return None
    total = round(get("mem_total") or 0.0)
    used = round((get("mem") or 0.0) / 100.0 * total)
    return GpuSnapshot(
        index=gpu,
        name="",
        uuid="",
        memory_total=total,
        memory_used=used,
        memory_free=max(total - used, 0),
        utilization_gpu=get("util"),
        utilization_memory=None,
        temperature_c=get("temp"),
        power_w=get("power"),
        power_limit_w=None,
        sm_clock_mhz=None,
        mem_clock_mhz=None,
        taken_at=t,
    )


def replayed(values: Values, t: float) -> FleetSnapshot:
    """The snapshot the recorded ``values`` (one bucket's) describe, at ``t``."""
    gpus = sorted({gpu for gpu, _ in values if gpu is not None})
    panels = []
    for gpu in gpus:
        tok_j = values.get((gpu, "tok_j"))
        power = values.get((gpu, "power"))
        energy = (
            GpuEnergy(0.0, False, None, power, tok_j) if tok_j is not None else None
        )  # joules since a console began: not recorded
        panels.append(GpuPanel(gpu, _gpu(values, gpu, t), _server(values, gpu), energy=energy))
    watts, tok_j = values.get((None, "watts")), values.get((None, "tok_j"))
    return FleetSnapshot(
        panels=tuple(panels),
        gpu_source="recorded history",
        taken_at=t,
        latency=_latency(values, None),
        energy=FleetEnergy(0.0, None, watts, tok_j)
        if watts is not None or tok_j is not None
        else None,
    )


class HistorySource:
    """The fleet at past moments, from a history store.

    Args:
        store: The history (``tui.history.HistoryStore``; blocking: call from a thread).
    """

    def __init__(self, store: HistoryStore) -> None:
        self.store = store

    def snapshot_at(self, t: float) -> Replayed | None:
        """The fleet as recorded at ``t``; None when nothing was recorded then."""
        found = self.store.values_at(t)
        if found is None:
            return None
        start, width, values = found
        return Replayed(replayed(values, t), start, width)
