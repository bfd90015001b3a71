"""The console's backend: ``FleetOps`` seen through the console's protocol (``FleetActions``).

An adapter, not a second door: every call goes to the operations service. It adds what only the
console needs: which keys it supports, the monitor's STOPPING marks while a GPU's server is
being stopped, and the canary's looks split from the rest of the event stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from tui.control.adopt import ConfirmedServer
from tui.control.stop import StopMode
from tui.control.stop_release import DrainProgress, StopReleased
from tui.ops.adoption import AdoptPlan, AdoptRequest
from tui.ops.events import EventSink, OpEvent
from tui.ops.service import FleetOps
from tui.profiles import Profile
from tui.retune.events import ApplyResult, GpuFailed, GpuPhase
from tui.retune.preflight import Preflight
from tui.rollout.canary_result import CanaryLook, CanaryResult
from tui.rollout.rollout import RolloutResult

LookSink = Callable[[CanaryLook], None]
"""Receives every look of a canary, on the event loop."""


class StopMarker(Protocol):
    """Shows a GPU as STOPPING while its stop runs (``tui.fleet.monitor.FleetMonitor``)."""

    def mark_stopping(self, gpu: int, stopping: bool = True) -> None:
        """Mark ``gpu``'s server as stopping (until it is gone), or withdraw the mark."""
        ...


class ConsoleBackend:
    """The console's operations, all through ``ops``.

    Args:
        ops: The operations service.
        marker: Shows GPUs as STOPPING during a stop (the monitor); None shows nothing.
        logs: The logs the console shows, by GPU (``FleetMonitor.log_paths``): the preflight
            calibrates on them; None: each looked for at each preflight.
    """

    def __init__(
        self,
        ops: FleetOps,
        marker: StopMarker | None = None,
        logs: Callable[[], Mapping[int, str]] | None = None,
    ) -> None:
        self.ops = ops
        """The one door."""
        self.marker = marker
        """STOPPING marks on the monitor."""
        self.logs = logs
        """The logs the monitor follows, by GPU."""

    @property
    def stops_pipeline_with_fleet(self) -> bool:
        """Whether stopping the fleet also stops the pipeline (the quit dialog says so)."""
        return self.ops.stop_pipeline_with_fleet and self.ops.pipeline is not None

    @property
    def starts_fresh_job(self) -> bool:
        """Whether ``p`` on a finished job starts a fresh one (the demo's job; a real job
        resumes)."""
        return self.ops.starts_fresh_job

    def supports(self, intent: str) -> bool:
        """Every intent but 'pipeline' without a pipeline."""
        return intent != "pipeline" or self.ops.pipeline is not None

    def mark(self, gpu: int, stopping: bool) -> None:
        """Show ``gpu`` as STOPPING (or withdraw the mark) on the monitor, if there is one."""
        self._mark(gpu, stopping)

    def sink(self, on_event: EventSink | None, on_look: LookSink | None = None) -> EventSink:
        """``on_event`` with the STOPPING marks added (for callers of ``FleetOps`` itself, such
        as the agent)."""
        return self._sink(on_event, on_look)

    def _mark(self, gpu: int, stopping: bool) -> None:
        # On the event loop: the monitor is not thread-safe. Its mark clears itself once the
        # process is gone, so only a failed stop withdraws it.
        if self.marker is not None:
            with contextlib.suppress(ValueError):  # a GPU the monitor does not show
                self.marker.mark_stopping(gpu, stopping)

    def _sink(self, on_event: EventSink | None, on_look: LookSink | None = None) -> EventSink:
        def sink(event: OpEvent) -> None:
            starts_stop = isinstance(event, GpuPhase) and event.phase == "stopping"
            drains = isinstance(event, DrainProgress) and event.stage == "draining"
            if (starts_stop or drains) and isinstance(event, GpuPhase | DrainProgress):
                self._mark(event.gpu, True)
            elif isinstance(event, GpuFailed):
                # Whatever failed (the stop refused or failed, or the launch after it): a
                # server that still runs is not stopping any more; one that is gone clears its
                # mark anyway. A mark left on read "stopping" for ever.
                self._mark(event.gpu, False)
            if isinstance(event, CanaryLook) and on_look is not None:
                on_look(event)  # a look goes to one of the two, never both: a screen that
                return  # takes both through one door listed each look twice
            if on_event is not None:
                on_event(event)

        return sink

    # --- operations -------------------------------------------------------------------------------

    async def kill(
        self,
        gpus: tuple[int, ...],
        mode: StopMode = "drain",
        confirmed: tuple[ConfirmedServer, ...] = (),
        drain_s: float | None = None,
    ) -> tuple[StopReleased, ...]:
        """Stop the servers on ``gpus`` and wait for their GPU memory.

        Args:
            gpus: The GPUs.
            mode: drain, terminate or kill.
            confirmed: Servers the operator confirmed stopping although they are not verified
                as the fleet's (``unknown``): their pid alone is signalled.
            drain_s: The drain's deadline the operator gave (None: the profiles', else 60 s).

        Returns:
            Each GPU's outcome (what the console says: a GPU where nothing ran is not called
            stopped; a drain that timed out says what it lost).

        Raises:
            OperationError: naming each GPU whose stop was refused or failed.
        """
        for gpu in gpus:
            self._mark(gpu, True)
        try:
            return tuple(
                await self.ops.kill(
                    gpus,
                    self._sink(None),
                    mode,
                    confirmed={c.gpu: c for c in confirmed},
                    drain_s=drain_s,
                )
            )
        finally:
            # The stop ended, either way: a server it stopped is gone (its panel says so at
            # the next poll), one it did not is not stopping. A mark kept after a stop that
            # acted on nothing read "stopping" for 70 s while the server kept serving.
            for gpu in gpus:
                self._mark(gpu, False)

    async def relaunch(
        self, gpus: tuple[int, ...], confirmed: tuple[ConfirmedServer, ...] = ()
    ) -> tuple[ApplyResult, ...]:
        """Stop and start each GPU's own profile again, verified; each run's result.

        Args:
            gpus: The GPUs.
            confirmed: Servers holding their ports that the operator confirmed stopping
                although they are not verified as the fleet's (their pid alone is signalled).

        Raises:
            OperationError: naming each GPU that failed.
        """
        confirmed_by_gpu = {c.gpu: c for c in confirmed}
        return tuple(await self.ops.relaunch(gpus, self._sink(None), confirmed=confirmed_by_gpu))

    async def apply_profile(
        self, name: str, gpus: tuple[int, ...], on_event: EventSink | None = None
    ) -> ApplyResult:
        """Retune ``gpus`` with profile ``name`` (measured, journalled)."""
        return await self.ops.apply(name, gpus, self._sink(on_event))

    async def rollback(
        self,
        gpus: tuple[int, ...] | None = None,
        on_event: EventSink | None = None,
        all_at_once: bool = False,
    ) -> RolloutResult:
        """Walk each GPU of ``gpus`` (None: each GPU that has one) back to the profile it ran
        before, one GPU at a time (``all_at_once``: together), then the fleet's verdict.

        Raises:
            OperationError: a chosen GPU (or, for the fleet, every GPU) has no previous profile
                recorded; nothing is stopped.
        """
        sink = self._sink(on_event)
        return await self.ops.rollout_back(gpus, 1, sink, all_at_once=all_at_once)

    async def canary(
        self,
        profile_name: str,
        gpu: int,
        on_event: EventSink | None = None,
        on_look: LookSink | None = None,
    ) -> CanaryResult:
        """Try ``profile_name`` on ``gpu``, the other running GPUs as control."""
        return await self.ops.canary(profile_name, gpu, self._sink(on_event, on_look))

    async def rollout(
        self,
        profile_name: str,
        batch: int = 1,
        gpus: tuple[int, ...] | None = None,
        on_event: EventSink | None = None,
    ) -> RolloutResult:
        """Move every GPU of ``gpus`` (None: the fleet) not yet on ``profile_name`` to it,
        ``batch`` at a time."""
        return await self.ops.rollout(profile_name, batch, gpus, self._sink(on_event))

    async def stop_fleet(self, on_event: EventSink | None = None) -> None:
        """Stop every server of the fleet (and the pipeline, when configured so)."""
        await self.ops.stop_fleet(self._sink(on_event))

    async def start_pipeline(self) -> None:
        """Start the pipeline detached."""
        await self.ops.start_pipeline()

    async def stop_pipeline(self) -> None:
        """Stop the pipeline."""
        await self.ops.stop_pipeline()

    # --- profiles -------------------------------------------------------------------------------

    def profile_names(self) -> list[str]:
        """Names of the profiles in the profiles directory. Blocking."""
        return self.ops.profile_names()

    def current_profile(self) -> str | None:
        """The profile most of the fleet runs. Blocking."""
        return self.ops.current_profile()

    def load_profile(self, name: str) -> Profile:
        """The profile ``name`` as it would run on this fleet (fitted). Blocking.

        Raises:
            ProfileError: it cannot be loaded.
        """
        return self.ops.load(name)

    def save_profile(self, profile: Profile) -> Path:
        """Save ``profile`` under its name. Blocking."""
        return self.ops.save_profile(profile)

    async def preflight(self, profile: Profile, gpus: tuple[int, ...]) -> list[Preflight]:
        """Predicted allocation of ``profile`` on ``gpus`` (nothing is stopped), calibrated on
        the logs the console shows."""
        logs = self.logs() if self.logs is not None else None
        return await self.ops.preflight(profile, gpus, logs)

    # --- adoption ---------------------------------------------------------------------------

    def adoption_request(
        self, ports: tuple[int, ...], gpus: tuple[int, ...], name: str
    ) -> AdoptRequest:
        """Adopting these servers, their logs where their stdout goes."""
        return AdoptRequest(ports, name, gpus)

    async def plan_adoption(self, request: AdoptRequest) -> AdoptPlan:
        """What adopting ``request`` would write (reads only).

        Raises:
            AdoptError: bad input or a port that cannot be adopted (one line naming it).
        """
        return await self.ops.plan_adoption(request)

    async def adopt(self, plan: AdoptPlan) -> None:
        """Write ``plan``: its profile, and each server recorded as the fleet's (journalled)."""
        await self.ops.adopt(plan)


class WatchBackend(ConsoleBackend):
    """The backend of a console that watches ports (``--ports/--gpus``, no profile).

    Until its servers are adopted it offers only that (``A``): every other key is off, since
    nothing would verify those servers as the fleet's. Once adopted, the console operates them
    through the same door as a profile's console (``FleetOps`` with the adopted profile).

    Args:
        ops: The operations service (no profile yet).
        marker: Shows GPUs as STOPPING during a stop (the monitor).
        logs: The logs the console shows, by GPU (the preflight calibrates on them).
        log_dir: The console's ``--log-dir``: where the servers log (None: their stdout files).
        log_pattern: Their log file name in it.
    """

    def __init__(
        self,
        ops: FleetOps,
        marker: StopMarker | None = None,
        logs: Callable[[], Mapping[int, str]] | None = None,
        *,
        log_dir: str | None = None,
        log_pattern: str = "sglang_gpu{gpu}.log",
    ) -> None:
        super().__init__(ops, marker, logs)
        self.log_dir = log_dir
        """Where the watched servers log."""
        self.log_pattern = log_pattern
        """Their log file name."""
        self.adopted: str | None = None
        """The profile the fleet was adopted as (None: not yet)."""

    def supports(self, intent: str) -> bool:
        """Adoption, and once adopted what a profile's console supports."""
        if intent == "adopt":
            return True
        return self.adopted is not None and super().supports(intent)

    def adoption_request(
        self, ports: tuple[int, ...], gpus: tuple[int, ...], name: str
    ) -> AdoptRequest:
        """Adopting these servers, their logs in the console's ``--log-dir`` when it has one."""
        return AdoptRequest(ports, name, gpus, self.log_dir, self.log_pattern)

    async def adopt(self, plan: AdoptPlan) -> None:
        """Write ``plan``; from then on the console operates the servers."""
        await super().adopt(plan)
        self.ops.base = plan.profile
        self.adopted = plan.profile.name
