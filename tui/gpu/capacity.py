"""A GPU's memory capacity from NVML, read once per process (a capacity never changes)."""

from __future__ import annotations

import functools

from tui.gpu.source import open_gpu_source


@functools.lru_cache(maxsize=64)
def gpu_capacity(index: int) -> int | None:
    """Total memory of GPU ``index`` in bytes, or None without a driver or such a GPU.

    Blocking (NVML is opened, sampled once and closed): the preflight calls it from a worker
    thread, and the cache makes every later call free.
    """
    source = open_gpu_source("nvml")  # a NoGpuSource (no GPUs) when there is no driver
    try:
        return next((s.memory_total for s in source.sample() if s.index == index), None)
    finally:
        source.close()
