"""Choosing a GPU source: NVML when a driver answers, the simulated fleet otherwise, else none."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Literal

from tui import paths
from tui.gpu.nvml import NvmlSource, load_pynvml
from tui.gpu.simulated import SimulatedSource
from tui.gpu.snapshot import GpuSlowSnapshot, GpuSnapshot, GpuSource, GpuSourceKind

SourcePreference = Literal["auto", "nvml", "sim"]
PREFERENCES: tuple[str, ...] = ("auto", "nvml", "sim")
"""Allowed values of ``prefer``."""


class NoGpuSource:
    """The source used when nothing can be read; it carries the reason for the UI."""

    kind: GpuSourceKind = "none"

    def __init__(self, reason: str) -> None:
        """Args:
        reason: A plain sentence saying why there are no GPUs to show.
        """
        self.reason = reason

    def sample(self) -> tuple[GpuSnapshot, ...]:
        """No GPUs: always empty."""
        return ()

    def sample_slow(self) -> tuple[GpuSlowSnapshot, ...]:
        """No GPUs: always empty."""
        return ()

    def describe(self) -> str:
        """The reason there are no GPUs."""
        return self.reason

    def close(self) -> None:
        """Nothing to release."""


def _nvml_failure(error: BaseException) -> str:
    name = type(error).__name__
    if isinstance(error, ImportError):
        return "pynvml is not installed (pip install nvidia-ml-py)"
    if name == "NVMLError_LibraryNotFound":
        return "no NVIDIA driver (libnvidia-ml.so not found)"
    if name == "NVMLError_DriverNotLoaded":
        return "the NVIDIA driver is not loaded"
    if name == "NVMLError_NoPermission":
        return "no permission to open the NVIDIA driver"
    return f"NVML failed to start ({name}: {error})"


def _try_nvml(loader: Callable[[], ModuleType]) -> tuple[NvmlSource | None, str]:
    try:
        source = NvmlSource(loader())
    except Exception as error:  # every NVML start-up failure becomes a reason, not a crash
        return None, _nvml_failure(error)
    if source.device_count == 0:
        source.close()
        return None, "NVML found no GPUs"
    return source, ""


def open_gpu_source(
    prefer: str = "auto",
    sim_root: Path | None = None,
    loader: Callable[[], ModuleType] = load_pynvml,
) -> GpuSource:
    """Open the best GPU source available.

    Args:
        prefer: "auto" (NVML, else the simulated fleet), "nvml" or "sim" (only that one).
        sim_root: Where simulated GPUs publish (default ``tui.paths.sim_gpu_dir()``).
        loader: Imports pynvml; tests pass one returning a fake module.

    Returns:
        An NvmlSource, a SimulatedSource, or a NoGpuSource whose ``describe()`` says why.

    Raises:
        ValueError: ``prefer`` is not one of PREFERENCES.
    """
    if prefer not in PREFERENCES:
        raise ValueError(
            f"prefer={prefer!r} is not allowed; choose one of {', '.join(PREFERENCES)}"
        )
    root = sim_root if sim_root is not None else paths.sim_gpu_dir()
    reasons = []
    if prefer in ("auto", "nvml"):
        nvml, reason = _try_nvml(loader)
        if nvml is not None:
            return nvml
        reasons.append(reason)
    if prefer in ("auto", "sim"):
        sim = SimulatedSource(root)
        if sim.exists():
            return sim
        reasons.append(f"no simulated fleet under {root}")
    return NoGpuSource(" and ".join(reasons))


def sample_slow(source: GpuSource) -> tuple[GpuSlowSnapshot, ...]:
    """Read the slow counters of any source (empty when the source has none).

    Args:
        source: Any GPU source.

    Returns:
        The source's ``sample_slow()``, or () when it does not offer one.
    """
    method = getattr(source, "sample_slow", None)
    return tuple(method()) if callable(method) else ()
