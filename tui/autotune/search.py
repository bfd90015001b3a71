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
from collections.abc import Sequence
from typing import Any

from tui.autotune.fleet import searchable_fleet
from tui.autotune.jumps import whole_moves
from tui.autotune.options import SearchRefused, SearchResult
from tui.autotune.record import summary_entry
from tui.autotune.space import Candidate, candidate_profile, knobs_of
from tui.autotune.status import lock_file, spent_json, stale_summary
from tui.autotune.strategy import (
    Ranked,
    apply_move,
    neighbours,
    point_key,
    rank,
    with_room,
)
from tui.autotune.trials import Trials
from tui.ops.journal import append
from tui.ops.lock import OperationBusy, operation_lock
from tui.profiles import Profile, ProfileError
from tui.retune.preflight import Preflight
from tui.state.fleet_state import profile_of


class Autotuner(Trials):
    """One search over ``options.space`` on the fleet ``ops`` drives: the climb
    (``tui.autotune.strategy``) over the trials (``tui.autotune.trials``).

    Args:
        ops: The operations core (its journal's ``by`` should be 'autotune').
        options: Space, budget, measuring options.
        on_event: Receives every operation event of the steps.
    """

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
        visited = self.visited
        visited.add(point_key(self.knobs))
        while True:
            if await self._checkpoint():
                return "stopped by the operator"
            self._tick()
            why = self.spent.exhausted(self.options.budget)
            if why:
                return why
            every = neighbours(self.options.space, self.knobs)
            tried = [c for c in every if point_key(apply_move(self.knobs, c)) in visited]
            moves = [c for c in every if c not in tried]
            ranked = await self._predict(moves, visited, tried)
            await self._status()
            if not ranked:
                if not moves:
                    return "no untried neighbour fits: the incumbent is a local optimum"
                continue  # every move of this round was rejected or skipped: none is left
            best = ranked[0]
            visited.add(point_key(apply_move(self.knobs, best.candidate)))
            outcome = await self._try(best, controls)
            if outcome is not None:
                return outcome

    async def _predict(
        self, moves: list[Candidate], visited: set[str], tried: Sequence[Candidate] = ()
    ) -> list[Ranked]:
        """Preflight every move; record (and never launch) the ones that will not fit. Each
        move, and each of ``tried`` (moves already measured or recorded), may bring its variant
        with more memory (``strategy.with_room``): a move that measured worse because it
        outgrew the KV pool is exactly the one whose variant may gain."""
        assert self.incumbent is not None
        current = (await self.ops.preflight(self.incumbent, [self.gpu]))[0]
        predicted: list[tuple[Candidate, Preflight]] = []
        tokens = self.options.mean_output_tokens
        whole = await whole_moves(self.options.space, self.knobs, current, self._raw, tokens)
        moves = moves + [
            j
            for j in whole
            if j not in moves and point_key(apply_move(self.knobs, j)) not in visited
        ]
        for move in moves:
            prediction = await self._predict_one(move, current, visited)
            if prediction is not None:
                predicted.append((move, prediction))
                predicted += await self._roomier(move, prediction, current, visited)
        for move in tried:
            try:
                profile = await asyncio.to_thread(candidate_profile, self.incumbent, move, "tried")
                prediction = (await self.ops.preflight(profile, [self.gpu]))[0]
            except (ProfileError, ValueError):
                continue
            if prediction.fits:
                predicted += await self._roomier(move, prediction, current, visited)
        # The feasible moves not tried now are predicted again next round (against the
        # incumbent then, with what the servers printed since).
        return rank(predicted, self.options.mean_output_tokens)

    async def _raw(self, move: Candidate) -> Preflight | None:
        """``move``'s preflight on the canary GPU, nothing recorded (None: it does not
        validate): the whole moves' probes of a pool and a fraction."""
        assert self.incumbent is not None
        try:
            profile = await asyncio.to_thread(candidate_profile, self.incumbent, move, "probe")
            return (await self.ops.preflight(profile, [self.gpu]))[0]
        except (ProfileError, ValueError):
            return None

    async def _roomier(
        self, move: Candidate, prediction: Preflight, current: Preflight, visited: set[str]
    ) -> list[tuple[Candidate, Preflight]]:
        """``move``'s variant with more memory, predicted, when it has one not yet visited."""
        tokens = self.options.mean_output_tokens
        roomier = with_room(self.options.space, self.knobs, move, prediction, current, tokens)
        if roomier is None or point_key(apply_move(self.knobs, roomier)) in visited:
            return []
        more = await self._predict_one(roomier, current, visited)
        return [] if more is None else [(roomier, more)]
