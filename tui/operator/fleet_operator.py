"""``FleetOperator``: the console's operations performed on the real fleet (core, no Textual).

It satisfies ``tui.ui.sources.FleetActions``. Every operation is a coroutine; blocking work
(signals and their deadlines, GPU-release waits, launches, file and process-table reads) runs in
``asyncio.to_thread`` so the console's event loop never waits on it. GPUs are handled in
parallel and independently: one GPU's failure is reported without holding up the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from tui import paths
from tui.control import (
    GpuOutcome,
    IdentityMismatch,
    LaunchError,
    PreflightError,
    launch_gpu,
    read_records,
    stop,
    wait_gpu_released,
)
from tui.control.release import GpuPids, nvml_gpu_pids, sim_gpu_pids
from tui.operator.apply import EventSink, run_apply
from tui.operator.pipeline_control import PipelineConfig, start_pipeline, stop_pipelines
from tui.operator.rollout_ops import LookSink, run_canary, run_rollout
from tui.profiles import Profile, list_profiles, load_named, save_profile
from tui.retune.events import ApplyResult
from tui.retune.options import ApplyOptions
from tui.retune.preflight import Preflight, calibration_from_log, preflight
from tui.rollout.canary import CanaryOptions, CanaryResult
from tui.rollout.rollout import RolloutOptions, RolloutResult
from tui.state.fleet_state import profile_of, read_running, record_outcome


class StopMarker(Protocol):
    """Shows a GPU as STOPPING while its stop runs (``tui.fleet.monitor.FleetMonitor``)."""

    def mark_stopping(self, gpu: int, stopping: bool = True) -> None:
        """Mark ``gpu``'s server as stopping (until it is gone), or withdraw the mark."""
        ...


class OperationError(RuntimeError):
    """An operation failed on some GPUs; the message names each GPU and why."""


@dataclass(frozen=True, slots=True)
class OperatorTimeouts:
    """Deadlines of the operator's steps."""

    term_s: float = 30.0
    """SIGTERM -> SIGKILL of a server's process group."""
    release_s: float = 120.0
    """GPU memory release after a stop."""
    settle_s: float = 1.0
    """How long a relaunched server is watched for dying at once."""


def default_gpu_pids(profile: Profile) -> GpuPids:
    """Who holds memory on a GPU: the simulated driver for sim profiles, else NVML (or nobody)."""
    if profile.engine.kind == "sim":
        return sim_gpu_pids()
    try:
        return nvml_gpu_pids()
    except Exception:  # no driver: the port and identity checks still guard a relaunch
        return lambda gpu: set()


class FleetOperator:
    """The console's backend on the real fleet of ``profile``.

    Args:
        profile: The profile the console was opened on (default for GPUs with no record).
        pipeline: Files and servers of the console's pipeline; None disables pipeline keys.
        marker: Shows GPUs as STOPPING during a stop (the monitor); None shows nothing.
        apply_options: Timeouts and throughput windows of an apply.
        timeouts: Stop, release and settle deadlines.
        gpu_pids: Who holds memory on a GPU; default from the profile's engine.
        stop_pipeline_with_fleet: ``stop_fleet`` also stops the pipeline (the demo's "stop").
        canary_options: Windows and levels of a canary (default: the core's).
        rollout_options: Timeouts and cost measurement of a rollout (its batch is per call).
    """

    def __init__(
        self,
        profile: Profile,
        *,
        pipeline: PipelineConfig | None = None,
        marker: StopMarker | None = None,
        apply_options: ApplyOptions | None = None,
        timeouts: OperatorTimeouts | None = None,
        gpu_pids: GpuPids | None = None,
        stop_pipeline_with_fleet: bool = False,
        canary_options: CanaryOptions | None = None,
        rollout_options: RolloutOptions | None = None,
    ) -> None:
        self.profile = profile
        """The console's profile."""
        self.pipeline = pipeline
        """The console's pipeline, if any."""
        self.marker = marker
        """STOPPING marks on the monitor."""
        self.apply_options = apply_options or ApplyOptions()
        """Options of every apply."""
        self.timeouts = timeouts or OperatorTimeouts()
        """Step deadlines."""
        self.gpu_pids = gpu_pids or default_gpu_pids(profile)
        """The GPU source for release waits."""
        self.stop_pipeline_with_fleet = stop_pipeline_with_fleet
        """Whether stopping the fleet also stops the pipeline."""
        self.canary_options = canary_options or CanaryOptions()
        """Options of every canary."""
        self.rollout_options = rollout_options or RolloutOptions()
        """Options of every rollout (the batch comes with each call)."""

    # --- capabilities and profiles -------------------------------------------------------------

    def supports(self, intent: str) -> bool:
        """Every intent (``tui.ui.sources.Intent``, a str) but 'pipeline' without a pipeline."""
        return intent != "pipeline" or self.pipeline is not None

    def profile_names(self) -> list[str]:
        """Names of the profiles in the profiles directory."""
        return [path.stem for path in list_profiles()]

    def current_profile(self) -> str | None:
        """The profile most of the fleet's GPUs run now (the console's when nothing is recorded)."""
        running = read_running()
        names = [running[g].current_name for g in self.profile.gpus if g in running]
        known = [n for n in names if n]
        if not known:
            return self.profile.name
        return max(set(known), key=known.count)

    def load_profile(self, name: str) -> Profile:
        """A profile by name (or path), validated; raises ``ProfileError`` naming every problem.

        The profile a GPU of this fleet runs now comes as it was launched (the running-profile
        state), not as its file says: the demo launches the file with other ports and speed, and
        the tuning form builds its candidate on what this returns.
        """
        running = read_running()
        for gpu in self.profile.gpus:
            entry = running.get(gpu)
            if entry is not None and entry.current_name == name and entry.current is not None:
                return profile_of(entry.current)
        if name == self.profile.name:
            return self.profile
        return load_named(name)

    def save_profile(self, profile: Profile) -> Path:
        """Write ``profile`` as ``<profiles dir>/<name>.toml``; returns the path."""
        return save_profile(profile, paths.profiles_dir() / f"{profile.name}.toml")

    def profile_for(self, gpu: int) -> Profile:
        """The profile ``gpu`` runs now (running-profile state), else the console's."""
        entry = read_running().get(gpu)
        if entry is not None and entry.current is not None:
            return profile_of(entry.current)
        return self.profile

    async def preflight(self, profile: Profile, gpus: tuple[int, ...]) -> list[Preflight]:
        """Predicted allocation of ``profile`` on each GPU, calibrated on the running servers' logs.

        Raises:
            ValueError: a GPU outside the profile, or a model whose size is unknown.
        """
        return await asyncio.to_thread(self._preflight, profile, gpus)

    def _preflight(self, profile: Profile, gpus: tuple[int, ...]) -> list[Preflight]:
        records = read_records()
        out = []
        for gpu in gpus:
            if gpu not in profile.gpus:
                raise ValueError(
                    f"gpus: GPU {gpu} is not in profile {profile.name!r} "
                    f"(allowed: {list(profile.gpus)})"
                )
            record = records.get(gpu)
            calibration = calibration_from_log(record.log_path) if record is not None else None
            out.append(preflight(profile, gpu, calibration=calibration))
        return out

    # --- stop and relaunch ----------------------------------------------------------------------

    def _stop_one(self, gpu: int) -> GpuOutcome:
        """Identity-checked stop of ``gpu``'s recorded server, then the GPU-release wait."""
        record = read_records().get(gpu)
        if record is None:
            return GpuOutcome(gpu, True, f"GPU {gpu}: no server recorded")
        try:
            result = stop(record, term_timeout=self.timeouts.term_s)
        except IdentityMismatch as exc:
            return GpuOutcome(gpu, False, str(exc))
        if result.survivors:
            return GpuOutcome(gpu, False, result.describe(), stopped=result)
        deadline = time.monotonic() + self.timeouts.release_s
        holding = wait_gpu_released(gpu, result.pids, self.gpu_pids, deadline)
        if holding:
            return GpuOutcome(
                gpu,
                False,
                f"{result.describe()}; GPU memory still held by {sorted(holding)} after "
                f"{self.timeouts.release_s:.0f}s",
                stopped=result,
            )
        return GpuOutcome(gpu, True, result.describe() + "; GPU memory released", stopped=result)

    def _relaunch_one(self, gpu: int) -> GpuOutcome:
        stopped = self._stop_one(gpu)
        if not stopped.ok:
            return stopped
        profile = self.profile_for(gpu)
        try:
            process = launch_gpu(
                profile, gpu, settle_s=self.timeouts.settle_s, gpu_pids=self.gpu_pids
            )
        except (PreflightError, LaunchError, KeyError) as exc:
            text = exc.args[0] if isinstance(exc, KeyError) else str(exc)
            return GpuOutcome(gpu, False, str(text))
        record_outcome(profile, [gpu], [])
        r = process.record
        return GpuOutcome(gpu, True, f"GPU {gpu}: relaunched pid {r.pid} ({profile.name})", process)

    def _mark(self, gpu: int, stopping: bool) -> None:
        # On the event loop: the monitor is not thread-safe. Its mark clears itself once the
        # process is gone, so only a failed stop withdraws it.
        if self.marker is None:
            return
        with contextlib.suppress(ValueError):  # a GPU the monitor does not show
            self.marker.mark_stopping(gpu, stopping)

    async def _each(
        self, gpus: Sequence[int], one: Callable[[int], GpuOutcome]
    ) -> list[GpuOutcome]:
        chosen = sorted(set(gpus))
        records = read_records()
        for gpu in chosen:
            if gpu in records:
                self._mark(gpu, True)
        outcomes = await asyncio.gather(*(asyncio.to_thread(one, gpu) for gpu in chosen))
        for outcome in outcomes:
            if not outcome.ok:
                self._mark(outcome.gpu, False)
        failed = [o.message for o in outcomes if not o.ok]
        if failed:
            raise OperationError("; ".join(failed))
        return list(outcomes)

    async def kill(self, gpus: tuple[int, ...]) -> None:
        """Stop the servers on ``gpus`` and wait until their GPU memory is released.

        Raises:
            OperationError: naming each GPU whose stop failed (pid reused, survivors, memory held).
        """
        await self._each(gpus, self._stop_one)

    async def relaunch(self, gpus: tuple[int, ...]) -> None:
        """Stop, wait for the GPU's release, and launch each GPU's current profile again.

        Raises:
            OperationError: naming each GPU that could not be stopped or launched.
        """
        await self._each(gpus, self._relaunch_one)

    async def stop_fleet(self) -> None:
        """Stop every server of the fleet (and the pipeline first, when configured so).

        Raises:
            OperationError: naming each GPU whose stop failed.
        """
        if self.stop_pipeline_with_fleet and self.pipeline is not None:
            await self.stop_pipeline()
        gpus = sorted(set(self.profile.gpus) | set(read_records()))
        await self._each(gpus, self._stop_one)

    # --- retune -----------------------------------------------------------------------------

    async def apply_profile(
        self, name: str, gpus: tuple[int, ...], on_event: EventSink | None = None
    ) -> ApplyResult:
        """Retune ``gpus`` with profile ``name`` (stop, release, launch, verify, measure, journal).

        Args:
            name: Profile name or path.
            gpus: GPUs to retune.
            on_event: Receives each ``tui.retune.events`` dataclass as it happens.

        Returns:
            The apply's result (refused, per-GPU reports, throughput verdict).

        Raises:
            ProfileError: the profile cannot be loaded (nothing is stopped).
        """
        profile = await asyncio.to_thread(load_named, name)
        return await run_apply(
            profile, gpus, self.apply_options, on_event, term_timeout=self.timeouts.term_s
        )

    async def rollback(self, on_event: EventSink | None = None) -> ApplyResult | None:
        """Relaunch, on each GPU that has one, the profile it ran before the last apply.

        Args:
            on_event: Receives each apply's events.

        Returns:
            The result of the apply (with GPUs on different previous profiles, one apply per
            profile runs in turn: the first failed one's result, else the last one's).

        Raises:
            OperationError: no GPU of the fleet has a previous profile recorded.
        """
        running = await asyncio.to_thread(read_running)
        groups: dict[str, tuple[Profile, list[int]]] = {}
        for gpu, entry in sorted(running.items()):
            if gpu not in self.profile.gpus or entry.previous is None:
                continue
            key = str(entry.previous)
            if key not in groups:
                groups[key] = (profile_of(entry.previous), [])
            groups[key][1].append(gpu)
        if not groups:
            raise OperationError("rollback: no GPU has a previous profile recorded")
        results: list[ApplyResult] = []
        for profile, gpus in groups.values():
            results.append(
                await run_apply(
                    profile,
                    gpus,
                    self.apply_options,
                    on_event,
                    term_timeout=self.timeouts.term_s,
                )
            )
        return next((r for r in results if not r.ok), results[-1])

    # --- canary and rollout ------------------------------------------------------------------

    async def canary(
        self,
        profile_name: str,
        gpu: int,
        on_event: EventSink | None = None,
        on_look: LookSink | None = None,
    ) -> CanaryResult:
        """Try ``profile_name`` on ``gpu``, the other running GPUs as control (journalled).

        The profile is loaded like ``load_profile`` (a running one as launched), so the
        canary's ports and speed match the running fleet.

        Raises:
            ProfileError: the profile cannot be loaded (nothing is stopped).
        """
        profile = await asyncio.to_thread(self.load_profile, profile_name)
        return await run_canary(profile, gpu, self.canary_options, on_event, on_look)

    async def rollout(
        self, profile_name: str, batch: int = 1, on_event: EventSink | None = None
    ) -> RolloutResult:
        """Move every GPU not yet on ``profile_name`` to it, ``batch`` at a time (journalled).

        Raises:
            ProfileError: the profile cannot be loaded (nothing is stopped).
        """
        profile = await asyncio.to_thread(self.load_profile, profile_name)
        options = replace(self.rollout_options, batch=batch)
        return await run_rollout(profile, options, on_event)

    # --- pipeline ---------------------------------------------------------------------------

    def _pipeline(self) -> PipelineConfig:
        if self.pipeline is None:
            raise OperationError("no pipeline is configured for this console")
        return self.pipeline

    async def start_pipeline(self) -> None:
        """Start ``gpufleet generate`` detached (no-op when it already runs)."""
        await asyncio.to_thread(start_pipeline, self._pipeline())

    async def stop_pipeline(self) -> None:
        """SIGTERM the pipeline (identity-checked); it resumes from its done record later."""
        await asyncio.to_thread(stop_pipelines, self._pipeline().status_path)
