"""Shared helpers for the GPU tests: a fake pynvml module with a scriptable driver."""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

NOT_SUPPORTED = "NotSupported"


@dataclass
class FakeDevice:
    """One fake GPU; a field set to NOT_SUPPORTED makes its query raise NVMLError_NotSupported."""

    name: str = "NVIDIA H200"
    uuid: str = "GPU-fake-0"
    total: int = 143771 * 1024**2
    used: int = 10 * 1024**3
    gpu_util: Any = 37
    mem_util: int = 12
    temp: Any = 41
    power_mw: Any = 123_456
    limit_mw: Any = 700_000
    sm_clock: Any = 1980
    mem_clock: Any = 2619
    fan: Any = NOT_SUPPORTED
    pcie: Any = NOT_SUPPORTED
    energy: Any = NOT_SUPPORTED
    processes: list[tuple[int, int | None]] = field(default_factory=list)


class FakePynvml(types.ModuleType):
    """A module with pynvml's names (the code under test imports it as one); the constants and
    the fake's own records are typed here, its functions are set by ``make_fake_pynvml``."""

    NVMLError: type[Exception]
    NVML_TEMPERATURE_GPU: int
    NVML_CLOCK_SM: int
    NVML_CLOCK_MEM: int
    NVML_PCIE_UTIL_TX_BYTES: int
    NVML_PCIE_UTIL_RX_BYTES: int
    nvmlMemory_v2: int
    nvmlInit: Callable[[], None]
    calls: dict[str, int]
    """How many times each function was called, by name."""
    initialised: bool
    """nvmlInit ran and nvmlShutdown did not since."""


def make_fake_pynvml(devices: list[FakeDevice], v2_memory: bool = True) -> FakePynvml:
    """Build a module object with pynvml's names, backed by ``devices``.

    ``calls`` on the module counts each function's calls, so tests can see what was queried.
    """
    lib = FakePynvml("fake_pynvml")

    class NVMLError(Exception):
        pass

    errors = {}
    for name in (
        "NotSupported",
        "NoPermission",
        "Unknown",
        "FunctionNotFound",
        "LibraryNotFound",
        "GpuIsLost",
    ):
        errors[name] = type(f"NVMLError_{name}", (NVMLError,), {})
        setattr(lib, f"NVMLError_{name}", errors[name])
    lib.NVMLError = NVMLError
    lib.NVML_TEMPERATURE_GPU = 0
    lib.NVML_CLOCK_SM = 1
    lib.NVML_CLOCK_MEM = 2
    lib.NVML_PCIE_UTIL_TX_BYTES = 0
    lib.NVML_PCIE_UTIL_RX_BYTES = 1
    if v2_memory:
        lib.nvmlMemory_v2 = 0x02000028
    calls: dict[str, int] = {}
    lib.calls = calls
    lib.initialised = False

    def counted(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
            def inner(*args: Any, **kwargs: Any) -> Any:
                calls[name] = calls.get(name, 0) + 1
                return fn(*args, **kwargs)

            setattr(lib, name, inner)
            return inner

        return wrap

    def value(v: Any) -> Any:
        if v == NOT_SUPPORTED:
            raise errors["NotSupported"]()
        return v

    @counted("nvmlInit")
    def _init() -> None:
        lib.initialised = True

    @counted("nvmlShutdown")
    def _shutdown() -> None:
        lib.initialised = False

    counted("nvmlDeviceGetCount")(lambda: len(devices))
    counted("nvmlDeviceGetHandleByIndex")(lambda i: devices[i])
    counted("nvmlDeviceGetName")(lambda h: h.name.encode())
    counted("nvmlDeviceGetUUID")(lambda h: h.uuid)
    counted("nvmlSystemGetDriverVersion")(lambda: "570.86.15")

    @counted("nvmlDeviceGetMemoryInfo")
    def _mem(h: FakeDevice, version: int | None = None) -> Any:
        if version is not None and not v2_memory:
            raise errors["FunctionNotFound"]()
        return types.SimpleNamespace(total=h.total, used=h.used, free=h.total - h.used)

    @counted("nvmlDeviceGetUtilizationRates")
    def _util(h: FakeDevice) -> Any:
        return types.SimpleNamespace(gpu=value(h.gpu_util), memory=h.mem_util)

    counted("nvmlDeviceGetTemperature")(lambda h, sensor: value(h.temp))
    counted("nvmlDeviceGetPowerUsage")(lambda h: value(h.power_mw))
    counted("nvmlDeviceGetEnforcedPowerLimit")(lambda h: value(h.limit_mw))
    counted("nvmlDeviceGetClockInfo")(
        lambda h, kind: value(h.sm_clock if kind == lib.NVML_CLOCK_SM else h.mem_clock)
    )
    counted("nvmlDeviceGetFanSpeed")(lambda h: value(h.fan))
    counted("nvmlDeviceGetPcieThroughput")(lambda h, counter: value(h.pcie))
    counted("nvmlDeviceGetTotalEnergyConsumption")(lambda h: value(h.energy))

    @counted("nvmlDeviceGetComputeRunningProcesses_v3")
    def _procs(h: FakeDevice) -> list[Any]:
        return [types.SimpleNamespace(pid=p, usedGpuMemory=u) for p, u in h.processes]

    return lib


def failing_pynvml(error_name: str) -> FakePynvml:
    """A fake pynvml whose nvmlInit raises ``NVMLError_<error_name>``."""
    lib = make_fake_pynvml([])

    def _init() -> None:
        raise getattr(lib, f"NVMLError_{error_name}")()

    lib.nvmlInit = _init
    return lib
