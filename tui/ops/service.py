"""``FleetOps``: the one door through which anything changes the fleet.

The console, ``gpufleet apply/canary/rollout/sim-fleet``, the demo and (later) the autotuner all
call this service; nothing else stops, launches or retunes a server. Every operation:

- takes the **operation lock** (``tui.ops.lock``): a second operation on the same fleet is
  refused, naming the one that runs;
- **fits** its profile to the fleet (``tui.ops.fit``): each GPU stays on the port the console and
  the pipeline watch; what runs, and what the dialogs name, is the fitted profile;
- changes servers only through the engine run (``tui.ops.runner``) or the one
  stop-and-release (``tui.control.stop_release``), which cordon, drain and verify identity;
- records what runs in the **fleet state** (``tui.state.fleet_state``) and writes one **journal**
  entry (``tui.ops.journal``), refused operations included;
- reports **typed events** (``tui.ops.events.OpEvent``) to the caller's sink.

Blocking work runs in threads: the coroutines never block the caller's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx

from tui import paths
from tui.control.launch import LaunchError, check_started, launch
from tui.control.preflight import (
    PreflightError,
    check_flags,
    check_gpu_free,
    check_port,
    check_stale,
)
from tui.control.release import GpuPids
from tui.control.stop import StopMode
from tui.control.stop_release import (
    StopReleased,
    StopTimeouts,
    in_stop_thread,
    stop_and_release,
)
from tui.ops.entries import (
    apply_entry,
    canary_entry,
    rollout_entry,
    rollout_step_entry,
    simple_entry,
)
from tui.ops.events import EventSink, OperationFinished, OperationStarted, OpEvent
from tui.ops.fit import fit_to_fleet
from tui.ops.journal import JournalEntry, append
from tui.ops.lock import OperationBusy, operation_lock
from tui.ops.pipeline import PipelineConfig, start_pipeline, stop_pipelines
from tui.ops.runner import EngineRunner, gpu_pids_for
from tui.ops.target import launch_spec
from tui.profiles import Profile, list_profiles, load_named, profile_engine, save_profile
from tui.retune.calibration import CalibrationCache
from tui.retune.events import ApplyResult
from tui.retune.options import ApplyOptions
from tui.retune.preflight import Preflight, preflight
from tui.rollout.canary import (
    Applier,
    Canary,
    CanaryLook,
    CanaryOptions,
    CanaryResult,
    SamplerFactory,
)
from tui.rollout.rollout import (
    Plan,
    Rollout,
    RolloutOptions,
    RolloutResult,
    RolloutStep,
    rollback_plan,
    rollout_plan,
)
from tui.rollout.sampling import Sampler
from tui.state.fleet_state import (
    GpuState,
    profile_of,
    read_fleet,
    read_records,
    record_outcome,
)

BAD_ARGUMENTS = "bad_arguments"
"""The log parser's reason for argparse's ``error:`` line: the server refused its arguments."""


class OperationError(RuntimeError):
    """An operation failed on some GPUs, or could not start; the message says which and why."""


@dataclass(frozen=True, slots=True)
class OpsOptions:
    """How the operations run."""

    apply: ApplyOptions = field(default_factory=ApplyOptions)
    """Timeouts and throughput windows of an apply (relaunches and rollbacks measure nothing)."""
    stop: StopTimeouts = field(default_factory=StopTimeouts)
    """Drain, kill and memory-release deadlines."""
    canary: CanaryOptions = field(default_factory=CanaryOptions)
    """Windows and levels of a canary."""
    rollout: RolloutOptions = field(default_factory=RolloutOptions)
    """Timeouts and cost measurement of a rollout (its batch is per call)."""
    settle_s: float = 1.0
    """How long a started server is watched for dying at once (``start``)."""
    restore_args_failures: bool = True
    """Relaunch, with its previous profile, a GPU whose new server exited on its arguments."""


def _gpus_text(gpus: Sequence[int]) -> str:
    return ",".join(str(g) for g in sorted(gpus))


class FleetOps:
    """The operations core: every change of the fleet goes through one of these coroutines.

    Args:
        base: The profile that describes the fleet (the console's), when known; without it
            the fleet's layout comes from the fleet state.
        options: Deadlines, windows, options of each operation.
        by: Who is asking ('console', 'cli', 'autotune'): written in the journal.
        pipeline: The console's pipeline, when it has one (``p``; stopped with the fleet when
            ``stop_pipeline_with_fleet``).
        gpu_pids: Who holds memory on a GPU (default: from each profile's engine).
        stop_pipeline_with_fleet: ``stop_fleet`` also stops the pipeline (the demo's stop).
    """

    def __init__(
        self,
        base: Profile | None = None,
        *,
        options: OpsOptions | None = None,
        by: str = "cli",
        pipeline: PipelineConfig | None = None,
        gpu_pids: GpuPids | None = None,
        stop_pipeline_with_fleet: bool = False,
    ) -> None:
        self.base = base
        """The fleet's profile, when known."""
        self.options = options or OpsOptions()
        """Options of every operation."""
        self.by = by
        """Who asks (journal)."""
        self.pipeline = pipeline
        """The console's pipeline, if any."""
        self.stop_pipeline_with_fleet = stop_pipeline_with_fleet
        """Whether stopping the fleet also stops the pipeline."""
        self._gpu_pids = gpu_pids
        self._calibrations = CalibrationCache()
        """The running servers' log sizes for the preflights, each log read once then followed
        (a prediction per keystroke of the tuning form must not re-read whole logs)."""

    # --- reading the fleet (blocking: call from a thread) ----------------------------------------

    def fit(self, profile: Profile) -> Profile:
        """``profile`` on the fleet's ports, host, logs and simulated hardware (what would run)."""
        return fit_to_fleet(profile, read_fleet(), self.base)

    def load(self, name: str) -> Profile:
        """A profile by name or path, fitted to the fleet (what an operation would launch).

        Raises:
            ProfileError: it cannot be loaded (naming every problem).
        """
        return self.fit(load_named(name))

    def profile_for(self, gpu: int) -> Profile:
        """The profile ``gpu`` runs (or ran last), as launched; else the fleet's profile.

        Raises:
            OperationError: nothing is known about the GPU and there is no fleet profile.
        """
        entry = read_fleet().get(gpu)
        doc = entry.current or entry.previous if entry is not None else None
        if doc is not None:
            return self.fit(profile_of(doc))
        if self.base is not None:
            return self.fit(self.base)
        raise OperationError(f"GPU {gpu}: no profile is known for it")

    def _gpu_pids_for(self, profile: Profile) -> GpuPids:
        return self._gpu_pids or gpu_pids_for(profile)

    def _pids_for_gpu(self, gpu: int) -> GpuPids:
        """Who holds memory on ``gpu``, by the engine of the profile it runs."""
        if self._gpu_pids is not None:
            return self._gpu_pids
        try:
            return gpu_pids_for(self.profile_for(gpu))
        except Exception:  # nothing known about the GPU: wait on nothing, the stop still ran
            return lambda g: set()

    def _runner(self, options: ApplyOptions | None = None) -> EngineRunner:
        return EngineRunner(options or self.options.apply, self.options.stop, self._gpu_pids)

    # --- the lock and the journal ---------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _operation(
        self, what: str, gpus: Sequence[int], sink: EventSink | None
    ) -> AsyncIterator[None]:
        """Hold the operation lock for ``what``; report its start (the caller reports the end).

        Raises:
            OperationBusy: another operation holds the fleet.
        """
        held = contextlib.ExitStack()
        try:
            held.enter_context(operation_lock(what))
        except OperationBusy as busy:
            # The refusal is journalled too: who tried what, and who held the fleet.
            now = time.time()
            kind = what.split(" ", 1)[0]
            entry = simple_entry(
                kind, now, now, False, tuple(sorted(gpus)), self.by, str(busy), refused=(str(busy),)
            )
            await asyncio.to_thread(append, entry)
            raise
        with held:
            _emit(sink, OperationStarted(what, tuple(sorted(gpus))))
            yield

    async def _journal(self, entry: JournalEntry, sink: EventSink | None, what: str) -> None:
        """Append the operation's entry (in a thread: it fsyncs) and report its end."""
        await asyncio.to_thread(append, entry)
        _emit(sink, OperationFinished(what, entry.ok, entry.summary))

    # --- apply, relaunch, rollback --------------------------------------------------------------

    async def apply(
        self,
        profile: Profile | str,
        gpus: Sequence[int] | None = None,
        on_event: EventSink | None = None,
        *,
        measure: bool | None = None,
        mode: StopMode = "drain",
    ) -> ApplyResult:
        """Retune ``gpus`` (default: every GPU of the profile) with ``profile``.

        Stop (drain), release, launch, ready, verify report per GPU; with ``measure`` (default:
        the options') the throughput before and after, and what the apply cost the fleet. A GPU
        whose new server exits on its arguments is relaunched with its previous profile.

        Raises:
            ProfileError: the profile cannot be loaded (nothing is stopped).
            OperationBusy: another operation holds the fleet (nothing is stopped).
        """
        loaded = await asyncio.to_thread(self._loaded, profile)
        targets = tuple(sorted(set(gpus if gpus is not None else loaded.gpus)))
        what = f"apply {loaded.name} to GPUs {_gpus_text(targets)}"
        measuring = self.options.apply.measure if measure is None else measure
        async with self._operation(what, targets, on_event):
            runner = self._runner(replace(self.options.apply, measure=measuring))
            fleet = sorted({*targets, *(await asyncio.to_thread(read_records))})
            result, cost = await runner.run(
                loaded, targets, measure=measuring, mode=mode, on_event=on_event, fleet_gpus=fleet
            )
            restored = await self._restore_args_failures(result, on_event)
            entry = apply_entry(result, self.by, "apply", cost, restored)
            await self._journal(entry, on_event, what)
        return result

    def _loaded(self, profile: Profile | str) -> Profile:
        return self.fit(load_named(profile) if isinstance(profile, str) else profile)

    async def _restore_args_failures(
        self, result: ApplyResult, sink: EventSink | None
    ) -> tuple[int, ...]:
        """Relaunch each GPU whose new server exited on its arguments with what it ran before."""
        if not self.options.restore_args_failures:
            return ()
        failed = [r.gpu for r in result.reports if not r.ok and r.error_reason == BAD_ARGUMENTS]
        return await self._restore(failed, sink) if failed else ()

    async def _restore(self, gpus: Sequence[int], sink: EventSink | None) -> tuple[int, ...]:
        state = await asyncio.to_thread(read_fleet)
        restored: list[int] = []
        for profile, group in _previous_groups(state, gpus):
            fitted = await asyncio.to_thread(self.fit, profile)
            result, _ = await self._runner(replace(self.options.apply, measure=False)).run(
                fitted, group, on_event=sink
            )
            restored += [r.gpu for r in result.reports if r.ok]
        return tuple(restored)

    async def relaunch(
        self, gpus: Sequence[int], on_event: EventSink | None = None, mode: StopMode = "drain"
    ) -> list[ApplyResult]:
        """Stop and start each GPU's own profile again, verified (one engine run per profile).

        Raises:
            OperationBusy: another operation holds the fleet.
            OperationError: a GPU failed (named), or has no known profile.
        """
        targets = tuple(sorted(set(gpus)))
        what = f"relaunch GPUs {_gpus_text(targets)}"
        async with self._operation(what, targets, on_event):
            groups = await asyncio.to_thread(self._own_groups, targets)
            results = []
            for profile, group in groups:
                result, _ = await self._runner(replace(self.options.apply, measure=False)).run(
                    profile, group, mode=mode, on_event=on_event
                )
                results.append(result)
                entry = apply_entry(result, self.by, "relaunch")
                await asyncio.to_thread(append, entry)
            failed = [r for res in results for r in res.reports if not r.ok]
            summary = (
                f"relaunched GPUs {_gpus_text(targets)}"
                if not failed
                else "; ".join(f"GPU {r.gpu}: {r.failure}" for r in failed)
            )
            _emit(on_event, OperationFinished(what, not failed, summary))
        if failed:
            raise OperationError(summary)
        return results

    def _own_groups(self, gpus: Sequence[int]) -> list[tuple[Profile, list[int]]]:
        groups: dict[str, tuple[Profile, list[int]]] = {}
        for gpu in gpus:
            profile = self.profile_for(gpu)
            key = repr(profile)
            groups.setdefault(key, (profile, []))[1].append(gpu)
        return list(groups.values())

    async def rollback(
        self, gpus: Sequence[int] | None = None, on_event: EventSink | None = None
    ) -> ApplyResult:
        """Relaunch, on each GPU (default: every GPU with one), the profile it ran before.

        Returns:
            The first failed run's result, else the last one's.

        Raises:
            OperationBusy: another operation holds the fleet.
            OperationError: no chosen GPU has a previous profile recorded (nothing stopped).
        """
        state = await asyncio.to_thread(read_fleet)
        chosen = (
            sorted(gpus) if gpus is not None else sorted(g for g, s in state.items() if s.previous)
        )
        if self.base is not None and gpus is None:
            chosen = [g for g in chosen if g in self.base.gpus]
        missing = [g for g in chosen if g not in state or state[g].previous is None]
        if missing or not chosen:
            raise OperationError(
                f"rollback: GPU {missing[0]} has no previous profile recorded"
                if missing
                else "rollback: no GPU has a previous profile recorded"
            )
        what = f"rollback GPUs {_gpus_text(chosen)}"
        async with self._operation(what, chosen, on_event):
            results = []
            for profile, group in _previous_groups(state, chosen):
                fitted = await asyncio.to_thread(self.fit, profile)
                result, _ = await self._runner(replace(self.options.apply, measure=False)).run(
                    fitted, group, on_event=on_event
                )
                results.append(result)
                await asyncio.to_thread(append, apply_entry(result, self.by, "rollback"))
            final = next((r for r in results if not r.ok), results[-1])
            _emit(on_event, OperationFinished(what, all(r.ok for r in results), what))
        return final

    # --- kill and stop ----------------------------------------------------------------------------

    async def kill(
        self, gpus: Sequence[int], on_event: EventSink | None = None, mode: StopMode = "drain"
    ) -> list[StopReleased]:
        """Stop the servers on ``gpus`` and wait until their GPU memory is released.

        Args:
            gpus: GPUs to stop.
            on_event: Receives the drain's progress.
            mode: drain (default: no in-flight request lost), terminate (the group's SIGTERM:
                fast, in-flight requests lost) or kill (SIGKILL).

        Raises:
            OperationBusy: another operation holds the fleet.
            OperationError: naming each GPU whose stop failed (survivors, memory still held).
        """
        targets = tuple(sorted(set(gpus)))
        what = f"stop GPUs {_gpus_text(targets)} ({mode})"
        async with self._operation(what, targets, on_event):
            started = time.time()
            outcomes = await self._stop_each(targets, mode, on_event)
            failed = [o for o in outcomes if not o.ok]
            summary = "; ".join(o.message for o in (failed or outcomes)) or "nothing ran"
            entry = simple_entry(
                "kill",
                started,
                time.time(),
                not failed,
                targets,
                self.by,
                summary,
                failed=tuple(o.gpu for o in failed),
                detail={"mode": mode, "outcomes": [o.message for o in outcomes]},
            )
            await self._journal(entry, on_event, what)
        if failed:
            raise OperationError("; ".join(o.message for o in failed))
        return outcomes

    async def _stop_each(
        self, gpus: Sequence[int], mode: StopMode, sink: EventSink | None
    ) -> list[StopReleased]:
        loop = asyncio.get_running_loop()
        records = await asyncio.to_thread(read_records)

        def progress(event: OpEvent) -> None:
            if sink is not None:
                loop.call_soon_threadsafe(sink, event)

        def one(gpu: int) -> StopReleased:
            return stop_and_release(
                gpu,
                records.get(gpu),
                self._pids_for_gpu(gpu),
                mode=mode,
                timeouts=self.options.stop,
                on_progress=progress,
            )

        return list(
            await asyncio.gather(*(in_stop_thread(functools.partial(one, g)) for g in gpus))
        )

    async def stop_fleet(
        self, on_event: EventSink | None = None, mode: StopMode = "drain"
    ) -> list[StopReleased]:
        """Stop every recorded server (and the pipeline first, when configured so).

        Raises:
            OperationBusy: another operation holds the fleet.
            OperationError: naming each GPU whose stop failed.
        """
        if self.stop_pipeline_with_fleet and self.pipeline is not None:
            await self.stop_pipeline()
        records = await asyncio.to_thread(read_records)
        return await self.kill(sorted(records), on_event, mode)

    # --- start a fleet ----------------------------------------------------------------------------

    async def start(
        self, profile: Profile | str, gpus: Sequence[int] | None = None
    ) -> dict[int, str | None]:
        """Launch ``profile`` on every chosen GPU that has no live server of the fleet.

        GPUs whose recorded server still runs (same identity, same port) are left alone
        (re-attached); the others are preflighted (stale server, port, GPU memory), launched
        and watched ``settle_s`` for dying at once, each independently.

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
        what = f"start {loaded.name} on GPUs {_gpus_text(targets)}"
        async with self._operation(what, targets, None):
            started = time.time()
            outcome = await asyncio.to_thread(self._start, loaded, targets)
            failed = tuple(g for g, why in outcome.items() if why)
            summary = (
                f"{len(targets) - len(failed)}/{len(targets)} GPUs run {loaded.name}"
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
            )
            await asyncio.to_thread(append, entry)
        return outcome

    def _start(self, profile: Profile, gpus: Sequence[int]) -> dict[int, str | None]:
        from concurrent.futures import ThreadPoolExecutor

        from tui.control.identity import IdentityMismatch, verify

        state = read_fleet()
        gpu_pids = self._gpu_pids_for(profile)

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
                return None
            try:
                check_flags(profile, gpu)
                check_stale(gpu, spec.port)
                check_port(spec.port, spec.host, gpu)
                check_gpu_free(gpu, gpu_pids)
                process = launch(
                    spec.argv,
                    spec.env,
                    Path(spec.log_path),
                    gpu=gpu,
                    port=spec.port,
                    profile=spec.profile,
                    host=spec.host,
                )
                if self.options.settle_s > 0:
                    check_started(process, self.options.settle_s)
            except (PreflightError, LaunchError) as exc:
                return str(exc)
            return None

        with ThreadPoolExecutor(max_workers=max(1, len(gpus))) as pool:
            results = dict(zip(gpus, pool.map(one, gpus), strict=True))
        ok = [g for g, why in results.items() if why is None]
        if ok:
            record_outcome(profile, ok, [])
        return results

    # --- canary and rollout -----------------------------------------------------------------------

    def _sampler_factory(self, profile: Profile, client: httpx.AsyncClient) -> SamplerFactory:
        def make(gpus: Sequence[int], interval_s: float) -> Sampler:
            return EngineRunner.sampler(profile, gpus, interval_s, client)

        return make

    def _applier(self, options: ApplyOptions, sink: EventSink | None) -> Applier:
        runner = self._runner(replace(options, measure=False))

        async def apply(profile: Profile, gpus: Sequence[int]) -> ApplyResult:
            result, _ = await runner.run(profile, gpus, on_event=sink)
            return result

        return apply

    async def canary(
        self,
        profile: Profile | str,
        gpu: int,
        on_event: EventSink | None = None,
        options: CanaryOptions | None = None,
        *,
        controls: Sequence[int] | None = None,
    ) -> CanaryResult:
        """Try ``profile`` on ``gpu`` while the other running GPUs (or ``controls``) keep theirs.

        Raises:
            ProfileError: the profile cannot be loaded (nothing is stopped).
            OperationBusy: another operation holds the fleet.
        """
        loaded = await asyncio.to_thread(self._loaded, profile)
        opts = options or self.options.canary
        what = f"canary {loaded.name} on GPU {gpu}"

        def look(event: CanaryLook) -> None:
            _emit(on_event, event)

        async with self._operation(what, (gpu,), on_event):
            async with httpx.AsyncClient() as client:
                canary = Canary(
                    loaded,
                    gpu,
                    self._applier(opts.apply, on_event),
                    self._sampler_factory(loaded, client),
                    opts,
                    controls=list(controls) if controls is not None else None,
                    on_look=look,
                )
                result = await canary.run()
            await self._journal(canary_entry(result, self.by), on_event, what)
        return result

    async def rollout(
        self,
        profile: Profile | str,
        batch: int = 1,
        gpus: Sequence[int] | None = None,
        on_event: EventSink | None = None,
        options: RolloutOptions | None = None,
    ) -> RolloutResult:
        """Move every GPU not yet on ``profile`` to it, ``batch`` at a time, each batch verified
        before the next; at the first failure stop, and relaunch the failed GPU on its old one.

        Raises:
            ProfileError: the profile cannot be loaded (nothing is stopped).
            OperationBusy: another operation holds the fleet.
        """
        loaded = await asyncio.to_thread(self._loaded, profile)
        plan, skipped = await asyncio.to_thread(rollout_plan, loaded, gpus)
        return await self._walk(plan, loaded, batch, False, skipped, on_event, options)

    async def rollout_back(
        self,
        gpus: Sequence[int] | None = None,
        batch: int = 1,
        on_event: EventSink | None = None,
        options: RolloutOptions | None = None,
    ) -> RolloutResult:
        """Walk each GPU back to its previous profile, in reverse order, verified.

        Raises:
            OperationError: a chosen GPU has no previous profile (nothing is stopped).
            OperationBusy: another operation holds the fleet.
        """
        try:
            plan = await asyncio.to_thread(rollback_plan, gpus)
        except ValueError as exc:
            raise OperationError(str(exc)) from None
        if not plan:
            raise OperationError("rollback: no GPU has a previous profile recorded")
        fitted = [(g, await asyncio.to_thread(self.fit, p)) for g, p in plan]
        return await self._walk(fitted, fitted[0][1], batch, True, (), on_event, options)

    async def _walk(
        self,
        plan: Plan,
        fleet: Profile,
        batch: int,
        rollback: bool,
        skipped: Sequence[int],
        sink: EventSink | None,
        options: RolloutOptions | None,
    ) -> RolloutResult:
        opts = replace(options or self.options.rollout, batch=batch)
        gpus = tuple(g for g, _ in plan)
        what = ("rollback of" if rollback else f"rollout of {fleet.name} to") + (
            f" GPUs {_gpus_text(gpus)}"
        )

        writes: list[asyncio.Future[Path]] = []

        def step(done: RolloutStep) -> None:
            _emit(sink, done)
            entry = rollout_step_entry(done, "" if rollback else fleet.name, rollback, self.by)
            # fsync off the event loop, one write after the other (the journal is in order)
            previous = writes[-1] if writes else None
            writes.append(asyncio.ensure_future(_after(previous, entry)))

        async with self._operation(what, gpus, sink):
            async with httpx.AsyncClient() as client:
                walk = Rollout(
                    plan,
                    fleet,
                    self._applier(opts.apply, sink),
                    self._sampler_factory(fleet, client),
                    opts,
                    rollback=rollback,
                    skipped=skipped,
                    on_step=step,
                )
                result = await walk.run()
            await asyncio.gather(*writes)
            await self._journal(rollout_entry(result, self.by), sink, what)
        return result

    # --- the pipeline ---------------------------------------------------------------------------

    def _pipeline(self) -> PipelineConfig:
        if self.pipeline is None:
            raise OperationError("no pipeline is configured for this console")
        return self.pipeline

    async def start_pipeline(self) -> None:
        """Start ``gpufleet generate`` detached (no-op when it already runs); journalled."""
        config = self._pipeline()
        started = time.time()
        pid = await asyncio.to_thread(start_pipeline, config)
        await asyncio.to_thread(
            append,
            simple_entry(
                "pipeline-start", started, time.time(), True, (), self.by, f"pipeline pid {pid}"
            ),
        )

    async def stop_pipeline(self) -> None:
        """SIGTERM the pipeline (identity-checked); it resumes from its done record later."""
        config = self._pipeline()
        started = time.time()
        pids = await asyncio.to_thread(stop_pipelines, config.status_path)
        summary = f"stopped pipeline pids {pids}" if pids else "no pipeline was running"
        await asyncio.to_thread(
            append, simple_entry("pipeline-stop", started, time.time(), True, (), self.by, summary)
        )

    # --- profiles and predictions (for the console's form) --------------------------------------

    def profile_names(self) -> list[str]:
        """Names of the saved and shipped profiles whose engine is the fleet's. Blocking."""
        kind = self.base.engine.kind if self.base is not None else None
        # Only what can run on this fleet: a real-SGLang profile on a simulated fleet (or the
        # other way round) is not offered.
        return [p.stem for p in list_profiles() if kind is None or profile_engine(p) == kind]

    def current_profile(self) -> str | None:
        """The profile most of the fleet's GPUs run now (the fleet's when nothing is recorded)."""
        state = read_fleet()
        gpus = self.base.gpus if self.base is not None else tuple(state)
        names = [n for g in gpus if g in state and (n := state[g].current_name)]
        if not names:
            return self.base.name if self.base is not None else None
        return max(set(names), key=names.count)

    def save_profile(self, profile: Profile) -> Path:
        """Write ``profile`` as ``<user profiles dir>/<name>.toml`` (``paths.user_profiles_dir``:
        the user's configuration, never the source tree); returns the path. Blocking."""
        return save_profile(profile, paths.user_profiles_dir() / f"{profile.name}.toml")

    async def preflight(self, profile: Profile, gpus: Sequence[int]) -> list[Preflight]:
        """Predicted allocation of ``profile`` on each GPU, calibrated on the running servers'
        logs. Nothing is stopped.

        Raises:
            ValueError: a GPU outside the profile, or a model whose size is unknown.
        """
        return await asyncio.to_thread(self._preflight, profile, tuple(gpus))

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
            calibration = self._calibrations.get(record.log_path) if record is not None else None
            out.append(preflight(profile, gpu, calibration=calibration))
        return out


async def _after(previous: asyncio.Future[Path] | None, entry: JournalEntry) -> Path:
    """Append ``entry`` in a thread once ``previous`` (the entry before it) is written."""
    if previous is not None:
        await previous
    return await asyncio.to_thread(append, entry)


def _emit(sink: EventSink | None, event: OpEvent) -> None:
    if sink is not None:
        sink(event)


def _previous_groups(
    state: dict[int, GpuState], gpus: Sequence[int]
) -> list[tuple[Profile, list[int]]]:
    """Each GPU's previous profile, GPUs with the same document grouped."""
    groups: dict[str, tuple[Profile, list[int]]] = {}
    for gpu in sorted(gpus):
        entry = state.get(gpu)
        if entry is None or entry.previous is None:
            continue
        key = repr(sorted(entry.previous.items()))
        if key not in groups:
            groups[key] = (profile_of(entry.previous), [])
        groups[key][1].append(gpu)
    return list(groups.values())
