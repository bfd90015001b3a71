"""Fleet-level control for one profile: launch every GPU, stop every GPU, status; in parallel.

Each GPU is independent: one failing preflight or dying at launch does not stop the others, and
each outcome says what happened on its GPU. The retune loop, ``gpufleet sim-fleet`` and the demo
drive fleets through these three functions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from tui.control.identity import IdentityMismatch, verify
from tui.control.launch import LaunchError, ManagedProcess, check_started, launch
from tui.control.preflight import (
    PreflightError,
    check_flags,
    check_gpu_free,
    check_port,
    check_stale,
)
from tui.control.records import ProcessRecord, read_records
from tui.control.release import GpuPids, wait_gpu_released
from tui.control.stop import StopResult, stop
from tui.profiles import Profile, argv_for, env_for, log_path_for

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class GpuOutcome:
    """Result of launching or stopping the server on one GPU."""

    gpu: int
    """GPU index."""
    ok: bool
    """True when the step succeeded on this GPU."""
    message: str
    """One line (or a few, with a log tail) for the operator."""
    process: ManagedProcess | None = None
    """The launched server (launch only)."""
    stopped: StopResult | None = None
    """What the stop did (stop only)."""


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """One recorded server as it is now."""

    record: ProcessRecord
    """The fleet record entry."""
    alive: bool
    """The recorded process runs and is ours."""
    note: str = ""
    """Why it is not alive (gone, pid reused)."""


def _parallel(gpus: Sequence[int], work: Callable[[int], T]) -> list[T]:
    if not gpus:
        return []
    with ThreadPoolExecutor(max_workers=len(gpus), thread_name_prefix="gpufleet-control") as pool:
        return list(pool.map(work, gpus))


def launch_gpu(
    profile: Profile,
    gpu: int,
    *,
    settle_s: float = 1.0,
    preflight: bool = True,
    gpu_pids: GpuPids | None = None,
) -> ManagedProcess:
    """Preflight, launch and check one GPU's server of ``profile``.

    Args:
        profile: the profile.
        gpu: one of its GPUs.
        settle_s: how long to watch for a death at once.
        preflight: check stale servers, the port and (with ``gpu_pids``) the GPU's memory first.
        gpu_pids: who holds memory on a GPU (NVML or simulated), for the preflight.

    Returns:
        The running server (recorded in the fleet record).

    Raises:
        PreflightError: something still holds the GPU or port.
        LaunchError: it could not start or died at once (exit code and log tail).
    """
    port = profile.port_for(gpu)
    if preflight:
        check_flags(profile, gpu)
        check_stale(gpu, port)
        check_port(port, profile.host, gpu)
        if gpu_pids is not None:
            check_gpu_free(gpu, gpu_pids)
    process = launch(
        argv_for(profile, gpu),
        env_for(profile, gpu),
        log_path_for(profile, gpu),
        gpu=gpu,
        port=port,
        profile=profile.name,
        host=profile.host,
    )
    if settle_s > 0:
        check_started(process, settle_s)
    return process


def launch_profile(
    profile: Profile,
    gpus: Iterable[int] | None = None,
    *,
    settle_s: float = 1.0,
    preflight: bool = True,
    gpu_pids: GpuPids | None = None,
) -> list[GpuOutcome]:
    """Launch ``profile`` on ``gpus`` (default: all of its GPUs), every GPU in parallel.

    Returns:
        One outcome per GPU, in GPU order; a failure on one GPU does not affect the others.
    """
    chosen = list(profile.gpus if gpus is None else gpus)

    def one(gpu: int) -> GpuOutcome:
        try:
            proc = launch_gpu(
                profile, gpu, settle_s=settle_s, preflight=preflight, gpu_pids=gpu_pids
            )
        except (PreflightError, LaunchError, KeyError) as exc:
            # KeyError's str() is the repr of its message; show the message itself.
            text = exc.args[0] if isinstance(exc, KeyError) else str(exc)
            return GpuOutcome(gpu, False, str(text))
        r = proc.record
        return GpuOutcome(gpu, True, f"GPU {gpu}: pid {r.pid} on port {r.port}", process=proc)

    return _parallel(chosen, one)


def stop_fleet(
    gpus: Iterable[int] | None = None,
    *,
    term_timeout: float = 30.0,
    kill_timeout: float = 10.0,
    gpu_pids: GpuPids | None = None,
    release_timeout: float = 60.0,
) -> list[GpuOutcome]:
    """Stop the recorded servers on ``gpus`` (default: every recorded one), in parallel.

    With ``gpu_pids`` each GPU's stop also waits until the driver shows its memory released.

    Returns:
        One outcome per GPU that had a recorded server.
    """
    records = read_records()
    chosen = sorted(records if gpus is None else set(gpus) & set(records))

    def one(gpu: int) -> GpuOutcome:
        record = records[gpu]
        try:
            result = stop(record, term_timeout=term_timeout, kill_timeout=kill_timeout)
        except IdentityMismatch as exc:
            return GpuOutcome(gpu, False, str(exc))
        if result.survivors:
            return GpuOutcome(gpu, False, result.describe(), stopped=result)
        message = result.describe()
        if gpu_pids is not None and result.pids:
            deadline = time.monotonic() + release_timeout
            holding = wait_gpu_released(gpu, result.pids, gpu_pids, deadline)
            if holding:
                return GpuOutcome(
                    gpu,
                    False,
                    f"{message}; GPU memory still held by {sorted(holding)} after "
                    f"{release_timeout:.0f}s",
                    stopped=result,
                )
            message += "; GPU memory released"
        return GpuOutcome(gpu, True, message, stopped=result)

    return _parallel(chosen, one)


def fleet_status(gpus: Iterable[int] | None = None) -> list[ServerStatus]:
    """Every recorded server (on ``gpus``, when given), checked for being alive and ours."""
    out = []
    for gpu, record in sorted(read_records().items()):
        if gpus is not None and gpu not in set(gpus):
            continue
        try:
            alive = verify(record).alive
            out.append(ServerStatus(record, alive, "" if alive else "exited"))
        except IdentityMismatch:
            out.append(ServerStatus(record, False, "exited (pid reused by another process)"))
    return out
