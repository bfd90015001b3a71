"""Fakes of the retune engine's protocols: scripted servers on a scripted fleet (no processes)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.retune.events import EffectiveValues, RequestedValues
from tui.retune.ports import GpuLaunchSpec, LaunchError, ServerSignal, Stopped


@dataclass
class Script:
    """What a fake server does, in seconds after launch."""

    signals: list[tuple[float, ServerSignal]] = field(default_factory=list)
    """Log facts and when they appear."""
    ready_at: float | None = None
    """When /health_generate starts answering 200 (None = never)."""
    exit_at: float | None = None
    """When the process exits on its own (None = never)."""
    exit_code: int = 1
    """Its exit status then."""
    effective: EffectiveValues = field(default_factory=EffectiveValues)
    """What /server_info reports."""
    launch_error: str | None = None
    """Make launch() raise LaunchError with this message."""


class FakeServer:
    """A scripted server: its clock starts at launch."""

    def __init__(self, gpu: int, script: Script, pid: int, release_s: float = 0.0) -> None:
        self.gpu = gpu
        self.release_s = release_s
        self.script = script
        self.pid = pid
        self.log_path = f"/fake/gpu{gpu}.log"
        self.started = asyncio.get_running_loop().time()
        self.stopped = False
        self._sent = 0

    def _age(self) -> float:
        return asyncio.get_running_loop().time() - self.started

    def alive(self) -> bool:
        """Running: not stopped and not exited on its own."""
        ex = self.script.exit_at
        return not self.stopped and (ex is None or self._age() < ex)

    def exit_code(self) -> int | None:
        if self.stopped:
            return -15
        ex = self.script.exit_at
        return self.script.exit_code if ex is not None and self._age() >= ex else None

    def read_signals(self) -> Sequence[ServerSignal]:
        due = [s for t, s in self.script.signals if t <= self._age()]
        new, self._sent = due[self._sent :], len(due)
        return new

    async def ready(self) -> bool:
        at = self.script.ready_at
        return self.alive() and at is not None and self._age() >= at

    async def effective(self) -> EffectiveValues:
        return self.script.effective

    async def stop(self) -> Stopped:
        self.stopped = True
        await asyncio.sleep(self.release_s)  # the stop waits for the GPU's memory
        return Stopped(True, f"pid {self.pid} stopped")


class FakeTarget:
    """A fleet of fake GPUs; records every call in ``calls`` for assertions."""

    def __init__(
        self,
        scripts: dict[int, Script],
        errors: Sequence[str] = (),
        running: Sequence[int] = (),
        release_s: dict[int, float] | None = None,
        release_timeout_s: float = 120.0,
    ) -> None:
        self.scripts = scripts
        self.errors = list(errors)
        self.running = {gpu: 1000 + gpu for gpu in running}
        self.release_s = release_s or {}
        self.release_timeout_s = release_timeout_s
        self.calls: list[tuple[str, int, float]] = []
        self.servers: dict[int, FakeServer] = {}
        self._pid = 5000

    def _log(self, what: str, gpu: int) -> None:
        self.calls.append((what, gpu, asyncio.get_running_loop().time()))

    def validate(self, gpus: Sequence[int]) -> list[str]:
        return list(self.errors)

    def spec_for(self, gpu: int) -> GpuLaunchSpec:
        return GpuLaunchSpec(gpu, "candidate", RequestedValues(0.93, 200, 0.6, 64))

    async def stop_current(self, gpu: int, on_stage: Callable[[str], None]) -> Stopped:
        self._log("stop", gpu)
        pid = self.running.pop(gpu, None)
        on_stage("waiting for GPU memory release")
        self._log("wait_released", gpu)
        delay = self.release_s.get(gpu, 0.0)
        if delay > self.release_timeout_s:
            await asyncio.sleep(self.release_timeout_s)
            return Stopped(
                False,
                f"GPU memory still held by [{pid}] after {self.release_timeout_s:g}s",
            )
        await asyncio.sleep(delay)
        return Stopped(True, "stopped")

    async def launch(self, spec: GpuLaunchSpec) -> FakeServer:
        self._log("launch", spec.gpu)
        script = self.scripts[spec.gpu]
        if script.launch_error:
            raise LaunchError(script.launch_error)
        self._pid += 1
        server = FakeServer(spec.gpu, script, self._pid, self.release_s.get(spec.gpu, 0.0))
        self.servers[spec.gpu] = server
        return server

    def free_memory(self, gpu: int) -> int | None:
        return 13 * 10**9

    def first(self, what: str, gpu: int) -> float:
        """Loop time of the first ``what`` call on ``gpu``."""
        return next(t for w, g, t in self.calls if w == what and g == gpu)


class FakeProbe:
    """Cumulative token counters that grow at a scripted rate per reading (deterministic)."""

    def __init__(self, rates: Sequence[float]) -> None:
        self.rates = list(rates)
        self.total = 0.0
        self.t_last: float | None = None
        self.i = 0

    async def counters(self, gpus: Sequence[int]) -> dict[int, float | None]:
        now = asyncio.get_running_loop().time()
        if self.t_last is not None:
            rate = self.rates[min(self.i, len(self.rates) - 1)]
            self.total += rate * (now - self.t_last)
            self.i += 1
        self.t_last = now
        return {g: self.total / len(gpus) for g in gpus}


def ready_script(ready_at: float = 0.05, **kw: Any) -> Script:
    """A server that walks through two phases and becomes ready."""
    signals = [
        (0.0, ServerSignal("phase", "loading weights")),
        (0.01, ServerSignal("effective", effective=EffectiveValues(kv_tokens=798080))),
        (0.02, ServerSignal("phase", "capturing CUDA graphs")),
    ]
    return Script(signals=signals, ready_at=ready_at, **kw)
