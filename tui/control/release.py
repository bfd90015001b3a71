"""Wait until a GPU's memory is really released by the old server's processes.

CUDA teardown can outlast the process exit as seen by ``wait()`` (sglang's own comment cites more
than 30 s on GB300), so a relaunch waits on what the driver reports, not on the pid.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path

from tui.gpu.sim_records import live_processes
from tui.paths import sim_gpu_dir

GpuPids = Callable[[int], Collection[int]]
"""Pids holding memory on a GPU index, as the driver (or the simulated driver) reports them."""

POLL_INTERVAL_S = 0.1
"""How often the GPU source is asked while waiting (cheap: a directory listing or one NVML call)."""


def sim_gpu_pids(root: Path | None = None) -> GpuPids:
    """A ``GpuPids`` over the simulated driver's records (``tui.gpu.sim_records``)."""

    def pids(gpu: int) -> set[int]:
        return {r.pid for r in live_processes(root or sim_gpu_dir(), gpu)}

    return pids


def nvml_gpu_pids() -> GpuPids:
    """A ``GpuPids`` over NVML's compute processes (requires an NVIDIA driver)."""
    import pynvml

    pynvml.nvmlInit()

    def pids(gpu: int) -> set[int]:
        handle = pynvml.nvmlDeviceGetHandleByIndex(gpu)
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        return {int(p.pid) for p in procs}

    return pids


def wait_gpu_released(
    gpu_index: int,
    pids: Collection[int],
    gpu_source: GpuPids,
    deadline: float,
    stop_event: threading.Event | None = None,
) -> set[int]:
    """Wait until none of ``pids`` holds memory on GPU ``gpu_index``.

    Args:
        gpu_index: the GPU.
        pids: the old server's processes (``StopResult.pids``).
        gpu_source: who holds memory on a GPU now.
        deadline: ``time.monotonic()`` value to give up at.
        stop_event: set it to abandon the wait early (e.g. the operator cancelled).

    Returns:
        The pids still holding memory: empty when released, non-empty on timeout.
    """
    wanted = set(pids)
    waiter = stop_event or threading.Event()
    while True:
        holding = wanted & set(gpu_source(gpu_index))
        remaining = deadline - time.monotonic()
        if not holding or remaining <= 0 or waiter.is_set():
            return holding
        # Event.wait is the deadline-bounded pause between polls (and wakes at once if set).
        waiter.wait(min(POLL_INTERVAL_S, remaining))
