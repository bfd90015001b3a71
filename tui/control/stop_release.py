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
from typing import Literal

import httpx
import psutil

from tui.control.adopt import ConfirmedServer, Holder, port_holder_adopting
from tui.control.identity import IdentityMismatch
from tui.control.release import GpuPids, wait_gpu_released
from tui.control.stop import StopMode, StopResult, stop, stop_unverified
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


GpuStatus = Literal["done", "refused", "failed"]
"""What an operation did on one GPU: done (what it set out to do, verified), refused (it would
not act: what runs there is not verified as the fleet's; nothing was signalled), failed (it
acted and did not get there: survivors, memory still held, a launch that did not come up)."""


@dataclass(frozen=True, slots=True)
class StopReleased:
    """What stopping one GPU's server did."""

    gpu: int
    """GPU index."""
    status: GpuStatus
    """done: nothing of the server runs, its GPU memory is released and its port is free;
    refused (nothing was signalled, the message says what did not match); failed."""
    message: str
    """One line for the operator."""
    result: StopResult | None = None
    """The process-level stop (None when nothing was recorded or the identity did not match)."""
    holding: tuple[int, ...] = ()
    """Pids still holding GPU memory at the deadline."""
    adopted_pid: int | None = None
    """A server of the fleet found holding the GPU's port without a record, now recorded as
    its server (its pid)."""

    @property
    def ok(self) -> bool:
        """The stop did everything it set out to do."""
        return self.status == "done"


ProgressSink = Callable[[DrainProgress], None]
"""Receives a stop's progress, from the stopping thread."""


def _metrics_url(host: str, port: int) -> str:
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://{host}:{port}/metrics"


class _DrainWatch:
    """Reads running/queued from the server's /metrics at most once a second while it drains."""

    def __init__(
        self, gpu: int, host: str, port: int, sink: ProgressSink | None, started: float
    ) -> None:
        self.gpu, self.url, self.sink, self.started = gpu, _metrics_url(host, port), sink, started
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
            load = parse_metrics(self._client.get(self.url).text)
            running, queued = load.running, load.queued
        except (httpx.HTTPError, ValueError):
            pass  # a server on its way out stops answering; the process table is the truth
        self.sink(DrainProgress(self.gpu, "draining", now - self.started, running, queued))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def _refused_unverified(gpu: int, port: int, held: Holder) -> str:
    return (
        f"GPU {gpu}: port {port} is held by {held.describe()}, which is not verified as the "
        f"fleet's ({held.why_not}); nothing was signalled"
    )


def _stop_confirmed(
    gpu: int,
    port: int,
    held: Holder,
    confirmed: ConfirmedServer | None,
    mode: StopMode,
    limits: StopTimeouts,
    gpu_pids: GpuPids,
    tick: Callable[[], None],
) -> StopReleased:
    """Stop the unverified holder of ``port`` when the operator confirmed this very process
    (pid and start ticks); refuse otherwise."""
    pid = held.holder.pid
    if confirmed is None or pid is None or confirmed.pid != pid:
        return StopReleased(gpu, "refused", _refused_unverified(gpu, port, held))
    if not confirmed.still_it():
        return StopReleased(
            gpu,
            "refused",
            f"GPU {gpu}: pid {pid} is not the process that was confirmed (its start time "
            "differs, or it exited); nothing was signalled",
        )
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return StopReleased(gpu, "done", f"GPU {gpu}: pid {pid} exited before it was signalled")
    result = stop_unverified(proc, limits.drain_s, limits.kill_s, mode=mode, gpu=gpu, tick=tick)
    if result.survivors:
        return StopReleased(gpu, "failed", result.describe(), result)
    holding = wait_gpu_released(gpu, result.pids, gpu_pids, time.monotonic() + limits.release_s)
    if holding:
        return StopReleased(
            gpu,
            "failed",
            f"{result.describe()}; GPU memory still held by {sorted(holding)}",
            result,
            tuple(sorted(holding)),
        )
    return StopReleased(gpu, "done", result.describe(), result)


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
    port: int | None = None,
    host: str = "127.0.0.1",
    confirmed: ConfirmedServer | None = None,
) -> StopReleased:
    """Stop the server of ``record`` and wait until its GPU memory is released and its port is
    free. Blocking.

    Args:
        gpu: The GPU.
        record: Its recorded server (None: nothing recorded; the GPU's port is still checked).
        gpu_pids: Who holds memory on a GPU now (NVML or the simulated driver).
        mode: "drain" (default), "terminate" or "kill" (``tui.control.stop.StopMode``).
        timeouts: The stop's deadlines.
        keep_cordon: Leave the address cordoned (the caller relaunches and lifts it).
        on_progress: Receives the drain's progress about once a second (from this thread).
        cancel: Set to abandon the release wait early.
        port: The GPU's port when nothing is recorded (the fleet state's).
        host: Its address.
        confirmed: A process holding the GPU's port that the operator confirmed stopping
            although it is not verified as the fleet's (its pid alone is signalled).

    Returns:
        What happened: done only when nothing of the server runs, its memory is released and
        nothing holds its port; refused when what runs is not verified as the fleet's (nothing
        was signalled, the message says what did not match); failed otherwise.
    """
    limits = timeouts or StopTimeouts()
    started = time.monotonic()
    port = record.port if record is not None else port
    host = record.host if record is not None else host
    if port is None:
        return StopReleased(gpu, "done", f"GPU {gpu}: no server recorded")
    address = address_of(host, port)
    cordon([address], f"stopping GPU {gpu} ({mode})")
    watch = _DrainWatch(gpu, host, port, on_progress, started)
    try:
        if record is None:
            held = _holder(gpu, port, host)
            if held is None:
                return StopReleased(
                    gpu, "done", f"GPU {gpu}: no server recorded; port {port} is free"
                )
            if held.adopted is None:
                return _stop_confirmed(
                    gpu, port, held, confirmed, mode, limits, gpu_pids, watch.tick
                )
            record = held.adopted  # the fleet's own, without a record: stopped like any other
        try:
            result = stop(record, limits.drain_s, limits.kill_s, mode=mode, tick=watch.tick)
        except IdentityMismatch as exc:
            return _refused(record, exc)
        if result.survivors:
            return StopReleased(gpu, "failed", result.describe(), result)
        if on_progress is not None:
            on_progress(
                DrainProgress(gpu, "waiting for GPU memory release", time.monotonic() - started)
            )
        deadline = time.monotonic() + limits.release_s
        holding = wait_gpu_released(gpu, result.pids, gpu_pids, deadline, cancel)
        if holding:
            return StopReleased(
                gpu,
                "failed",
                f"{result.describe()}; GPU memory still held by {sorted(holding)} after "
                f"{limits.release_s:.0f}s",
                result,
                tuple(sorted(holding)),
            )
        return _port_after(gpu, port, host, result, confirmed, mode, limits, gpu_pids, watch.tick)
    finally:
        watch.close()
        if not keep_cordon:
            uncordon([address])


def _holder(gpu: int, port: int, host: str) -> Holder | None:
    """``port_holder_adopting``, or None where the address cannot be bound to test (not an
    address of this host): the port is then not checked, as before there was a check."""
    try:
        return port_holder_adopting(gpu, port, host)
    except OSError:
        return None


def _refused(record: ProcessRecord, exc: IdentityMismatch) -> StopReleased:
    """A recorded pid that is not verified as the fleet's server: nothing is signalled. When
    the recorded process certainly no longer runs, its record (which describes nothing alive)
    is dropped, so that the next operation is not refused again for it."""
    text = f"{exc}; nothing was signalled"
    if exc.gone:
        remove_record(record.gpu, record.pid)
        text += "; the record is dropped (the process it names no longer runs)"
    return StopReleased(record.gpu, "refused", text)


def _port_after(
    gpu: int,
    port: int,
    host: str,
    result: StopResult,
    confirmed: ConfirmedServer | None,
    mode: StopMode,
    limits: StopTimeouts,
    gpu_pids: GpuPids,
    tick: Callable[[], None],
) -> StopReleased:
    """The stop's last check: its port is free (else something still serves the GPU's address:
    the stop is not done)."""
    done = f"{result.describe()}; GPU memory released"
    held = _holder(gpu, port, host)
    if held is None:
        return StopReleased(gpu, "done", done, result)
    if held.adopted is not None:
        return StopReleased(
            gpu,
            "failed",
            f"{done}; but port {port} is still held by {held.describe()}, a server of this "
            "fleet that had no record: adopted as the GPU's server, stop it again",
            result,
            adopted_pid=held.adopted.pid,
        )
    other = _stop_confirmed(gpu, port, held, confirmed, mode, limits, gpu_pids, tick)
    return StopReleased(gpu, other.status, f"{done}; then {other.message}", result)
