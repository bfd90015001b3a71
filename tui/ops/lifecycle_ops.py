"""Stopping and starting: GPUs, the whole fleet, and the console's pipeline."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tui.control.adopt import ConfirmedServer, check_port_adopting
from tui.control.identity import IdentityMismatch, verify
from tui.control.launch import LaunchError, check_started, launch
from tui.control.preflight import (
    PreflightError,
    check_flags,
    check_gpu_free,
    check_stale,
)
from tui.control.stop import StopMode
from tui.control.stop_release import StopReleased, in_stop_thread, stop_and_release
from tui.ops.door import (
    OperationError,
    OpsBase,
    StopIncomplete,
    gpus_text,
    outcome_summary,
    outcomes_lost,
)
from tui.ops.entries import (
    drain_fields,
    simple_entry,
)
from tui.ops.events import EventSink, OpEvent
from tui.ops.journal import append
from tui.ops.target import launch_spec
from tui.profiles import Profile, load_named
from tui.state.fleet_state import (
    FleetState,
    GpuState,
    forget_gpus,
    read_fleet,
    record_outcome,
)

if TYPE_CHECKING:
    from tui.ops.pipeline import PipelineConfig


def _verified_servers(state: FleetState, gpus: Sequence[int]) -> list[str]:
    """'GPU 3: pid 4242 on port 30003 runs' for each of ``gpus`` whose recorded server runs and
    is verified as the one launched (a stranger at its pid is a stale record: forgettable)."""
    running = []
    for gpu in gpus:
        server = state[gpu].server
        if server is None:
            continue
        try:
            alive = verify(server).alive
        except IdentityMismatch:
            alive = False
        if alive:
            running.append(
                f"GPU {gpu}: the fleet's server pid {server.pid} on port {server.port} runs"
            )
    return running


class LifecycleOps(OpsBase):
    """Stop GPUs (drain, terminate, kill), stop or start the whole fleet, the pipeline."""

    # --- kill and stop ----------------------------------------------------------------------------

    async def kill(
        self,
        gpus: Sequence[int],
        on_event: EventSink | None = None,
        mode: StopMode = "drain",
        *,
        confirmed: Mapping[int, ConfirmedServer] | None = None,
        drain_s: float | None = None,
    ) -> list[StopReleased]:
        """Stop the servers on ``gpus`` and wait until their GPU memory is released and their
        ports are free.

        Args:
            gpus: GPUs to stop.
            on_event: Receives the drain's progress.
            mode: drain (default: no in-flight request lost), terminate (the group's SIGTERM:
                fast, in-flight requests lost) or kill (SIGKILL).
            confirmed: Per GPU, a process holding its port that the operator confirmed
                stopping although it is not verified as the fleet's (its pid alone is
                signalled, and only while it is still the process confirmed).
            drain_s: The drain's deadline the operator gave (the kill dialog), over the
                profiles' ``[stop] drain_timeout_s`` (None: theirs, else the options').

        Returns:
            Each GPU's outcome (done, refused or failed), in GPU order; a drain that timed
            out is done, with ``drain`` saying what it lost.

        Raises:
            OperationBusy: another operation holds the fleet.
            StopIncomplete: some GPU was refused or failed (each named, with why); the
                outcomes are in its ``outcomes``.
        """
        targets = tuple(sorted(set(gpus)))
        what = f"stop GPUs {gpus_text(targets)} ({mode})"
        async with self._operation(what, targets, on_event):
            started = time.time()
            outcomes = await self._stop_each(targets, mode, on_event, confirmed or {}, drain_s)
            not_done = [o for o in outcomes if not o.ok]
            entry = simple_entry(
                "kill",
                started,
                time.time(),
                not not_done,
                targets,
                self.by,
                outcome_summary(outcomes),
                failed=tuple(o.gpu for o in not_done),
                detail={
                    "mode": mode,
                    "outcomes": [o.message for o in outcomes],
                    "status": {str(o.gpu): o.status for o in outcomes},
                    "drain_timed_out": [o.gpu for o in outcomes if o.drain_timed_out],
                },
                lost_in_flight=outcomes_lost(outcomes),
                drains=drain_fields(
                    (o.client_still_sending for o in outcomes),
                    (o.arrived_during_drain for o in outcomes),
                ),
            )
            await self._journal(entry, on_event, what)
        if not_done:
            raise StopIncomplete(outcomes)
        return outcomes

    async def _stop_each(
        self,
        gpus: Sequence[int],
        mode: StopMode,
        sink: EventSink | None,
        confirmed: Mapping[int, ConfirmedServer],
        drain_s: float | None = None,
    ) -> list[StopReleased]:
        loop = asyncio.get_running_loop()
        timeouts = self.options.stop.pinned(drain_s)
        state = await asyncio.to_thread(read_fleet)

        def progress(event: OpEvent) -> None:
            if sink is not None:
                loop.call_soon_threadsafe(sink, event)

        fleet_drain_s = self.base.stop.drain_timeout_s if self.base is not None else None

        def one(gpu: int) -> StopReleased:
            entry = state.get(gpu)
            port, host = self._address(entry, gpu)
            # The profile its server runs says how long it may drain, else the fleet's profile;
            # the operator's --drain-timeout (or the kill dialog's) wins over both.
            recorded = entry.drain_timeout_s if entry is not None else None
            return stop_and_release(
                gpu,
                entry.server if entry is not None else None,
                self._pids_for_gpu(gpu),
                mode=mode,
                timeouts=timeouts.for_profile(recorded if recorded is not None else fleet_drain_s),
                on_progress=progress,
                port=port,
                host=host,
                confirmed=confirmed.get(gpu),
                device=self._device(entry, gpu),
            )

        return list(
            await asyncio.gather(*(in_stop_thread(functools.partial(one, g)) for g in gpus))
        )

    def _address(self, entry: GpuState | None, gpu: int) -> tuple[int | None, str]:
        """The GPU's port and host: the fleet state's, else the fleet's profile's (servers the
        state records nothing of, started by the operator's own script: what holds that port is
        named and stopped only as confirmed; a stop that looked at no port said 'done: no server
        recorded' while the server kept serving)."""
        if entry is not None and entry.port is not None:
            return entry.port, entry.host
        if self.base is not None and gpu in self.base.gpus:
            return self.base.port_for(gpu), self.base.host
        return None, "127.0.0.1"

    def _device(self, entry: GpuState | None, gpu: int) -> int:
        """The physical GPU the slot's server runs on: the fleet state's, else the fleet's
        profile's (a slot sharing another's card), else the slot's index."""
        if entry is not None and (entry.server is not None or entry.device is not None):
            return entry.server.device_index if entry.server is not None else entry.device_index
        if self.base is not None and gpu in self.base.gpus:
            return self.base.device_for(gpu)
        return gpu

    async def stop_fleet(
        self,
        on_event: EventSink | None = None,
        mode: StopMode = "drain",
        *,
        confirmed: Mapping[int, ConfirmedServer] | None = None,
        drain_s: float | None = None,
    ) -> list[StopReleased]:
        """Stop every server of the fleet (and the pipeline first, when configured so): every
        recorded one, and whatever holds a port the fleet state keeps (the fleet's own servers
        without a record are adopted and stopped; any other holder is named and refused).

        Raises:
            OperationBusy: another operation holds the fleet.
            StopIncomplete: naming each GPU whose server was refused or failed to stop (they
                still run).
        """
        if self.stop_pipeline_with_fleet and self.pipeline is not None:
            await self.stop_pipeline()
        state = await asyncio.to_thread(read_fleet)
        gpus = sorted(g for g, s in state.items() if s.server is not None or s.port is not None)
        return await self.kill(gpus, on_event, mode, confirmed=confirmed, drain_s=drain_s)

    # --- forget a GPU -----------------------------------------------------------------------------

    async def forget(self, gpus: Sequence[int]) -> None:
        """Remove ``gpus`` from the fleet state (their port, profiles, launches and record): a
        GPU gone from the machine or from the fleet no longer counts as down for ever.

        Raises:
            OperationBusy: another operation holds the fleet.
            OperationError: a GPU is not in the fleet state, or a verified server of the fleet
                runs on it (it must be stopped first: forgetting it would leave it unmanaged);
                nothing was changed.
        """
        targets = tuple(sorted(set(gpus)))
        what = f"forget GPUs {gpus_text(targets)}"
        async with self._operation(what, targets, None):
            started = time.time()
            state = await asyncio.to_thread(read_fleet)
            unknown = [gpu for gpu in targets if gpu not in state]
            if unknown:
                known = gpus_text(sorted(state)) if state else "none"
                raise OperationError(
                    f"GPU {gpus_text(unknown)}: not in the fleet state (its GPUs: {known})"
                )
            running = await asyncio.to_thread(_verified_servers, state, targets)
            if running:
                raise OperationError(
                    f"refused: {'; '.join(running)}: stop it first "
                    f"(gpufleet sim-fleet stop --gpus {','.join(str(g) for g in targets)}); "
                    "nothing was forgotten"
                )
            await asyncio.to_thread(forget_gpus, targets)
            summary = f"forgot GPU {gpus_text(targets)}: no longer part of the fleet"
            entry = simple_entry("forget", started, time.time(), True, targets, self.by, summary)
            await self._journal(entry, None, what)

    # --- start a fleet ----------------------------------------------------------------------------

    async def start(
        self, profile: Profile | str, gpus: Sequence[int] | None = None
    ) -> dict[int, str | None]:
        """Launch ``profile`` on every chosen GPU that has no live server of the fleet.

        GPUs whose recorded server still runs (same identity, same port) are left alone
        (re-attached), and so is a server of the fleet found holding the GPU's port without a
        record (adopted, ``tui.control.adopt``); the others are preflighted (stale server,
        port, GPU memory), launched and watched ``settle_s`` for dying at once, each
        independently.

        Returns:
            GPU -> None when it runs (started or re-attached), else why it could not start.

        Raises:
            ProfileError: the profile cannot be loaded.
            OperationBusy: another operation holds the fleet.
        """
        loaded = await asyncio.to_thread(
            lambda: load_named(profile) if isinstance(profile, str) else profile
        )
        targets = tuple(sorted(set(gpus if gpus is not None else loaded.gpus)))
        what = f"start {loaded.name} on GPUs {gpus_text(targets)}"
        async with self._operation(what, targets, None):
            started = time.time()
            outcome, kept = await asyncio.to_thread(self._start, loaded, targets)
            failed = tuple(g for g, why in outcome.items() if why)
            launched = len(targets) - len(failed) - len(kept)
            summary = (
                f"{len(targets) - len(failed)}/{len(targets)} GPUs up: {launched} launched with "
                f"{loaded.name}, {len(kept)} re-attached (keeping the profile recorded for them)"
                if not failed
                else "; ".join(str(outcome[g]) for g in failed)
            )
            entry = simple_entry(
                "start",
                started,
                time.time(),
                not failed,
                targets,
                self.by,
                summary,
                target=loaded.name,
                failed=failed,
                detail={"reattached": list(kept)},
            )
            await asyncio.to_thread(append, entry)
        return outcome

    def _start(
        self, profile: Profile, gpus: Sequence[int]
    ) -> tuple[dict[int, str | None], tuple[int, ...]]:
        """GPU -> None or why it did not start, and the GPUs whose recorded server still ran
        (re-attached: their record, and the profile it names, are kept)."""
        from concurrent.futures import ThreadPoolExecutor

        from tui.control.identity import IdentityMismatch, verify

        state = read_fleet()
        gpu_pids = self._gpu_pids_for(profile)
        kept: set[int] = set()

        def alive(entry: GpuState | None, port: int) -> bool:
            if entry is None or entry.server is None or entry.server.port != port:
                return False
            try:
                return verify(entry.server).alive
            except IdentityMismatch:
                return False

        def one(gpu: int) -> str | None:
            try:
                spec = launch_spec(profile, gpu)
            except (KeyError, ValueError) as exc:
                return f"GPU {gpu}: {exc.args[0] if exc.args else exc}"
            if alive(state.get(gpu), spec.port):
                kept.add(gpu)
                return None
            try:
                check_flags(profile, gpu)
                check_stale(gpu, spec.port)
                if check_port_adopting(gpu, spec.port, spec.host) is not None:
                    return None  # the fleet's own server, without a record: re-attached
                check_gpu_free(gpu, gpu_pids, device=spec.device_index)
                process = launch(
                    spec.argv,
                    spec.env,
                    Path(spec.log_path),
                    gpu=gpu,
                    port=spec.port,
                    profile=spec.profile,
                    host=spec.host,
                    device=spec.device_index,
                )
                if self.options.settle_s > 0:
                    check_started(process, self.options.settle_s)
            except (PreflightError, LaunchError) as exc:
                return str(exc)
            return None

        with ThreadPoolExecutor(max_workers=max(1, len(gpus))) as pool:
            results = dict(zip(gpus, pool.map(one, gpus), strict=True))
        # A re-attached server runs what its record says (an autotune or a rollout may have
        # moved it on since this profile was launched): recording it as running ``profile``
        # made the demo reopened after 'keep' say every GPU ran sim-baseline while they ran
        # the adopted autotune profile, and made that profile the rollback target.
        ok = [g for g, why in results.items() if why is None and g not in kept]
        if ok:
            record_outcome(profile, ok, [])
        return results, tuple(sorted(kept))

    # --- the pipeline ---------------------------------------------------------------------------

    def _pipeline(self) -> PipelineConfig:
        if self.pipeline is None:
            raise OperationError("no pipeline is configured for this console")
        return self.pipeline

    @property
    def starts_fresh_job(self) -> bool:
        """Whether a start after the job finished starts it afresh (the demo's job)."""
        return self.pipeline is not None and self.pipeline.fresh_when_finished

    async def start_pipeline(self) -> None:
        """Start ``gpufleet generate`` detached (no-op when it already runs); journalled. The
        demo's job, once finished, starts afresh (``PipelineConfig.fresh_when_finished``)."""
        # Imported when the pipeline is started or stopped, not with every operation (an apply's
        # start pays for each module it imports: tui.pipeline's status and detach among them).
        from tui.ops.demo import fresh_job_if_finished
        from tui.ops.pipeline import start_pipeline

        config = self._pipeline()
        started = time.time()
        fresh = None
        if config.fresh_when_finished:
            fresh = await asyncio.to_thread(fresh_job_if_finished, config)
        pid = await asyncio.to_thread(start_pipeline, config)
        summary = f"{fresh}; pipeline pid {pid}" if fresh else f"pipeline pid {pid}"
        await asyncio.to_thread(
            append,
            simple_entry("pipeline-start", started, time.time(), True, (), self.by, summary),
        )

    async def stop_pipeline(self) -> None:
        """SIGTERM the pipeline (identity-checked); it resumes from its done record later."""
        from tui.ops.pipeline import stop_pipelines

        config = self._pipeline()
        started = time.time()
        pids = await asyncio.to_thread(stop_pipelines, config.status_path)
        summary = f"stopped pipeline pids {pids}" if pids else "no pipeline was running"
        await asyncio.to_thread(
            append, simple_entry("pipeline-stop", started, time.time(), True, (), self.by, summary)
        )
