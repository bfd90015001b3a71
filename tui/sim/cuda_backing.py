"""GPU backing for the simulator (``gpufleet sim --gpu-backing cuda``): real device memory.

With this flag the scheduler child really allocates the server's weights, Mamba, KV and CUDA-graph
memory on its GPU with PyTorch, so NVML and nvidia-smi see it, and a configuration that does not fit
fails with PyTorch's own ``torch.OutOfMemoryError`` text, which the server then reports the way
SGLang does (scheduler traceback, then the parent's SIGQUIT line).

The plan is made for the real card: its total and what other processes already hold are read with
NVML in the parent (the parent never initialises CUDA, so it holds no context of its own).
"""

from __future__ import annotations

from dataclasses import dataclass

CHUNK_BYTES = 1 << 30
"""Allocation granularity: 1 GiB tensors (plus one remainder), so growing and shrinking is cheap."""


class BackingUnavailable(RuntimeError):
    """--gpu-backing cuda cannot work here (no torch, no CUDA device)."""


@dataclass(frozen=True, slots=True)
class RealDevice:
    """What NVML says about the physical GPU before this server allocates anything."""

    total_bytes: int
    """Device memory."""
    used_bytes: int
    """Memory other processes (and the driver) already hold."""
    name: str
    """Device name."""


def probe_device(nvml_index: int) -> RealDevice:
    """Read the physical GPU with NVML (no CUDA context is created).

    Args:
        nvml_index: the GPU's NVML index (the number CUDA_VISIBLE_DEVICES names).

    Returns:
        Its total and used memory.

    Raises:
        BackingUnavailable: when NVML or the GPU cannot be read, or torch is missing.
    """
    try:
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            raise BackingUnavailable("PyTorch is not installed (pip install torch)")
        import pynvml

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
            if nvml_index >= count:
                raise BackingUnavailable(f"GPU {nvml_index} does not exist ({count} found by NVML)")
            handle = pynvml.nvmlDeviceGetHandleByIndex(nvml_index)
            info = pynvml.nvmlDeviceGetMemoryInfo(handle)
            name = pynvml.nvmlDeviceGetName(handle)
        finally:
            pynvml.nvmlShutdown()
    except BackingUnavailable:
        raise
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        raise BackingUnavailable(f"no NVIDIA GPU through NVML ({exc})") from exc
    return RealDevice(int(info.total), int(info.used), name if isinstance(name, str) else str(name))


class CudaPool:
    """The child's side: holds ``target`` bytes of device memory in 1 GiB tensors."""

    def __init__(self) -> None:
        """Initialise CUDA (the process's context is the one real SGLang would hold)."""
        import torch

        if not torch.cuda.is_available():
            raise BackingUnavailable("torch.cuda.is_available() is False")
        self._torch = torch
        torch.cuda.init()
        self._chunks: list[object] = []
        self.held = 0

    def resize(self, target: int) -> str | None:
        """Grow or shrink to ``target`` bytes of tensors.

        Returns:
            None on success, or PyTorch's out-of-memory message (the allocation already held
            is kept, as in a failed SGLang start until the process exits).
        """
        torch = self._torch
        target = max(target, 0)
        try:
            while self.held < target:
                size = min(CHUNK_BYTES, target - self.held)
                self._chunks.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
                self.held += size
        except torch.OutOfMemoryError as exc:
            return str(exc).splitlines()[0]
        while self.held > target and self._chunks:
            chunk = self._chunks.pop()
            self.held -= chunk.numel()  # type: ignore[attr-defined]
            del chunk
        if self.held < target:
            return self.resize(target)
        torch.cuda.empty_cache()
        return None
