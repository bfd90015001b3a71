"""The autotune search: candidates tried as canaries, the winner rolled out, all through FleetOps.

One search at a time (``tui.autotune.status`` lock). Each step is its own operation of the
operations core (``FleetOps.canary``, ``apply`` to roll a canary GPU back, ``rollout`` to adopt
a winner), so each takes the operation lock, records the fleet state and is journalled; the
search adds an ``autotune-candidate`` entry per candidate and an ``autotune-summary`` at the end
(``tui.autotune.record``). The strategy is ``tui.autotune.strategy``'s; the budget
``tui.autotune.budget``'s.

A step that finds another operation holding the fleet's operation lock waits for it (bounded,
``AutotuneOptions.lock_wait_s``; the status names it under ``waiting_for``) instead of ending
the search (``tui.autotune.lockwait``).

Between steps the search reads the operator's requests (pause, resume, stop). A stop during a
canary cancels it as soon as the canary GPU is up (the engine's launch is never cut in half),
then the canary GPU goes back to the incumbent: a stopped search always leaves every GPU on the
incumbent. A search that is killed outright leaves each GPU on the profile the fleet state
records for it (every step records it); the next search reports the stale status it finds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from tui.autotune.budget import Spent, WallClock, exploration_cost
from tui.autotune.fleet import searchable_fleet
from tui.autotune.lockwait import WaitStopped, when_free
from tui.autotune.options import AutotuneOptions, SearchRefused, SearchResult
from tui.autotune.record import (
    CandidateRecord,
    candidate_entry,
    history_point,
    invalid_record,
    measured,
    new_record,
    summary_entry,
)
from tui.autotune.space import Candidate, candidate_profile, knobs_of
from tui.autotune.status import (
    lock_file,
    read_request,
    spent_json,
    stale_summary,
    status_document,
    write_status,
)
from tui.autotune.strategy import (
    Ranked,
    apply_move,
    neighbours,
    point_key,
    rank,
    same_server,
)
from tui.autotune.watch import CanaryWatch
from tui.ops.events import EventSink
from tui.ops.journal import append
from tui.ops.lock import Holder, OperationBusy, operation_lock
from tui.ops.service import FleetOps
from tui.profiles import Profile, ProfileError
from tui.retune.preflight import Preflight
from tui.rollout.canary import CanaryResult
from tui.state.fleet_state import profile_of

T = TypeVar("T")


class Autotuner:
    """One search over ``options.space`` on the fleet ``ops`` drives.

    Args:
        ops: The operations core (its journal's ``by`` should be 'autotune').
        options: Space, budget, measuring options.
        on_event: Receives every operation event of the steps.
    """

    def __init__(
        self, ops: FleetOps, options: AutotuneOptions, on_event: EventSink | None = None
    ) -> None:
        self.ops = ops
        self.options = options
        self.on_event = on_event
        self.records: list[CandidateRecord] = []
        self.history: list[dict[str, Any]] = []
        self.spent = Spent()
        self.phase = "starting"
        self.reason = ""
        self.current: CandidateRecord | None = None
        self.started_at = time.time()
        self._wall = WallClock()
        self.gpu = -1
        self.incumbent: Profile | None = None
        self.knobs: dict[str, Any] = {}
        self.stale: dict[str, Any] | None = None
        self._stop = False
        self.watch: CanaryWatch | None = None
        """The canary being run, if any (its GPU up or not, its latest look)."""
        self.waiting_for: str | None = None
        """The operation holding the fleet's lock that the next step waits for, if any."""

    def request_stop(self) -> None:
        """Stop as a stop request would (for SIGTERM/SIGINT to the search's process)."""
        self._stop = True

    async def run(self) -> SearchResult:
        """Run the search to its end.

        Raises:
            SearchRefused: another search runs, or the fleet cannot be searched (nothing ran).
        """
        errors = self.options.budget.errors() + self.options.canary.errors()
        if errors:
            raise SearchRefused("; ".join(errors))
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(operation_lock("autotune search", lock_file()))
            except OperationBusy as busy:
                raise SearchRefused(str(busy).replace("changing the fleet", "searching")) from None
            self.stale = await asyncio.to_thread(stale_summary)
            return await self._run(self.stale)

    async def _run(self, stale: dict[str, Any] | None) -> SearchResult:
        gpus, incumbent = await asyncio.to_thread(self._fleet)
        first = incumbent.name
        self.incumbent = incumbent
        self.knobs = knobs_of(incumbent, self.options.space)
        controls = [g for g in gpus if g != self.gpu]
        self.phase = "searching"
        await self._status()
        ok = True
        try:
            self.reason = await self._climb(controls)
            self.phase = "stopped" if self.reason.startswith("stopped") else "finished"
        except Exception as exc:  # a step refused or failed: the fleet state says what runs
            ok = False
            self.phase, self.reason = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            self.current = None
            await self._status()
            entry = summary_entry(
                self.started_at,
                ok,
                tuple(gpus),
                first,
                self.incumbent.name,
                self.reason,
                self.records,
                spent_json(self.spent),
            )
            await asyncio.to_thread(append, entry)
        return SearchResult(
            self.phase, self.reason, self.incumbent.name, tuple(self.records), self.spent, stale
        )

    def _fleet(self) -> tuple[list[int], Profile]:
        gpus, self.gpu, doc = searchable_fleet(self.options.gpu)
        return gpus, self.ops.fit(profile_of(doc))

    # --- the climb --------------------------------------------------------------------------

    async def _climb(self, controls: list[int]) -> str:
        visited = {point_key(self.knobs)}
        while True:
            if await self._checkpoint():
                return "stopped by the operator"
            self._tick()
            why = self.spent.exhausted(self.options.budget)
            if why:
                return why
            moves = [
                c
                for c in neighbours(self.options.space, self.knobs)
                if point_key(apply_move(self.knobs, c)) not in visited
            ]
            if not moves:
                return "no untried neighbour fits: the incumbent is a local optimum"
            ranked = await self._predict(moves, visited)
            await self._status()
            if not ranked:
                continue  # every move of this round was rejected or skipped: none is left
            best = ranked[0]
            visited.add(point_key(apply_move(self.knobs, best.candidate)))
            outcome = await self._try(best, controls)
            if outcome is not None:
                return outcome

    async def _predict(self, moves: list[Candidate], visited: set[str]) -> list[Ranked]:
        """Preflight every move; record (and never launch) the ones that will not fit."""
        assert self.incumbent is not None
        predicted: list[tuple[Candidate, Preflight]] = []
        current = (await self.ops.preflight(self.incumbent, [self.gpu]))[0]
        for move in moves:
            name = self._name(len(self.records) + 1)
            try:
                profile = await asyncio.to_thread(candidate_profile, self.incumbent, move, name)
                prediction = (await self.ops.preflight(profile, [self.gpu]))[0]
            except (ProfileError, ValueError) as exc:
                visited.add(point_key(apply_move(self.knobs, move)))
                self._reject(len(self.records) + 1, move, name, f"does not validate: {exc}")
                continue
            if not prediction.fits:
                visited.add(point_key(apply_move(self.knobs, move)))
                record = new_record(
                    len(self.records) + 1, move, name, self.incumbent.name, prediction
                )
                self._decide(record, "rejected", prediction.why_not or "predicted not to fit")
                continue
            if same_server(prediction, current):
                visited.add(point_key(apply_move(self.knobs, move)))
                record = new_record(
                    len(self.records) + 1, move, name, self.incumbent.name, prediction
                )
                self._decide(record, "skipped", "predicted to run exactly as the incumbent")
                continue
            predicted.append((move, prediction))
        # The feasible moves not tried now are predicted again next round (against the
        # incumbent then, with what the servers printed since).
        return rank(predicted, self.options.mean_output_tokens)

    def _name(self, index: int) -> str:
        """Candidate profile names: the search's start minute and the candidate's index."""
        return f"autotune-{time.strftime('%m%d%H%M', time.localtime(self.started_at))}-{index}"

    def _reject(self, index: int, move: Candidate, name: str, why: str) -> None:
        assert self.incumbent is not None
        record = invalid_record(index, move, name, self.incumbent.name, why, self.gpu)
        self._decide(record, "rejected", why)

    def _decide(self, record: CandidateRecord, decision: str, why: str) -> CandidateRecord:
        done = replace(record, decision=decision, why=why, finished_at=time.time())
        self.records.append(done)
        append(candidate_entry(done))
        return done

    async def _try(self, best: Ranked, controls: list[int]) -> str | None:
        """Canary ``best``; keep or drop it. Returns why the search ends, or None to go on."""
        assert self.incumbent is not None
        index = len(self.records) + 1
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
            await self._back_to_incumbent()
            await self._finish(record, "stopped", "stopped by the operator during its canary")
            return "stopped by the operator"
        cost = exploration_cost(result)
        self.spent = replace(
            self.spent,
            explore_gpu_s=round(self.spent.explore_gpu_s + cost, 3),
            canaries=self.spent.canaries + 1,
        )
        record = measured(record, result, cost)
        self.history.append(history_point(record))
        if stop:
            await self._back_to_incumbent()
            await self._finish(record, "stopped", "stopped by the operator; measured first")
            return "stopped by the operator"
        if not result.ok:
            await self._back_to_incumbent()
            await self._finish(record, "failed", result.describe().splitlines()[0])
            return None
        tok = result.tokens
        assert tok is not None
        if result.verdict == "better" and tok.rel_low > 0:
            return await self._adopt(profile, record, best)
        await self._back_to_incumbent()
        why = f"{result.verdict}: rolled back to {self.incumbent.name}"
        await self._finish(record, "dropped", why)
        limit = self.options.budget.max_regression
        if tok.relative < -limit:
            return (
                f"regression budget: candidate #{index} measured {tok.relative:+.1%} < -{limit:.0%}"
            )
        return None

    async def _adopt(self, profile: Profile, record: CandidateRecord, best: Ranked) -> str | None:
        """Roll the winner out to every GPU; on a failure walk the moved GPUs back."""
        self.phase = "adopting"
        await self._status()
        rolled = await self._when_free(
            "rollout",
            lambda: self.ops.rollout(profile, 1, None, self.on_event, self.options.rollout),
        )
        if not rolled.ok:
            moved = [g for g in rolled.done if g != self.gpu] + [self.gpu]
            await self._back_to_incumbent(moved)
            await self._finish(record, "failed", f"rollout failed: {rolled.describe()}")
            return f"the winner's rollout failed; GPUs {sorted(moved)} back on the incumbent"
        self.incumbent = await asyncio.to_thread(self.ops.fit, profile)
        self.knobs = apply_move(self.knobs, best.candidate)
        with contextlib.suppress(OSError):
            await asyncio.to_thread(self.ops.save_profile, self.incumbent)
        await self._finish(
            record, "kept", f"better: adopted by a rollout to {len(rolled.done)} GPUs"
        )
        return None

    async def _finish(self, record: CandidateRecord, decision: str, why: str) -> None:
        self.current = None
        await asyncio.to_thread(self._decide, record, decision, why)
        await self._status()

    async def _back_to_incumbent(self, gpus: list[int] | None = None) -> None:
        """Relaunch ``gpus`` (default: the canary GPU) on the incumbent, verified."""
        assert self.incumbent is not None
        self.phase = "rolling back"
        await self._status()
        incumbent = self.incumbent
        result = await self._when_free(
            "rollback",
            lambda: self.ops.apply(incumbent, gpus or [self.gpu], self.on_event, measure=False),
        )
        failed = [r for r in result.reports if not r.ok]
        if result.refused or failed:
            raise RuntimeError(
                "rollback to the incumbent failed: "
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

        return await self._when_free("canary", attempt, stop_asked)

    async def _when_free(
        self,
        what: str,
        step: Callable[[], Awaitable[T]],
        stop_asked: Callable[[], Awaitable[bool]] | None = None,
    ) -> T:
        """Run ``step`` once no other operation holds the fleet (see ``tui.autotune.lockwait``);
        the status says whom it waits for meanwhile."""
        return await when_free(
            step,
            what=what,
            wait_s=self.options.lock_wait_s,
            poll_s=self.options.poll_s,
            on_wait=self._waiting,
            stop_asked=stop_asked,
        )

    async def _waiting(self, holder: Holder | None) -> None:
        # No "for N s": the status is written when the holder changes, and would keep the age
        # it had then; ``updated_at`` and the holder's own journal entry say how long.
        self.waiting_for = None if holder is None else f"{holder.operation} (pid {holder.pid})"
        await self._status()

    # --- control, status ----------------------------------------------------------------------

    def _tick(self) -> None:
        self.spent = replace(
            self.spent,
            wall_s=round(self._wall.elapsed(), 3),
            paused_s=round(self._wall.paused_s(), 3),
        )

    async def _checkpoint(self) -> bool:
        """Obey pause/resume/stop between steps; True when the search must stop."""
        while True:
            request = await asyncio.to_thread(read_request, self.started_at)
            what = request.request if request is not None else "resume"
            what = "stop" if self._stop else what
            if what == "stop":
                return True
            if what == "resume":
                self._wall.resume()
                if self.phase == "paused":
                    self.phase = "searching"
                    await self._status()
                return False
            self._wall.pause()  # the operator's pause is not the search's time
            if self.phase != "paused":
                self.phase = "paused"
                await self._status()
            await asyncio.sleep(self.options.poll_s)

    async def _status(self) -> None:
        self._tick()
        await asyncio.to_thread(write_status, status_document(self))
