"""Canary and rollout through the one door: the trial algorithms (``tui.rollout``) wired to the
engine runner, the sampler and the journal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import httpx

from tui.ops.door import OperationError, OpsBase, emit, gpus_text
from tui.ops.entries import (
    canary_entry,
    rollout_entry,
    rollout_step_entry,
)
from tui.ops.events import EventSink
from tui.ops.journal import JournalEntry, append
from tui.ops.runner import EngineRunner, strangers
from tui.profiles import Profile
from tui.retune.events import ApplyResult
from tui.retune.options import ApplyOptions
from tui.rollout.canary import Applier, Canary, CanaryOptions, SamplerFactory
from tui.rollout.canary_result import CanaryLook, CanaryResult
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
from tui.state.fleet_state import read_fleet


class TrialOps(OpsBase):
    """A canary on one GPU against the others, a rolling rollout and its walk back."""

    # --- canary and rollout -----------------------------------------------------------------------

    def _sampler_factory(self, profile: Profile, client: httpx.AsyncClient) -> SamplerFactory:
        def make(gpus: Sequence[int], interval_s: float) -> Sampler:
            # Observed (latency, energy) at every reading: a rollout thins them to its verdict's.
            return EngineRunner.sampler(profile, gpus, interval_s, client, observe_every_s=0.0)

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
            emit(on_event, event)

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
        *,
        all_at_once: bool = False,
    ) -> RolloutResult:
        """Walk each GPU back to its previous profile, in reverse order, ``batch`` at a time,
        each batch verified before the next, with the fleet's verdict at the end.

        Args:
            gpus: The GPUs (None: every GPU with a previous profile recorded).
            batch: GPUs restarted together.
            on_event: Every batch's events, and the verdict's windows.
            options: Timeouts and windows (default: the service's rollout options).
            all_at_once: Every GPU in one batch (only when the operator asks: the whole fleet
                is down together).

        Raises:
            OperationError: a chosen GPU has no previous profile (nothing is stopped).
            OperationBusy: another operation holds the fleet.
        """
        within = self.base.gpus if self.base is not None else None
        try:
            plan = await asyncio.to_thread(rollback_plan, gpus, within)
        except ValueError as exc:
            raise OperationError(str(exc)) from None
        if not plan:
            raise OperationError("rollback: no GPU has a previous profile recorded")
        fitted = [(g, await asyncio.to_thread(self.fit, p)) for g, p in plan]
        pace = len(fitted) if all_at_once else batch
        return await self._walk(fitted, fitted[0][1], pace, True, (), on_event, options)

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
            f" GPUs {gpus_text(gpus)}"
        )

        writes: list[asyncio.Future[Path]] = []

        def step(done: RolloutStep) -> None:
            emit(sink, done)
            entry = rollout_step_entry(done, "" if rollback else fleet.name, rollback, self.by)
            # fsync off the event loop, one write after the other (the journal is in order)
            previous = writes[-1] if writes else None
            writes.append(asyncio.ensure_future(_after(previous, entry)))

        async with self._operation(what, gpus, sink):
            state = await asyncio.to_thread(read_fleet)
            held = await asyncio.to_thread(strangers, plan, state, {})
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
                    on_measure=lambda progress: emit(sink, progress),
                    refusals=held,
                )
                result = await walk.run()
            await asyncio.gather(*writes)
            await self._journal(rollout_entry(result, self.by), sink, what)
        return result


async def _after(previous: asyncio.Future[Path] | None, entry: JournalEntry) -> Path:
    """Append ``entry`` in a thread once ``previous`` (the entry before it) is written."""
    if previous is not None:
        await previous
    return await asyncio.to_thread(append, entry)
