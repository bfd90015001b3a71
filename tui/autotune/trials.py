"""The search's trials: a candidate canaried on one GPU against the others, a line search
along a move that measured better, and the rollout that adopts the line's best.

Every step is an operation of the operations core (``FleetOps.canary``, ``apply`` to put the
canary GPU back, ``rollout`` to adopt), so each takes the operation lock, records the fleet
state and is journalled. A stop during a canary cancels it as soon as the canary GPU is up (the
engine's launch is never cut in half), then the canary GPU goes back to the incumbent.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, replace

from tui.autotune.budget import exploration_cost, restart_gpu_seconds
from tui.autotune.lockwait import WaitStopped
from tui.autotune.record import CandidateRecord, history_point, measured, new_record
from tui.autotune.searchstate import SearchState
from tui.autotune.space import candidate_profile
from tui.autotune.status import read_request
from tui.autotune.strategy import Ranked, apply_move, further, point_key, score
from tui.autotune.watch import CanaryWatch
from tui.profiles import Profile
from tui.rollout.canary_result import CanaryResult

IDLE_FLEET = (
    "the fleet made no tokens during the canary: nothing to measure "
    "(start the job sending requests, then search again)"
)
"""Why a search ends when its canary's control GPUs generated nothing (``_measure``)."""
JOB_STOPPED = (
    "the job's requests stopped during candidate #{index}'s canary: nothing left to measure "
    "(start the job sending requests, then search again)"
)
"""Why a search ends when the load fell to nothing during a canary (``_measure``)."""


@dataclass(frozen=True, slots=True)
class Trial:
    """A candidate its canary measured (``ok``, tokens estimated); the canary GPU runs it and
    its record is not yet decided."""

    move: Ranked
    """The candidate and its prediction."""
    profile: Profile
    """The candidate's profile."""
    record: CandidateRecord
    """Its record, measured."""
    result: CanaryResult
    """The canary's result."""

    @property
    def relative(self) -> float:
        """Its measured throughput relative to the control (+0.05: 5% more)."""
        assert self.result.tokens is not None
        return self.result.tokens.relative

    @property
    def verdict(self) -> str:
        """The canary's verdict."""
        return self.result.verdict

    @property
    def gain(self) -> bool:
        """Better, with the interval's low end above 0."""
        tokens = self.result.tokens
        return self.result.verdict == "better" and tokens is not None and tokens.rel_low > 0


class Trials(SearchState):
    """The trial steps of a search (see ``SearchState`` for its state)."""

    async def _try(self, best: Ranked, controls: list[int]) -> str | None:
        """Canary ``best``; on a gain go on along its line (``_line``), else drop it.
        Returns why the search ends, or None to go on."""
        trial = await self._measure(best, controls)
        if not isinstance(trial, Trial):
            return trial
        broken = self._over_ttft_limit(trial)
        if trial.gain and broken is None:
            return await self._line(trial, controls)
        assert self.incumbent is not None
        await self._back_to(self.incumbent)
        back = f"rolled back to {self.incumbent.name}"
        return await self._drop(trial, f"{broken}; {back}" if broken else back, broken)

    def _over_ttft_limit(self, trial: Trial) -> str | None:
        """Why ``trial`` breaks ``--max-ttft-p90`` (None: it keeps it, or there is none): its
        window's TTFT p90 above the limit, or not measured (a limit not shown kept is not
        assumed kept)."""
        limit = self.options.max_ttft_p90_s
        if limit is None:
            return None
        beside = trial.result.beside
        p90 = beside.measured.ttft_p90_s if beside is not None else None
        if p90 is None:
            why = beside.ttft_p90.note if beside is not None else "not read"
            return f"TTFT p90 not measured ({why}): --max-ttft-p90 {limit:g} s cannot be checked"
        if p90 > limit:
            return f"TTFT p90 {p90:.3g} s over --max-ttft-p90 {limit:g} s"
        return None

    async def _measure(self, best: Ranked, controls: list[int]) -> Trial | str | None:
        """Canary ``best`` on the canary GPU against ``controls``.

        Returns:
            The measured trial (the canary GPU runs it; its record not yet decided); or why the
            search ends (stopped, refused: the canary GPU is back on the incumbent); or None
            when the candidate failed (recorded; the canary GPU is back on the incumbent).
        """
        assert self.incumbent is not None
        index = self._next_index()
        name = self._name(index)
        profile = await asyncio.to_thread(candidate_profile, self.incumbent, best.candidate, name)
        record = replace(
            new_record(index, best.candidate, name, self.incumbent.name, best.prediction),
            launched=True,
        )
        self.current, self.phase = record, "canary"
        await self._status()
        try:
            result, stop = await self._canary(profile, controls)
        except WaitStopped:
            await self._finish(
                replace(record, launched=False),
                "stopped",
                "stopped by the operator while waiting for the fleet; never launched",
            )
            return "stopped by the operator"
        self.phase = "searching"
        if result is not None and result.refused:  # validation: nothing was stopped
            why = "canary refused: " + "; ".join(result.refused)
            await self._finish(record, "failed", why)
            return why
        if result is None:
            await self._back_to(self.incumbent)
            await self._finish(record, "stopped", "stopped by the operator during its canary")
            return "stopped by the operator"
        cost = exploration_cost(result)
        self.spent = replace(
            self.spent,
            explore_gpu_s=round(self.spent.explore_gpu_s + cost, 3),
            canaries=self.spent.canaries + 1,
        )
        record = measured(record, result, cost)
        self.pending[record.index] = replace(record, why="measured; deciding")
        self.history.append(history_point(record))
        if result.tokens is not None:  # a verdict: its server is not canaried again
            self.measured.append((record.index, best.prediction))
        if stop:
            await self._back_to(self.incumbent)
            await self._finish(record, "stopped", "stopped by the operator; measured first")
            return "stopped by the operator"
        if result.ok and result.load_change is not None:
            return await self._abandon(best, record, result)
        if not result.ok or result.tokens is None:
            await self._back_to(self.incumbent)
            await self._finish(record, "failed", result.describe().splitlines()[0])
            if result.ok and result.controls_idle:
                # Every next candidate would cost its GPU a relaunch and a window for the same
                # "not measured": the search ends here, the canary GPU back on the incumbent.
                return IDLE_FLEET
            return None
        return Trial(best, profile, record, result)

    async def _abandon(
        self, best: Ranked, record: CandidateRecord, result: CanaryResult
    ) -> str | None:
        """A candidate whose window the load changed under (the canary measured it again
        once already): no verdict, so no regression budget spent and nothing learnt; the
        canary GPU goes back to the incumbent. Its move may be proposed once more (measured
        again later, under a steadier load); when the job's requests stopped, the search ends:
        every next candidate would cost a relaunch for the same 'not measured'."""
        assert self.incumbent is not None and result.load_change is not None
        await self._back_to(self.incumbent)
        again = ""
        point = point_key(apply_move(self.knobs, best.candidate))
        if not result.load_change.idle and point not in self.abandoned:
            self.abandoned.add(point)
            self.visited.discard(point)
            again = "; to be measured again"
        why = f"not measured: {result.load_change.words()}; rolled back to {self.incumbent.name}"
        await self._finish(record, "abandoned", why + again)
        if result.load_change.idle:
            return JOB_STOPPED.format(index=record.index)
        return None

    async def _line(self, trial: Trial, controls: list[int]) -> str | None:
        """A line search along the move ``trial`` made (``strategy.further``: 1, 2, 4... steps
        beyond it, each canaried against the same control, while each gains more than the
        last), then the line's best adopted by one rollout."""
        top, stride = trial, 1
        ended: str | None = None
        while True:
            step = further(self.options.space, self.knobs, top.move.candidate, stride)
            if step is None or point_key(apply_move(self.knobs, step)) in self.visited:
                break
            prediction = await self._predict_one(
                step, top.move.prediction, self.visited, f"#{top.record.index}"
            )
            if prediction is None:
                break
            self.visited.add(point_key(apply_move(self.knobs, step)))
            if await self._checkpoint():
                assert self.incumbent is not None
                await self._back_to(self.incumbent)
                await self._finish(
                    top.record, "stopped", "stopped by the operator before its rollout"
                )
                return "stopped by the operator"
            self._tick()
            if self.spent.exhausted(self.options.budget):
                break
            ranked = Ranked(
                step,
                prediction,
                score(prediction, len(step.knobs), self.options.mean_output_tokens),
            )
            self.pending[top.record.index] = replace(
                top.record, why="the best of its line so far; measuring one step further"
            )
            attempt = await self._measure(ranked, controls)
            if isinstance(attempt, str):  # stopped or refused: the canary GPU is on the incumbent
                await self._finish(
                    top.record, "stopped", f"measured better, not adopted: {attempt}"
                )
                return attempt
            if attempt is None:  # it failed; the rollout below moves the canary GPU too
                break
            broken = self._over_ttft_limit(attempt)
            if attempt.gain and attempt.relative > top.relative and broken is None:
                await self._finish(
                    top.record,
                    "superseded",
                    f"#{attempt.record.index}, further along the same move, measured "
                    f"{attempt.relative:+.1%}",
                )
                top, stride = attempt, stride * 2
                continue
            await self._back_to(top.profile)  # the line's best, at once (the rollout skips it)
            why = f"less than #{top.record.index} ({top.relative:+.1%})"
            ended = await self._drop(
                attempt, f"{broken or why}: rolled back to #{top.record.index}", broken
            )
            break
        return await self._adopt(top) or ended

    async def _drop(self, trial: Trial, why: str, broken: str | None = None) -> str | None:
        """Record ``trial`` as dropped (``broken``: rejected, it broke ``--max-ttft-p90``); why
        the search ends when it spent the regression budget: a valid verdict of 'worse' (its
        interval below 0) beyond the largest regression. A 'no measurable difference' whose
        estimate lies past it is not evidence of one (its interval reaches 0), and a window the
        load changed under never gets here."""
        await self._finish(trial.record, "rejected" if broken else "dropped", why)
        limit = self.options.budget.max_regression
        if trial.verdict == "worse" and trial.relative < -limit:
            return (
                f"regression budget: candidate #{trial.record.index} measured "
                f"{trial.relative:+.1%} < -{limit:.0%}"
            )
        return None

    async def _adopt(self, trial: Trial) -> str | None:
        """Roll the winner out to every GPU; on a failure walk the moved GPUs back."""
        self.phase = "adopting"
        await self._status()
        profile, record = trial.profile, trial.record
        async with self._heartbeat():
            rolled = await self._when_free(
                "rollout",
                lambda: self.ops.rollout(profile, 1, None, self.on_event, self.options.rollout),
            )
        assert self.incumbent is not None
        if not rolled.ok:
            moved = [g for g in rolled.done if g != self.gpu] + [self.gpu]
            await self._back_to(self.incumbent, moved)
            await self._finish(record, "failed", f"rollout failed: {rolled.describe()}")
            return f"the winner's rollout failed; GPUs {sorted(moved)} back on the incumbent"
        self.incumbent = await asyncio.to_thread(self.ops.fit, profile)
        self.knobs = apply_move(self.knobs, trial.move.candidate)
        self.measured = []  # measured against the old incumbent: a new comparison now
        with contextlib.suppress(OSError):
            await asyncio.to_thread(self.ops.save_profile, self.incumbent)
        await self._finish(record, "kept", f"adopted by a rollout to {len(rolled.done)} GPUs")
        return None

    async def _back_to(self, profile: Profile, gpus: list[int] | None = None) -> None:
        """Relaunch ``gpus`` (default: the canary GPU) on ``profile`` (the incumbent, or the
        line's best), verified."""
        self.phase = "rolling back"
        await self._status()
        async with self._heartbeat():
            result = await self._when_free(
                "rollback",
                lambda: self.ops.apply(profile, gpus or [self.gpu], self.on_event, measure=False),
            )
        # Out of service while it went back: exploration too (a rejected candidate's price).
        back = restart_gpu_seconds(result.reports)
        self.spent = replace(self.spent, explore_gpu_s=round(self.spent.explore_gpu_s + back, 3))
        failed = [r for r in result.reports if not r.ok]
        if result.refused or failed:
            raise RuntimeError(
                f"rollback to {profile.name} failed: "
                + "; ".join([*result.refused, *(f"GPU {r.gpu}: {r.failure}" for r in failed)])
            )

    async def _canary(
        self, profile: Profile, controls: list[int]
    ) -> tuple[CanaryResult | None, bool]:
        """Run the canary (once the operation lock is free), watching for a stop. (None, True)
        when it was cancelled.

        Raises:
            WaitStopped: a stop was asked while it waited for the lock (nothing was launched).
            LockWaitTimeout: the lock stayed held for ``lock_wait_s``.
        """

        async def stop_asked() -> bool:
            request = await asyncio.to_thread(read_request, self.started_at)
            return self._stop or (request is not None and request.request == "stop")

        async def attempt() -> tuple[CanaryResult | None, bool]:
            watch = CanaryWatch(self.gpu, self.options.poll_s, self.on_event)
            self.watch = watch
            canary = self.ops.canary(
                profile, self.gpu, watch.sink, self.options.canary, controls=controls
            )
            try:
                return await watch.run(canary, stop_asked, self._status)
            finally:
                self.watch = None

        async with self._heartbeat():  # Spent and the phase stay live through the window
            return await self._when_free("canary", attempt, lambda: self._checkpoint("canary"))
