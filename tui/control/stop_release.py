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
from dataclasses import dataclass, replace
from typing import Literal

import psutil

from tui.control.adopt import ConfirmedServer, Holder, port_holder_adopting
from tui.control.drain_watch import DrainAccount, DrainProgress, DrainWatch, ProgressSink
from tui.control.identity import IdentityMismatch
from tui.control.release import GpuPids, wait_gpu_released
from tui.control.stop import StopMode, StopResult, stop, stop_unverified
from tui.state.cordon_acks import wait_acknowledged
from tui.state.cordons import address_of, cordon, uncordon
from tui.state.fleet_state import ProcessRecord, remove_record

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


DEFAULT_DRAIN_S = 60.0
"""A drain's deadline when neither the operator nor the profile (``[stop] drain_timeout_s``)
says another."""


@dataclass(frozen=True, slots=True)
class StopTimeouts:
    """The deadlines of one stop."""

    drain_s: float = DEFAULT_DRAIN_S
    """SIGTERM to the main pid -> the group is signalled (SGLang checks its drain every 5 s)."""
    kill_s: float = 10.0
    """SIGKILL -> giving up on survivors."""
    release_s: float = 120.0
    """Process gone -> GPU memory released (per the driver)."""
    drain_pinned: bool = False
    """``drain_s`` was given by the operator (``--drain-timeout``, the kill dialog): a
    profile's ``[stop] drain_timeout_s`` does not change it."""

    def pinned(self, drain_s: float | None) -> StopTimeouts:
        """These deadlines with the operator's drain deadline, when given (None: unchanged)."""
        if drain_s is None:
            return self
        return replace(self, drain_s=drain_s, drain_pinned=True)

    def for_profile(self, drain_s: float | None) -> StopTimeouts:
        """These deadlines with a profile's ``[stop] drain_timeout_s`` (None: it sets none),
        unless the operator pinned one."""
        if drain_s is None or self.drain_pinned:
            return self
        return replace(self, drain_s=drain_s)


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
    drain: DrainAccount | None = None
    """What the stop did to the requests the server had (None: nothing was signalled): a drain
    that timed out, those that arrived during it, those lost in flight."""

    @property
    def ok(self) -> bool:
        """The stop did everything it set out to do."""
        return self.status == "done"

    @property
    def drain_timed_out(self) -> bool:
        """A drain ran past its deadline and the server was signalled while it served."""
        return self.drain is not None and self.drain.timed_out

    @property
    def drain_note(self) -> str:
        """What the stop did to the requests, when that is news: ``drain timed out after 60 s:
        16 requests running, 864 arrived during the drain; stopped by SIGTERM to its process
        group: 16 in-flight requests lost``, or that it ended while a client was still sending
        ("" when it drained, or lost nothing)."""
        drain, result = self.drain, self.result
        if drain is None or result is None or not drain.at_risk:
            return ""
        if drain.still_sending and not drain.lost_some:
            return drain.still_sending_words()
        how = {
            "terminated": "stopped by SIGTERM to its process group",
            "killed": "killed with SIGKILL",
            "survived": "SIGKILL did not stop it",
        }.get(result.outcome, result.outcome)
        if result.note.startswith("not the fleet's own"):  # stop_unverified: its pid alone
            how = "SIGKILL to its pid" if result.outcome == "killed" else "SIGTERM to its pid"
        head = f"{drain.timeout_words()}; " if drain.timed_out else ""
        return f"{head}{how}: {drain.lost_words()}"

    @property
    def lost_in_flight(self) -> int | None:
        """Requests dropped in flight by the signals (0: none; None: some, how many unknown,
        or nothing was signalled)."""
        return self.drain.lost_in_flight if self.drain is not None else None

    @property
    def client_still_sending(self) -> bool:
        """The drain ended while a client was still sending: requests may have been lost."""
        return self.drain is not None and self.drain.still_sending

    @property
    def arrived_during_drain(self) -> int | None:
        """Requests that arrived after the SIGTERM (None: not counted, or nothing signalled)."""
        return self.drain.arrived if self.drain is not None else None


def _refused_unverified(gpu: int, port: int, held: Holder) -> str:
    return (
        f"GPU {gpu}: port {port} is held by {held.describe()}, which is not verified as the "
        f"fleet's ({held.why_not}); nothing was signalled"
    )


def _said(result: StopResult, watch: DrainWatch) -> tuple[str, DrainAccount | None]:
    """The stop's line with its drain's outcome in it, and that outcome (None: nothing was
    signalled)."""
    if result.outcome == "already_exited":
        return result.describe(), None
    mid_service = result.drain_timed_out or (
        result.mode != "drain" and result.outcome in ("terminated", "killed", "survived")
    )
    account = watch.account(result.outcome == "drained", mid_service)
    drain = account.timeout_words() if account.timed_out else ""
    if mid_service and account.lost_some:
        lost = account.lost_words()
    elif account.still_sending:
        lost = account.still_sending_words()
    elif account.arrived:
        lost = f"{account.arrived} requests arrived during the drain"
    else:
        lost = ""
    return result.describe(drain, lost), account


def _stop_confirmed(
    gpu: int,
    port: int,
    held: Holder,
    confirmed: ConfirmedServer | None,
    mode: StopMode,
    limits: StopTimeouts,
    gpu_pids: GpuPids,
    watch: DrainWatch,
    device: int,
) -> StopReleased:
    """Stop the unverified holder of ``port`` when the operator confirmed this very process
    (pid and start ticks); refuse otherwise. ``device``: the physical GPU whose memory its
    processes are waited out of."""
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
    watch.begin()
    if mode == "kill":
        watch.signalled()  # its pid's SIGKILL at once: what it has in flight is lost
    result = stop_unverified(
        proc,
        limits.drain_s,
        limits.kill_s,
        mode=mode,
        gpu=gpu,
        tick=watch.tick,
        on_deadline=lambda: watch.deadline(limits.drain_s),
    )
    text, drain = _said(result, watch)
    if result.survivors:
        return StopReleased(gpu, "failed", text, result, drain=drain)
    holding = wait_gpu_released(device, result.pids, gpu_pids, time.monotonic() + limits.release_s)
    if holding:
        return StopReleased(
            gpu,
            "failed",
            f"{text}; GPU memory still held by {sorted(holding)}",
            result,
            tuple(sorted(holding)),
            drain=drain,
        )
    return StopReleased(gpu, "done", text, result, drain=drain)


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
    device: int | None = None,
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
        device: The physical GPU the slot runs on (None: the record's, else ``gpu``): the
            release wait is for the stopped server's own pids on that device (a neighbour of
            the fleet's sharing it keeps its memory).

    Returns:
        What happened: done only when nothing of the server runs, its memory is released and
        nothing holds its port; refused when what runs is not verified as the fleet's (nothing
        was signalled, the message says what did not match); failed otherwise.
    """
    limits = timeouts or StopTimeouts()
    started = time.monotonic()
    if device is None:
        device = record.device_index if record is not None else gpu
    port = record.port if record is not None else port
    host = record.host if record is not None else host
    if port is None:
        return StopReleased(gpu, "done", f"GPU {gpu}: no server recorded")
    address = address_of(host, port)
    cordon([address], f"stopping GPU {gpu} ({mode})")
    watch = DrainWatch(gpu, host, port, on_progress, started)
    try:
        if record is None:
            held = _holder(gpu, port, host)
            if held is None:
                return StopReleased(
                    gpu, "done", f"GPU {gpu}: no server recorded; port {port} is free"
                )
            if held.adopted is None:
                _senders_stopped(gpu, address, mode, on_progress, started)
                return _stop_confirmed(
                    gpu, port, held, confirmed, mode, limits, gpu_pids, watch, device
                )
            record = held.adopted  # the fleet's own, without a record: stopped like any other
        _senders_stopped(gpu, address, mode, on_progress, started)
        watch.begin()
        if mode != "drain":
            watch.signalled()  # the group at once: what it has in flight is lost
        try:
            result = stop(
                record,
                limits.drain_s,
                limits.kill_s,
                mode=mode,
                tick=watch.tick,
                on_deadline=lambda: watch.deadline(limits.drain_s),
            )
        except IdentityMismatch as exc:
            return _refused(record, exc)
        text, drain = _said(result, watch)
        if result.survivors:
            return StopReleased(gpu, "failed", text, result, drain=drain)
        if on_progress is not None:
            on_progress(
                DrainProgress(gpu, "waiting for GPU memory release", time.monotonic() - started)
            )
        deadline = time.monotonic() + limits.release_s
        holding = wait_gpu_released(device, result.pids, gpu_pids, deadline, cancel)
        if holding:
            return StopReleased(
                gpu,
                "failed",
                f"{text}; GPU memory still held by {sorted(holding)} after {limits.release_s:.0f}s",
                result,
                tuple(sorted(holding)),
                drain=drain,
            )
        return _port_after(
            gpu, port, host, (text, result, drain), confirmed, mode, limits, gpu_pids, watch, device
        )
    finally:
        watch.close()
        if not keep_cordon:
            uncordon([address])


def _senders_stopped(
    gpu: int, address: str, mode: StopMode, sink: ProgressSink | None, started: float
) -> None:
    """Before a drain's SIGTERM: wait (``ACK_WAIT_S`` at most) until every job that honours
    cordons and sends to ``address`` says it sends nothing new there; its progress says who
    did (and who did not). A drain that begins while a job still sends never ends."""
    if mode != "drain":
        return  # the group is signalled at once: what is in flight is lost either way
    wait = wait_acknowledged(address)  # at once when no such job sends to it
    if sink is not None and (wait.acknowledged or wait.silent):
        sink(DrainProgress(gpu, "cordoned", time.monotonic() - started, note=wait.describe()))


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
    stopped: tuple[str, StopResult, DrainAccount | None],
    confirmed: ConfirmedServer | None,
    mode: StopMode,
    limits: StopTimeouts,
    gpu_pids: GpuPids,
    watch: DrainWatch,
    device: int,
) -> StopReleased:
    """The stop's last check: its port is free (else something still serves the GPU's address:
    the stop is not done). ``stopped``: the stop's line, its result and its drain's outcome."""
    text, result, drain = stopped
    done = f"{text}; GPU memory released"
    held = _holder(gpu, port, host)
    if held is None:
        return StopReleased(gpu, "done", done, result, drain=drain)
    if held.adopted is not None:
        return StopReleased(
            gpu,
            "failed",
            f"{done}; but port {port} is still held by {held.describe()}, a server of this "
            "fleet that had no record: adopted as the GPU's server, stop it again",
            result,
            adopted_pid=held.adopted.pid,
            drain=drain,
        )
    other = _stop_confirmed(gpu, port, held, confirmed, mode, limits, gpu_pids, watch, device)
    return StopReleased(gpu, other.status, f"{done}; then {other.message}", result, drain=drain)
