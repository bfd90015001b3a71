"""Apply, relaunch and rollback: each GPU stopped through the one stop and launched verified.

A GPU whose new server exits on its arguments is relaunched with what it ran before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace

from tui.control.adopt import ConfirmedServer
from tui.control.stop import StopMode
from tui.ops.adopted_walk import (
    SHARED_NOTE,
    WALK_NOTE,
    adopted_gpus,
    one_per_card,
    shared_gpus,
    walk,
)
from tui.ops.door import BAD_ARGUMENTS, OperationError, OpsBase, emit, gpus_text
from tui.ops.entries import (
    apply_entry,
)
from tui.ops.events import EventSink, OperationFinished
from tui.ops.journal import append
from tui.profiles import Profile
from tui.retune.events import ApplyResult
from tui.state.fleet_state import (
    GpuState,
    profile_of,
    read_fleet,
)


class RetuneOps(OpsBase):
    """Apply a profile, relaunch a GPU's own, roll back to the previous one."""

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
        whose new server exits on its arguments is relaunched with its previous profile. GPUs
        running servers gpufleet adopted are walked one at a time, each verified before the
        next stops (``tui.ops.adopted_walk``: their job keeps running on the others).

        Raises:
            ProfileError: the profile cannot be loaded (nothing is stopped).
            OperationBusy: another operation holds the fleet (nothing is stopped).
        """
        loaded = await asyncio.to_thread(self._loaded, profile)
        targets = tuple(sorted(set(gpus if gpus is not None else loaded.gpus)))
        what = f"apply {loaded.name} to GPUs {gpus_text(targets)}"
        measuring = self.options.apply.measure if measure is None else measure
        async with self._operation(what, targets, on_event):
            state = await asyncio.to_thread(read_fleet)
            fleet = sorted({*targets, *(g for g, s in state.items() if s.server is not None)})
            cost = None
            shared = shared_gpus(loaded, targets)
            if len(targets) > 1 and (adopted_gpus(state, targets) or shared):
                runner = self._runner(replace(self.options.apply, measure=False))

                async def one(gpu: int, sink: EventSink) -> ApplyResult:
                    return (await runner.run(loaded, [gpu], mode=mode, on_event=sink))[0]

                why = WALK_NOTE if adopted_gpus(state, targets) else SHARED_NOTE
                note = why.format(gpus=f"GPUs {gpus_text(shared)}")
                result = await walk(loaded, targets, one, on_event, note)
            else:
                runner = self._runner(replace(self.options.apply, measure=measuring))
                result, cost = await runner.run(
                    loaded,
                    targets,
                    measure=measuring,
                    mode=mode,
                    on_event=on_event,
                    fleet_gpus=fleet,
                )
            restored = await self._restore_args_failures(result, on_event)
            entry = apply_entry(result, self.by, "apply", cost, restored)
            await self._journal(entry, on_event, what)
        return result

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
        for profile, group in previous_groups(state, gpus):
            fitted = await asyncio.to_thread(self.fit, profile)
            result, _ = await self._runner(replace(self.options.apply, measure=False)).run(
                fitted, group, on_event=sink
            )
            restored += [r.gpu for r in result.reports if r.ok]
        return tuple(restored)

    async def relaunch(
        self,
        gpus: Sequence[int],
        on_event: EventSink | None = None,
        mode: StopMode = "drain",
        *,
        confirmed: Mapping[int, ConfirmedServer] | None = None,
    ) -> list[ApplyResult]:
        """Stop and start each GPU's own profile again, verified (one engine run per profile).

        ``confirmed``: per GPU, a process holding its port that the operator confirmed stopping
        although it is not verified as the fleet's (its pid alone is signalled).

        Raises:
            OperationBusy: another operation holds the fleet.
            OperationError: a GPU failed (named), or has no known profile.
        """
        targets = tuple(sorted(set(gpus)))
        what = f"relaunch GPUs {gpus_text(targets)}"
        async with self._operation(what, targets, on_event):
            groups = await asyncio.to_thread(self._own_groups, targets)
            results = []
            for profile, group in groups:
                for wave in one_per_card(profile, group):  # GPUs sharing a card: one by one
                    result, _ = await self._runner(replace(self.options.apply, measure=False)).run(
                        profile, wave, mode=mode, on_event=on_event, confirmed=confirmed
                    )
                    results.append(result)
                    entry = apply_entry(result, self.by, "relaunch")
                    await asyncio.to_thread(append, entry)
            failed = [r for res in results for r in res.reports if not r.ok]
            refused = [why for res in results for why in res.refused]
            summary = (
                f"relaunched GPUs {gpus_text(targets)}"
                if not failed and not refused
                else "; ".join(
                    [f"refused: {why}" for why in refused]
                    + [f"{r.status} on GPU {r.gpu}: {r.failure}" for r in failed]
                )
            )
            emit(on_event, OperationFinished(what, not failed and not refused, summary))
        if failed or refused:
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
        self,
        gpus: Sequence[int] | None = None,
        on_event: EventSink | None = None,
        expect: str | None = None,
    ) -> ApplyResult:
        """Relaunch, on each GPU (default: every GPU with one), the profile it ran before.

        Args:
            gpus: The GPUs (None: every GPU with a previous profile).
            on_event: The runs' events.
            expect: Roll back only if every chosen GPU still runs this profile, checked under
                the operation lock: a caller that applied it earlier (a canary judged from
                another machine) must not undo what another operation put there since.

        Returns:
            The first failed run's result, else the last one's.

        Raises:
            OperationBusy: another operation holds the fleet.
            OperationError: no chosen GPU has a previous profile recorded, or one no longer runs
                ``expect`` (nothing stopped).
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
        what = f"rollback GPUs {gpus_text(chosen)}"
        async with self._operation(what, chosen, on_event):
            if expect is not None:
                state = await asyncio.to_thread(read_fleet)  # what runs now, under the lock
                moved = [g for g in chosen if g not in state or state[g].current_name != expect]
                if moved:
                    now = state[moved[0]].current_name if moved[0] in state else None
                    why = (
                        f"rollback: GPU {moved[0]} runs {now or 'nothing'} now, not {expect} "
                        "(another operation changed it): not rolled back"
                    )
                    emit(on_event, OperationFinished(what, False, why))
                    raise OperationError(why)
            results = []
            for profile, group in previous_groups(state, chosen):
                fitted = await asyncio.to_thread(self.fit, profile)
                for wave in one_per_card(fitted, group):  # GPUs sharing a card: one by one
                    result, _ = await self._runner(replace(self.options.apply, measure=False)).run(
                        fitted, wave, on_event=on_event
                    )
                    results.append(result)
                    await asyncio.to_thread(append, apply_entry(result, self.by, "rollback"))
            final = next((r for r in results if not r.ok), results[-1])
            emit(on_event, OperationFinished(what, all(r.ok for r in results), what))
        return final


def previous_groups(
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
