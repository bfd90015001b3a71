"""The retune-and-verify state machine for one apply over a set of GPUs.

Per GPU, independently: stop -> GPU memory released -> launch -> startup phases from the log ->
ready (``/health_generate`` 200) with the log watched for OOM/crash lines and the process watched
for exit, under the GPU's own timeout -> verify report. Then, after every GPU settled, a
throughput window after a warm-up, compared with the window taken just before the change.

A failed GPU's process group is stopped before its failure is reported, so nothing is left
running on it; the other GPUs carry on. An invalid profile is refused before anything is stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import Literal

from tui.retune.events import (
    ApplyFinished,
    ApplyRefused,
    ApplyResult,
    EffectiveValues,
    GpuFailed,
    GpuPhase,
    GpuReady,
    MeasureProgress,
    RetuneEvent,
    ThroughputComparison,
    VerifyReport,
)
from tui.retune.gpu_run import GpuRun
from tui.retune.options import ApplyOptions
from tui.retune.ports import (
    FleetTarget,
    GpuLaunchSpec,
    LaunchedServer,
    LaunchError,
    ThroughputProbe,
)
from tui.retune.throughput import measure
from tui.retune.verdict import compare


class RetuneEngine:
    """One apply of one profile to a set of GPUs.

    Args:
        target: The fleet operations (stop, release wait, launch) and the profile's launch specs.
        gpus: GPUs to apply to.
        options: Timeouts, stagger, measurement windows.
        probe: Throughput counters; None disables the measurement.
        previous_profiles: Profile each GPU ran before, for the result and the journal.
        diff: Profile diff lines, for the result and the journal.
    """

    def __init__(
        self,
        target: FleetTarget,
        gpus: Sequence[int],
        options: ApplyOptions | None = None,
        probe: ThroughputProbe | None = None,
        previous_profiles: dict[int, str | None] | None = None,
        diff: Sequence[str] = (),
    ) -> None:
        self._target = target
        self._gpus = tuple(sorted(set(gpus)))
        self._options = options or ApplyOptions()
        self._probe = probe
        self._previous = dict(previous_profiles or {})
        self._diff = tuple(diff)
        self._listeners: list[Callable[[RetuneEvent], None]] = []
        self._launch_lock = asyncio.Lock()
        self._last_launch: float | None = None

    def subscribe(self, listener: Callable[[RetuneEvent], None]) -> None:
        """Call ``listener`` with every event, in order, on the event loop."""
        self._listeners.append(listener)

    def _emit(self, event: RetuneEvent) -> None:
        for listener in self._listeners:
            listener(event)

    async def events(self) -> AsyncIterator[RetuneEvent]:
        """Run the apply and yield its events; the last one is ApplyRefused or ApplyFinished."""
        queue: asyncio.Queue[RetuneEvent] = asyncio.Queue()
        self.subscribe(queue.put_nowait)
        task = asyncio.ensure_future(self.run())
        try:
            while True:
                event = await queue.get()
                yield event
                if isinstance(event, ApplyFinished):
                    break
        finally:
            if not task.done():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def run(self) -> ApplyResult:
        """Run the whole apply and return its result (also emitted as ApplyFinished)."""
        started = time.time()
        spec0 = self._profile_name()
        errors = self._options.errors() + (["gpus: no GPU selected"] if not self._gpus else [])
        errors += self._target.validate(self._gpus)
        if errors:
            refusal = tuple(errors)
            self._emit(ApplyRefused(refusal))
            result = ApplyResult(
                spec0,
                self._previous,
                self._gpus,
                (),
                _not_measured("refused"),
                started,
                time.time(),
                refused=refusal,
                diff=self._diff,
            )
            self._emit(ApplyFinished(result))
            return result
        opts = self._options
        before: tuple[float, ...] = ()
        before_window: tuple[float, float] | None = None
        if opts.measure and self._probe is not None:
            before, before_window = await self._measure("before")
        reports = await asyncio.gather(*(self._run_gpu(gpu) for gpu in self._gpus))
        comparison = _not_measured("measurement disabled")
        if opts.measure and self._probe is not None:
            ready = [r.gpu for r in reports if r.ok]
            if ready:
                await self._warm_up()
                after, after_window = await self._measure("after", tuple(ready))
                comparison = replace(
                    compare(before, after, opts.confidence_level),
                    before_window=before_window,
                    after_window=after_window,
                )
            else:
                comparison = _not_measured("no GPU became ready")
        result = ApplyResult(
            spec0,
            self._previous,
            self._gpus,
            tuple(reports),
            comparison,
            started,
            time.time(),
            diff=self._diff,
        )
        self._emit(ApplyFinished(result))
        return result

    def _profile_name(self) -> str:
        try:
            return self._target.spec_for(self._gpus[0]).profile if self._gpus else ""
        except Exception:  # an invalid profile may not even build a spec; validate() says why
            return ""

    async def _warm_up(self) -> None:
        self._emit(MeasureProgress("warm-up", 0, self._options.warmup_s))
        await asyncio.sleep(self._options.warmup_s)

    async def _measure(
        self, stage: Literal["before", "after"], gpus: tuple[int, ...] | None = None
    ) -> tuple[tuple[float, ...], tuple[float, float]]:
        """The window's per-interval rates, and when it started and ended (time.time())."""
        assert self._probe is not None
        opts = self._options
        self._emit(MeasureProgress(stage, 0, opts.window_s))
        started = time.time()
        rates = await measure(
            self._probe,
            gpus or self._gpus,
            opts.window_s,
            opts.interval_s,
            lambda n: self._emit(MeasureProgress(stage, n, opts.window_s)),
        )
        return rates, (started, time.time())

    async def _launch_slot(self) -> None:
        """With a staggered start, wait until ``stagger_s`` after the previous launch."""
        if self._options.stagger_s <= 0:
            return
        loop = asyncio.get_running_loop()
        async with self._launch_lock:
            if self._last_launch is not None:
                delay = self._last_launch + self._options.stagger_s - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            self._last_launch = loop.time()

    async def _run_gpu(self, gpu: int) -> VerifyReport:
        run = GpuRun(gpu, self._target, self._options, self._emit, self._launch_slot)
        report = await run.execute()
        self._emit(GpuReady(gpu, report) if report.ok else GpuFailed(gpu, report))
        return report


def _not_measured(note: str) -> ThroughputComparison:
    return ThroughputComparison((), (), "not measured", note=note)


__all__ = [
    "ApplyOptions",
    "EffectiveValues",
    "GpuLaunchSpec",
    "GpuPhase",
    "LaunchError",
    "LaunchedServer",
    "RetuneEngine",
]
