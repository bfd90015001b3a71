"""The one way a GPU's server is stopped: cordon, drain, escalate, wait for the GPU's memory.

Every operation that takes a server down (kill, relaunch, apply, canary, rollout, rollback,
stopping the fleet, ``gpufleet sim-fleet stop``) goes through ``stop_and_release``:

1. **cordon** its address (``tui.state.cordons``), so the pipeline sends it nothing new: a
   SGLang 0.5.23 drain never ends while a client keeps sending;
2. **stop** it (``tui.control.stop``): SIGTERM to the main pid, the drain watched through
   ``/metrics`` (running and queued requests) with a deadline, then the group SIGTERM, then
   SIGKILL; never a signal to a process whose identity was not verified;
3. **wait for the GPU's memory** to be released by every pid the server had (the driver's
   view, NVML or the simulated one): CUDA teardown can outlast the exit of the process;
4. lift the cordon, unless the caller relaunches on the same address and lifts it itself once
   the new server is ready.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from tui.control.identity import IdentityMismatch, PidReused
from tui.control.release import GpuPids, wait_gpu_released
from tui.control.stop import StopMode, StopResult, stop
from tui.servers.probe import parse_metrics
from tui.state.cordons import address_of, cordon, uncordon
from tui.state.fleet_state import ProcessRecord, remove_record

DRAIN_POLL_S = 1.0
"""How often a drain's progress is read from the server's ``/metrics``."""

_STOPPERS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="gpufleet-stop")
"""Threads for stops only (made as needed, reused). Why not asyncio's default pool: a stop
blocks for its whole drain, and that pool has ``cpu_count + 4`` threads (6 on two cores), so the
seventh GPU of a fleet's stop waited for another GPU's stop to end (~1 s of a retune)."""


async def in_stop_thread(call: Callable[[], StopReleased]) -> StopReleased:
    """Run a blocking stop (``stop_and_release``) in a thread of the stops' own pool.

    Args:
        call: The stop, with its arguments bound.

    Returns:
        What it returned.
    """
    return await asyncio.get_running_loop().run_in_executor(_STOPPERS, call)


@dataclass(frozen=True, slots=True)
class StopTimeouts:
    """The deadlines of one stop."""

    drain_s: float = 60.0
    """SIGTERM to the main pid -> the group is signalled (SGLang checks its drain every 5 s)."""
    kill_s: float = 10.0
    """SIGKILL -> giving up on survivors."""
    release_s: float = 120.0
    """Process gone -> GPU memory released (per the driver)."""


@dataclass(frozen=True, slots=True)
class DrainProgress:
    """How a stop is going, reported about once a second while it waits."""

    gpu: int
    """GPU index."""
    stage: str
    """'draining', 'waiting for GPU memory release'."""
    elapsed_s: float
    """Seconds since the stop began."""
    running: int | None = None
    """Requests the server still runs (from its /metrics; None when it did not answer)."""
    queued: int | None = None
    """Requests still queued."""


@dataclass(frozen=True, slots=True)
class StopReleased:
    """What stopping one GPU's server did."""

    gpu: int
    """GPU index."""
    ok: bool
    """Nothing of the server runs and its GPU memory is released."""
    message: str
    """One line for the operator."""
    result: StopResult | None = None
    """The process-level stop (None when nothing was recorded or the identity did not match)."""
    holding: tuple[int, ...] = ()
    """Pids still holding GPU memory at the deadline."""


ProgressSink = Callable[[DrainProgress], None]
"""Receives a stop's progress, from the stopping thread."""


def _metrics_url(record: ProcessRecord) -> str:
    host = "127.0.0.1" if record.host in ("0.0.0.0", "::", "") else record.host
    return f"http://{host}:{record.port}/metrics"


class _DrainWatch:
    """Reads running/queued from the server's /metrics at most once a second while it drains."""

    def __init__(self, record: ProcessRecord, sink: ProgressSink | None, started: float) -> None:
        self.record, self.sink, self.started = record, sink, started
        self._next = 0.0
        self._client: httpx.Client | None = None

    def tick(self) -> None:
        now = time.monotonic()
        if self.sink is None or now < self._next:
            return
        self._next = now + DRAIN_POLL_S
        running = queued = None
        try:
            if self._client is None:
                # Plain http to the server itself: no TLS, so no CA bundle (loading it took
                # ~0.2 s of CPU per client, seven at once under the GIL at a fleet's stop,
                # delaying each drain's signal and exit check by up to a second).
                # "Connection: close": a connection kept to a server in shutdown holds it up
                # (uvicorn waits for every connection it accepted to close; one accepted as its
                # shutdown began is never told to, and a read a second keeps it busy).
                self._client = httpx.Client(
                    timeout=0.5, verify=False, headers={"Connection": "close"}
                )
            load = parse_metrics(self._client.get(_metrics_url(self.record)).text)
            running, queued = load.running, load.queued
        except (httpx.HTTPError, ValueError):
            pass  # a server on its way out stops answering; the process table is the truth
        self.sink(DrainProgress(self.record.gpu, "draining", now - self.started, running, queued))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def stop_and_release(
    gpu: int,
    record: ProcessRecord | None,
    gpu_pids: GpuPids,
    *,
    mode: StopMode = "drain",
    timeouts: StopTimeouts | None = None,
    keep_cordon: bool = False,
    on_progress: ProgressSink | None = None,
    cancel: threading.Event | None = None,
) -> StopReleased:
    """Stop the server of ``record`` and wait until its GPU memory is released. Blocking.

    Args:
        gpu: The GPU.
        record: Its recorded server (None: nothing recorded, nothing to stop).
        gpu_pids: Who holds memory on a GPU now (NVML or the simulated driver).
        mode: "drain" (default), "terminate" or "kill" (``tui.control.stop.StopMode``).
        timeouts: The stop's deadlines.
        keep_cordon: Leave the address cordoned (the caller relaunches and lifts it).
        on_progress: Receives the drain's progress about once a second (from this thread).
        cancel: Set to abandon the release wait early.

    Returns:
        What happened; ``ok`` only when nothing of the server runs and its memory is released.
    """
    if record is None:
        return StopReleased(gpu, True, f"GPU {gpu}: no server recorded")
    limits = timeouts or StopTimeouts()
    started = time.monotonic()
    address = address_of(record.host, record.port)
    cordon([address], f"stopping GPU {record.gpu} ({mode})")
    watch = _DrainWatch(record, on_progress, started)
    try:
        try:
            result = stop(record, limits.drain_s, limits.kill_s, mode=mode, tick=watch.tick)
        except PidReused as exc:
            # The pid was reused: ours is gone (a pid is not reused while its process lives), and
            # the stranger is never signalled.
            remove_record(record.gpu, record.pid)
            return StopReleased(record.gpu, True, f"{exc}; nothing was signalled")
        except IdentityMismatch as exc:
            # Same start time, another command line: whose process it is cannot be told, so
            # nothing is signalled and the record is kept for the operator to look at.
            return StopReleased(record.gpu, False, f"{exc}; nothing was signalled")
        finally:
            watch.close()
        if result.survivors:
            return StopReleased(record.gpu, False, result.describe(), result)
        if on_progress is not None:
            on_progress(
                DrainProgress(
                    record.gpu, "waiting for GPU memory release", time.monotonic() - started
                )
            )
        deadline = time.monotonic() + limits.release_s
        holding = wait_gpu_released(record.gpu, result.pids, gpu_pids, deadline, cancel)
        if holding:
            return StopReleased(
                record.gpu,
                False,
                f"{result.describe()}; GPU memory still held by {sorted(holding)} after "
                f"{limits.release_s:.0f}s",
                result,
                tuple(sorted(holding)),
            )
        return StopReleased(record.gpu, True, result.describe() + "; GPU memory released", result)
    finally:
        if not keep_cordon:
            uncordon([address])
