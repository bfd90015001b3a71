"""The autotune search's state and its pacing: what it has recorded, its status document,
the operator's pause, resume and stop, and its waits for the fleet's operation lock.

``SearchState`` is the floor the search's steps stand on (``tui.autotune.trials``: a
candidate's canary, the line search, the rollout that adopts; ``tui.autotune.search``: the
climb), split by concept as ``tui.ops`` is; ``tui.autotune.search.Autotuner`` joins them.

A step that finds another operation holding the fleet's operation lock waits for it (bounded,
``AutotuneOptions.lock_wait_s``; the status names it under ``waiting_for``) instead of ending
the search (``tui.autotune.lockwait``). Neither that wait nor the operator's pause counts
against the wall budget (``tui.autotune.budget.WallClock``); a pause asked while a step waits
holds the step even once the lock is free.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from tui.autotune.budget import Spent, WallClock
from tui.autotune.lockwait import when_free
from tui.autotune.options import AutotuneOptions
from tui.autotune.record import CandidateRecord, candidate_entry, invalid_record, new_record
from tui.autotune.space import Candidate, candidate_profile
from tui.autotune.status import read_request, status_document, write_status
from tui.autotune.strategy import (
    apply_move,
    held_batch,
    kv_room,
    point_key,
    retracts,
    same_server,
    starves_kv,
)
from tui.autotune.watch import CanaryWatch
from tui.ops.events import EventSink
from tui.ops.journal import append
from tui.ops.lock import Holder
from tui.ops.service import FleetOps
from tui.profiles import Profile, ProfileError
from tui.retune.preflight import Preflight

T = TypeVar("T")


HEARTBEAT_S = 5.0
"""How often a long step (a rollout, a walk back) rewrites the status."""


class SearchState:
    """One search's state over ``options.space`` on the fleet ``ops`` drives.

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
        self.visited: set[str] = set()
        """Every point tried, rejected or skipped (``point_key``): never proposed again."""
        self.abandoned: set[str] = set()
        """Points whose canary the load changed under once: proposed once more, not again."""
        self.pending: dict[int, CandidateRecord] = {}
        """Candidates measured and not yet decided (a line search holds its best while it
        measures the next step): shown in the status beside the decided ones."""
        self.heartbeat_s = HEARTBEAT_S
        """How often a long step (a canary, a rollout, a walk back) rewrites the status."""
        self.measured: list[tuple[int, Preflight]] = []
        """(index, prediction) of every candidate measured against the incumbent: a move
        predicted to run one of these servers again is not canaried twice (reset when a
        winner is adopted)."""
        self.last_index = 0
        """The newest candidate's number (a line search holds one undecided while it
        measures the next, so the count of records is not the next number)."""

    def _next_index(self) -> int:
        """The next candidate's number (it names the candidate's profile too)."""
        self.last_index += 1
        return self.last_index

    def request_stop(self) -> None:
        """Stop as a stop request would (for SIGTERM/SIGINT to the search's process)."""
        self._stop = True

    async def _predict_one(
        self, move: Candidate, current: Preflight, visited: set[str], like: str = "the incumbent"
    ) -> Preflight | None:
        """``move``'s preflight when it may be tried: one that does not validate, is predicted
        not to fit, or to run exactly as ``current`` (``like`` names it) is recorded (rejected
        or skipped), marked visited and never launched (None)."""
        assert self.incumbent is not None
        index = self.last_index + 1  # taken only when recorded here (a canary takes its own)
        name = self._name(index)
        try:
            profile = await asyncio.to_thread(candidate_profile, self.incumbent, move, name)
            prediction = (await self.ops.preflight(profile, [self.gpu]))[0]
        except (ProfileError, ValueError) as exc:
            visited.add(point_key(apply_move(self.knobs, move)))
            self._reject(self._next_index(), move, name, f"does not validate: {exc}")
            return None
        tokens = self.options.mean_output_tokens
        starved = prediction.fits and (
            starves_kv(prediction, current, tokens) or retracts(prediction, current, tokens)
        )
        twin = next((i for i, p in self.measured if same_server(prediction, p)), None)
        if (
            prediction.fits
            and not same_server(prediction, current)
            and not starved
            and twin is None
        ):
            return prediction
        visited.add(point_key(apply_move(self.knobs, move)))
        index = self._next_index()
        record = new_record(index, move, name, self.incumbent.name, prediction)
        if not prediction.fits:
            self._decide(record, "rejected", prediction.why_not or "predicted not to fit")
        elif starved and retracts(prediction, current, tokens):
            self._decide(
                record,
                "skipped",
                f"predicted to retract: {prediction.max_running_effective} running on a KV pool "
                f"that holds about {held_batch(prediction, tokens):.0f} "
                f"({held_batch(current, tokens):.0f} on {like})",
            )
        elif starved:
            self._decide(
                record,
                "skipped",
                f"predicted to retract: the same batch of {prediction.max_running_effective} "
                f"with {kv_room(prediction, tokens):.0%} of a request's KV room "
                f"({kv_room(current, tokens):.0%} on {like})",
            )
        elif twin is not None and not same_server(prediction, current):
            self._decide(record, "skipped", f"predicted to run as #{twin}, measured already")
        else:
            self._decide(record, "skipped", f"predicted to run exactly as {like}")
        return None

    def _name(self, index: int) -> str:
        """Candidate profile names: the search's start minute and the candidate's index."""
        return f"autotune-{time.strftime('%m%d%H%M', time.localtime(self.started_at))}-{index}"

    def _reject(self, index: int, move: Candidate, name: str, why: str) -> None:
        assert self.incumbent is not None
        record = invalid_record(index, move, name, self.incumbent.name, why, self.gpu)
        self._decide(record, "rejected", why)

    def _decide(self, record: CandidateRecord, decision: str, why: str) -> CandidateRecord:
        self.pending.pop(record.index, None)
        done = replace(record, decision=decision, why=why, finished_at=time.time())
        self.records.append(done)
        append(candidate_entry(done))
        return done

    async def _finish(self, record: CandidateRecord, decision: str, why: str) -> None:
        self.current = None
        await asyncio.to_thread(self._decide, record, decision, why)
        await self._status()

    async def _when_free(
        self,
        what: str,
        step: Callable[[], Awaitable[T]],
        gate: Callable[[], Awaitable[bool]] | None = None,
    ) -> T:
        """Run ``step`` once no other operation holds the fleet (see ``tui.autotune.lockwait``);
        the status says whom it waits for meanwhile. ``gate`` (None for a step that must run,
        e.g. a rollback) is ``_checkpoint``: a pause asked while waiting holds the step even
        after the lock is free, and a stop ends the wait with nothing launched."""
        return await when_free(
            step,
            what=what,
            wait_s=self.options.lock_wait_s,
            poll_s=self.options.poll_s,
            on_wait=self._waiting,
            gate=gate,
        )

    async def _waiting(self, holder: Holder | None) -> None:
        # No "for N s": the status is written when the holder changes, and would keep the age
        # it had then; ``updated_at`` and the holder's own journal entry say how long.
        self.waiting_for = None if holder is None else f"{holder.operation} (pid {holder.pid})"
        if holder is None:
            self._wall.waited()
        else:
            self._wall.wait()
        await self._status()

    # --- control, status ----------------------------------------------------------------------

    def _tick(self) -> None:
        self.spent = replace(
            self.spent,
            wall_s=round(self._wall.elapsed(), 3),
            paused_s=round(self._wall.paused_s(), 3),
            waited_s=round(self._wall.waited_s(), 3),
        )

    async def _checkpoint(self, back_to: str = "searching") -> bool:
        """Obey pause/resume/stop between steps (and while a step waits for the fleet's lock);
        True when the search must stop. A resume returns to the phase ``back_to``."""
        while True:
            request = await asyncio.to_thread(read_request, self.started_at)
            what = request.request if request is not None else "resume"
            what = "stop" if self._stop else what
            if what == "stop":
                return True
            if what == "resume":
                self._wall.resume()
                if self.phase == "paused":
                    self.phase = back_to
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

    @contextlib.asynccontextmanager
    async def _heartbeat(self, every_s: float | None = None) -> AsyncIterator[None]:
        """Write the status every ``every_s`` (default ``heartbeat_s``) while a long step runs
        (a canary, a rollout of the winner, a walk back): seen in the demo, the status stood at
        its phase's first write for four minutes of rollout, and `Spent:` froze for a canary's
        whole baseline, restart and warm-up: the time spent frozen, and the screen could not
        tell a working search from a stuck one."""
        every_s = self.heartbeat_s if every_s is None else every_s

        async def beat() -> None:
            while True:
                await asyncio.sleep(every_s)  # a period, not a wait for something
                await self._status()

        task = asyncio.create_task(beat())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
