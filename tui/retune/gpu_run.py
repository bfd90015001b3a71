"""One GPU's steps of an apply: stop, release, launch, follow startup, ready or fail, report."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from tui.retune.events import (
    EffectiveValues,
    GpuPhase,
    RequestedValues,
    RetuneEvent,
    VerifyReport,
)
from tui.retune.options import ApplyOptions
from tui.retune.ports import (
    FleetTarget,
    GpuLaunchSpec,
    LaunchedServer,
    LaunchError,
    ServerSignal,
    Stopped,
)

LOG_POLL_S = 0.05
"""How often a starting server's log is read (a file read; the HTTP probe runs every poll_s)."""


class GpuRun:
    """The state machine of one GPU in one apply.

    Args:
        gpu: GPU index.
        target: Fleet operations.
        options: Timeouts and poll cadence.
        emit: Event sink.
        launch_slot: Awaited just before launching (the staggered-start gate).
    """

    def __init__(
        self,
        gpu: int,
        target: FleetTarget,
        options: ApplyOptions,
        emit: Callable[[RetuneEvent], None],
        launch_slot: Callable[[], Awaitable[None]],
    ) -> None:
        self.gpu = gpu
        self._target = target
        self._options = options
        self._emit = emit
        self._launch_slot = launch_slot
        self._t0 = 0.0
        self._launched_at: float | None = None
        self._stop_s: float | None = None
        self._phases: list[tuple[str, float]] = []
        self._effective = EffectiveValues()
        self._spec: GpuLaunchSpec | None = None
        self._server: LaunchedServer | None = None
        self._stopped = False
        self._old: Stopped | None = None
        self._last_stage = ""

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _phase(self, phase: str) -> None:
        since_launch = self._now() - (self._launched_at or self._t0)
        if self._launched_at is not None:
            self._phases.append((phase, round(since_launch, 3)))
        self._emit(GpuPhase(self.gpu, phase, round(self._now() - self._t0, 3)))

    def _stage(self, stage: str) -> None:
        if stage != self._last_stage:
            self._last_stage = stage
            self._phase(stage)

    async def execute(self) -> VerifyReport:
        """Run every step; never raises for a per-GPU failure (it becomes the report)."""
        self._t0 = self._now()
        try:
            report = await self._steps()
        except asyncio.CancelledError:
            await self._cleanup()
            raise
        except Exception as exc:  # an unexpected error on one GPU must not sink the others
            await self._cleanup()
            report = self._failed(f"internal error: {exc!r}", "crash")
        if not report.ok:
            self._phase("failed")
        return report

    async def _steps(self) -> VerifyReport:
        self._spec = self._target.spec_for(self.gpu)
        self._phase("stopping")
        stopped = self._old = await self._target.stop_current(self.gpu, self._stage)
        if not stopped.ok:
            if stopped.refused:
                return self._failed(f"refused to stop the old server: {stopped.message}", "refused")
            return self._failed(f"could not stop the old server: {stopped.message}", "release")
        self._stop_s = round(self._now() - self._t0, 3)
        await self._launch_slot()
        self._phase("launching")
        try:
            self._server = await self._target.launch(self._spec)
        except LaunchError as exc:
            return self._failed(f"launch failed: {exc}", "launch")
        self._launched_at = self._now()
        return await self._follow(self._server)

    async def _follow(self, server: LaunchedServer) -> VerifyReport:
        deadline = self._launched_at_or_now() + self._options.timeout_s
        last_probe = float("-inf")
        while True:
            failure = self._drain_log(server)
            if failure is not None:
                return await self._fail_and_stop(server, failure)
            code = server.exit_code()
            if code is not None:
                # The log may hold the reason: read it once more before blaming the exit alone.
                failure = self._drain_log(server) or self._failed(
                    f"process exited with code {code}", "exit"
                )
                return await self._fail_and_stop(server, failure)
            # The HTTP probe is the truth, but the log says when it is worth asking: probe at
            # once when the log shows the ready line, else every poll_s.
            log_says_ready = bool(self._phases) and self._phases[-1][0] == "ready"
            if log_says_ready or self._now() - last_probe >= self._options.poll_s:
                last_probe = self._now()
                if await server.ready():
                    return await self._ready(server)
            if self._now() >= deadline:
                timeout = self._failed(f"not ready within {self._options.timeout_s:g} s", "timeout")
                return await self._fail_and_stop(server, timeout)
            # Poll cadence of a live process's log, not a stand-in for synchronisation.
            await asyncio.sleep(min(LOG_POLL_S, max(0.0, deadline - self._now())))

    def _launched_at_or_now(self) -> float:
        return self._launched_at if self._launched_at is not None else self._now()

    def _drain_log(self, server: LaunchedServer) -> VerifyReport | None:
        error: ServerSignal | None = None
        for signal in server.read_signals():
            if signal.kind == "phase" and signal.text:
                if not self._phases or self._phases[-1][0] != signal.text:
                    self._phase(signal.text)
            elif signal.kind == "effective":
                self._effective = signal.effective.merged(self._effective)
            elif signal.kind == "error" and (
                error is None or (error.reason != "oom" and signal.reason == "oom")
            ):
                # A crash prints a chain ('Scheduler hit an exception', the OOM line, SIGQUIT):
                # the OOM line says why, so it wins over the first line of the chain.
                error = signal
        if error is None:
            return None
        return self._error_report(error)

    def _error_report(self, signal: ServerSignal) -> VerifyReport:
        reason = signal.reason or "crash"
        label = "OOM" if reason == "oom" else "crash"
        return self._failed(f"{label}: {signal.text}", reason, signal.text)

    async def _fail_and_stop(self, server: LaunchedServer, report: VerifyReport) -> VerifyReport:
        """Stop the server, then read its log's tail once more: an OOM line may follow."""
        await self._cleanup()
        if report.error_reason == "oom":
            return report
        for signal in server.read_signals():
            if signal.kind == "error" and signal.reason == "oom":
                return self._error_report(signal)
        return report

    async def _ready(self, server: LaunchedServer) -> VerifyReport:
        self._drain_log(server)
        time_to_ready = self._now() - self._launched_at_or_now()
        self._phase("ready")
        with contextlib.suppress(Exception):  # /server_info is extra detail, not readiness
            self._effective = self._effective.merged(await server.effective())
        spec = self._spec
        assert spec is not None
        return VerifyReport(
            gpu=self.gpu,
            ok=True,
            profile=spec.profile,
            requested=spec.requested,
            effective=self._effective,
            time_to_ready_s=round(time_to_ready, 3),
            free_memory_bytes=self._target.free_memory(self.gpu),
            phases=tuple(self._phases),
            pid=server.pid,
            log_path=server.log_path,
            stop_s=self._stop_s,
            **self._drain_fields(),
        )

    async def _cleanup(self) -> None:
        """Stop what this run launched, so a failed GPU is left with nothing running."""
        server = self._server
        if server is None or self._stopped:
            return
        self._stopped = True
        self._phase("stopping failed server")
        # The stop waits on every pid of the group: after a failed start the main process is gone
        # but its scheduler child may still hold (and be releasing) GPU memory (seen on the H200).
        await server.stop()

    def _failed(self, why: str, reason: str, line: str | None = None) -> VerifyReport:
        spec = self._spec
        server = self._server
        return VerifyReport(
            gpu=self.gpu,
            ok=False,
            profile=spec.profile if spec else "",
            requested=spec.requested if spec else _empty_requested(),
            effective=self._effective,
            failure=why,
            error_line=line,
            error_reason=reason,
            phases=tuple(self._phases),
            pid=server.pid if server is not None else None,
            log_path=server.log_path if server is not None else (spec.log_path if spec else None),
            free_memory_bytes=self._target.free_memory(self.gpu),
            stop_s=self._stop_s,
            **self._drain_fields(),
        )

    def _drain_fields(self) -> dict[str, Any]:
        """What the old server's stop did to its requests, for the report."""
        old = self._old
        if old is None:
            return {}
        return {
            "drain_timed_out": old.drain_timed_out,
            "lost_in_flight": old.lost_in_flight,
            "drain_note": old.drain_note or None,
            "client_still_sending": old.client_still_sending,
            "arrived_during_drain": old.arrived_during_drain,
        }


def _empty_requested() -> RequestedValues:
    return RequestedValues()
