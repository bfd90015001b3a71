"""The simulated scheduler: continuous batching on virtual time, one asyncio task, no busy loop.

Each iteration is, as in SGLang's event loop, either a prefill batch or a decode step. A prefill
batch takes waiting requests while a running slot is free, up to ``chunked_prefill_size`` tokens;
a longer prompt is prefilled in chunks, one ``Prefill batch`` line each, at the model's prefill
rate, and decoding pauses meanwhile (no mixed chunks, SGLang's default). A decode step advances
every running request by the accept length (step time ``(t0 + t1*b) / speed``, with the
speculative steps and the CUDA-graph ceiling, see ``tui.sim.throughput``); a ``Decode batch``
line every ``--decode-log-interval`` steps.

Instead of sleeping per step it wakes at most every ``TICK_S`` (or at the next completion) and
runs every whole iteration that fits in the elapsed time, so CPU cost does not grow with
``--sim-speed``. Idle, it waits on an event.

The KV pool bounds both (SGLang 0.5.23's rules, each cited in ``tui.sim.kvpool``): a waiting
request is admitted only while the pool can hold its reservation at the current
``new_token_ratio``, and a decode step whose tokens do not fit retracts running requests (fewest
generated first) back to the front of the queue with SGLang's ``KV cache pool is full. Retract
requests.`` WARNING; they are prefilled again, generated tokens too (the lost work), and the
ratio jumps up, then decays again step by step.

Faults (``tui.sim.faults``) act here: ``stall(STUCK)`` stops all progress but still answers health
probes, ``stall(HUNG)`` answers nothing, ``retract(n)`` sends n running requests back to the
queue the same way. Counters follow SGLang: ``prompt/generation_tokens_total`` and
``num_requests_total`` move when a request finishes (the tokenizer side), ``realtime_tokens``
moves every iteration (the scheduler side); health probes count in neither of the first.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import deque
from collections.abc import Callable
from enum import Enum

from tui.sglang.models import ModelSpec
from tui.sglang.plan_types import MemoryPlan
from tui.sim import batch_lines, kvpool, logfmt
from tui.sim.latency import LatencyRecorder
from tui.sim.requests import Batch, SimRequest, new_request, next_batch
from tui.sim.throughput import accept_length, step_seconds

__all__ = ["Mode", "SimRequest", "SimScheduler", "step_seconds"]

ADMIT_RECHECK_STEPS = 10
"""Most decode steps run between two admission checks while requests wait (the ratio decays
every step; SGLang checks every iteration, this bounds the lag to a few steps)."""

TICK_S = 0.05
"""Longest wall time between two scheduler wake-ups while busy."""

MIN_SLEEP_S = 0.005
"""Shortest sleep, so a burst of completions cannot spin the loop."""


class Mode(Enum):
    """How the scheduler behaves."""

    RUNNING = "running"
    """Serving."""
    STUCK = "stuck"
    """No progress; health probes are still answered."""
    HUNG = "hung"
    """Nothing at all (the process is wedged, or gone)."""


class SimScheduler:
    """Continuous-batching scheduler for one simulated server."""

    def __init__(
        self,
        plan: MemoryPlan,
        model: ModelSpec,
        *,
        speed: float,
        decode_log_interval: int,
        emit: Callable[[str], None],
        seed: int = 0,
        on_output: Callable[[], None] | None = None,
    ) -> None:
        """Create it (call ``run`` as a task to start it).

        Args:
            plan: the server's memory plan (cap, KV tokens, Mamba slots, chunk size).
            model: the served model (step-time constants, prefill rate).
            speed: ``--sim-speed``.
            decode_log_interval: decode steps between two ``Decode batch`` lines.
            emit: writes one log message (the server stamps it).
            seed: random seed for output lengths.
            on_output: called whenever output reaches the tokenizer side (``/health`` waits
                for it).
        """
        self.plan = plan
        self.model = model
        self.speed = speed
        self.interval = decode_log_interval
        self.emit = emit
        self.on_output = on_output or (lambda: None)
        self.rng = random.Random(seed)
        self.accept = accept_length(model, plan)
        self.chunk = max(plan.chunked_prefill_size, 1)
        self.mode = Mode.RUNNING
        self.graphs = True
        """False when the server captured no CUDA graph: every decode batch runs eagerly."""
        self.prefill_graphs = False
        """0.5.17's prefill CUDA graphs were captured: a prefill batch replays one (its line
        says ``cuda graph: True``; a health probe's one-token batch ran eagerly, as recorded)."""
        self.slow_health_s: float | None = None
        self.latency = LatencyRecorder()
        """The latency histograms ``/metrics`` exports (``tui.sim.latency``)."""
        self.waiting: deque[SimRequest] = deque()
        self.prefilling: SimRequest | None = None
        self.running: list[SimRequest] = []
        self.steps = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.requests_total = 0
        self.realtime_tokens: dict[str, float] = {"prefill_compute": 0.0, "decode": 0.0}
        self.retracted_total = 0
        self.last_retracted = 0
        self.last_gen_throughput = 0.0
        self.ratio = kvpool.NewTokenRatio()
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._resume = asyncio.Event()
        self._log_tokens = 0.0
        self._log_at = time.monotonic()

    # --- submission -------------------------------------------------------------------------

    def submit(
        self,
        rid: str,
        prompt_tokens: int,
        max_tokens: int | None,
        ignore_eos: bool,
        *,
        log_metrics: bool = True,
    ) -> SimRequest:
        """Queue a request; await ``request.done`` for its completion.

        Args:
            rid: request id (``HEALTH_CHECK_...`` for a health probe).
            prompt_tokens: input length.
            max_tokens: the request's bound on output tokens.
            ignore_eos: generate exactly max_tokens.
            log_metrics: count it in the token and request counters.

        Returns:
            The queued request.
        """
        loop = asyncio.get_running_loop()
        req = new_request(self.plan, self.rng, rid, prompt_tokens, max_tokens, ignore_eos, loop)
        req.log_metrics = log_metrics
        if req.is_health_check and self.slow_health_s is not None:
            loop.call_later(self.slow_health_s, self._answer_probe, req)
            return req
        if req.is_health_check and self.mode is Mode.STUCK:
            loop.call_soon(self._answer_probe, req)  # the stuck batch does not hold probes
            return req
        self.waiting.append(req)
        self._wake.set()
        return req

    def abort(self, req: SimRequest) -> None:
        """Drop a request whose client went away (or a health probe that was answered)."""
        if req in self.waiting:
            self.waiting.remove(req)
        if req in self.running:
            self.running.remove(req)
            self._changed.set()
        if self.prefilling is req:
            self.prefilling = None
        if not req.done.done():
            req.done.cancel()

    def _answer_probe(self, req: SimRequest) -> None:
        if self.mode is Mode.HUNG or req.done.done():
            return
        req.generated = float(req.target_tokens)
        req.done.set_result(None)
        self.on_output()

    # --- faults -----------------------------------------------------------------------------

    def stall(self, mode: Mode) -> None:
        """Stop making progress (STUCK: still answers probes; HUNG: answers nothing)."""
        self.mode = mode

    def retract(self, count: int | None = None) -> None:
        """SGLang's retraction (``retract_decode``): running requests go back to the front of
        the queue, fewest generated tokens first, and the token ratio jumps up.

        Args:
            count: Retract exactly this many (the ``retract`` fault); None: until the next
                decode step fits in the KV pool.
        """
        free = self.plan.max_total_num_tokens - self.used_tokens()
        victims = kvpool.retraction_victims(self.plan, self.running, free, count)
        if not victims:
            return
        old = self.ratio.current
        for req in victims:
            self.running.remove(req)
            req.prefilled = 0  # its KV is freed: prompt and output are prefilled again
        # SGLang's FCFS queue is ordered by arrival (schedule_policy.py
        # _sort_by_priority_and_fcfs), so the retracted, older requests go first.
        self.waiting.extendleft(sorted(victims, key=lambda r: r.created, reverse=True))
        self.ratio.current = kvpool.ratio_after_retract(self.running)
        self.retracted_total += len(victims)
        self.last_retracted = len(victims)
        self._changed.set()
        self._wake.set()
        freed = sum(kvpool.held_tokens(r) for r in victims)
        self.emit(logfmt.retract_line(self.plan, len(victims), freed, old, self.ratio.current))

    # --- state the HTTP layer reads ---------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Requests running, being prefilled or queued."""
        return len(self.running) + len(self.waiting) + (self.prefilling is not None)

    def used_tokens(self) -> int:
        """KV tokens held by running (and prefilling) requests."""
        held = sum(r.prompt_tokens + int(r.generated) for r in self.running)
        return held + (self.prefilling.prefilled if self.prefilling is not None else 0)

    def token_usage(self) -> float:
        """Full-attention KV usage, 0..1."""
        total = self.plan.max_total_num_tokens
        return min(self.used_tokens() / total, 1.0) if total else 0.0

    def mamba_num(self) -> int:
        """Mamba slots in use (measured occupancy is about one below the reserved ratio)."""
        if not self.plan.is_hybrid_mamba:
            return 0
        per_req = max(self.plan.mamba_slots_per_request - 1, 1)
        return min(len(self.running) * per_req, self.plan.max_mamba_cache_size)

    def mamba_usage(self) -> float:
        """Mamba usage, 0..1."""
        slots = self.plan.max_mamba_cache_size
        return self.mamba_num() / slots if slots else 0.0

    def utilization(self) -> float:
        """GPU busy percent implied by the batch (0 idle)."""
        if not self.running or self.mode is not Mode.RUNNING:
            return 0.0
        cap = max(self.plan.max_running_requests, 1)
        return min(99.0, 45.0 + 54.0 * len(self.running) / cap)

    async def wait_changed(self) -> None:
        """Wait until the batch size changes (for the telemetry publisher)."""
        self._changed.clear()
        await self._changed.wait()

    # --- prefill ----------------------------------------------------------------------------

    def _prefill_batch(self) -> Batch:
        """The next prefill batch: (request, tokens this batch) pairs, or [] when none is due."""
        room = self.plan.max_running_requests - len(self.running) - (self.prefilling is not None)
        return next_batch(self.prefilling, self.waiting, room, self.chunk, self._kv_room())

    def _kv_room(self) -> float | None:
        """``rem_total_tokens`` (None when the plan has no KV pool to bound admission)."""
        if self.plan.max_total_num_tokens <= 0:
            return None
        holders = self.running + ([self.prefilling] if self.prefilling is not None else [])
        return kvpool.remaining_total(
            self.plan.max_total_num_tokens, self.used_tokens(), holders, self.ratio.current
        )

    def _decode_room(self) -> int | None:
        """Decode steps that fit in the KV pool before the next check (None: no pool), after
        retracting if the next one does not fit (``update_running_batch``)."""
        pool = self.plan.max_total_num_tokens
        if pool <= 0:
            return None
        if not kvpool.decode_fits(self.plan, pool - self.used_tokens(), len(self.running)):
            self.retract()
        free = pool - self.used_tokens()
        return kvpool.decode_steps_that_fit(self.plan, free, len(self.running), self.accept)

    def _prefill_seconds(self, tokens: int) -> float:
        return tokens / self.model.prefill_tokens_per_s / self.speed

    def _run_prefill(self, batch: Batch, seconds: float, clock: float | None = None) -> None:
        clock = time.monotonic() if clock is None else clock  # when the batch began
        tokens = sum(take for _, take in batch)
        running_before = len(self.running)
        new = [req for req, _ in batch if req is not self.prefilling]
        for req in new:
            self.waiting.remove(req)
        self.latency.admitted(
            (r.created for r in new if r.first_token_at is None and r.log_metrics), clock
        )
        done_at = clock + seconds
        for req, take in batch:
            req.prefilled += take
        self.realtime_tokens["prefill_compute"] += tokens
        self.prefilling = None
        finished = False
        for req, _ in batch:
            if req.prefill_left > 0:
                self.prefilling = req  # chunked: the rest goes in the next batch
            elif req.target_tokens <= 1 or req.generated >= req.target_tokens:
                req.generated = float(max(req.target_tokens, 1))
                self._first_token(req, done_at)
                self._complete(req, done_at)
                finished = True
            else:
                self._first_token(req, done_at)
                self.running.append(req)
                self._changed.set()
        graphed = self.prefill_graphs and not all(req.is_health_check for req, _ in batch)
        self.emit(
            batch_lines.prefill_stats(self, len(new), tokens, running_before, seconds, graphed)
        )
        if finished:
            self.on_output()

    # --- decode -----------------------------------------------------------------------------

    def _first_token(self, req: SimRequest, at: float) -> None:
        if req.first_token_at is None:
            req.first_token_at = at
            if req.log_metrics:
                self.latency.first_token(req.created, at)

    def _complete(self, req: SimRequest, at: float) -> None:
        if req.log_metrics:
            self.latency.finished(req.created, at)
            self.requests_total += 1
            self.prompt_tokens_total += req.prompt_tokens
            self.generation_tokens_total += req.target_tokens
        if not req.done.done():
            req.done.set_result(None)

    def _finish(self, at: float) -> None:
        still = [r for r in self.running if r.generated < r.target_tokens]
        if len(still) == len(self.running):
            return
        for req in self.running:
            if req.generated >= req.target_tokens:
                self._complete(req, at)
        self.running = still
        self._changed.set()

    def _log_decode(self, now: float) -> None:
        elapsed = max(now - self._log_at, 1e-9)
        self.last_gen_throughput = self._log_tokens / elapsed
        self._log_tokens = 0.0
        self._log_at = now
        self.emit(batch_lines.decode_stats(self, self.last_gen_throughput))

    def _decode(self, budget: float, clock: float) -> tuple[float, float]:
        """Run the decode steps that fit (stopping at a completion, a log line, the KV pool's
        next check or, while requests wait, the next admission check)."""
        step = step_seconds(self.model, len(self.running), self.speed, self.plan)
        fit = int(budget // step)
        if fit <= 0:
            return budget, clock
        retracted = self.retracted_total
        room = self._decode_room()
        step = step_seconds(self.model, len(self.running), self.speed, self.plan)
        fit = max(int(budget // step), 1)  # the step the budget held before a retraction shrank it
        to_finish = min(
            math.ceil((r.target_tokens - r.generated) / self.accept) for r in self.running
        )
        to_log = self.interval - self.steps % self.interval
        k = max(1, min(fit, to_finish, to_log))
        if room is not None:
            k = min(k, room)
        if self.waiting:
            k = min(k, ADMIT_RECHECK_STEPS)
        # update_running_batch decays the ratio on every decode step that did not retract.
        self.ratio.decay(k - (self.retracted_total != retracted))
        gained = k * self.accept
        for req in self.running:
            req.generated += gained
        produced = gained * len(self.running)
        self.latency.decoded(step, self.accept, produced)
        self.realtime_tokens["decode"] += produced
        self._log_tokens += produced
        self.steps += k
        budget -= k * step
        clock += k * step
        if self.steps % self.interval == 0:
            self._log_decode(clock)
        self._finish(clock)
        self.on_output()  # outputs stream back every few steps: the tokenizer hears from us
        return budget, clock

    def advance(self, budget: float, now: float) -> float:
        """Run every whole iteration that fits in ``budget`` wall seconds; return the rest.

        A late wake-up catches up several log intervals at once: each step is stamped at the
        time it would have run (``now - budget`` onwards), so a decode line's throughput is
        tokens over the interval's own duration, never over the microseconds between two
        lines written in one catch-up (which once printed 1.9e12 tok/s).
        """
        clock = now - budget
        while self.mode is Mode.RUNNING:
            batch = self._prefill_batch()
            if batch:
                seconds = self._prefill_seconds(sum(take for _, take in batch))
                if seconds > budget:
                    return budget
                self._run_prefill(batch, seconds, clock)
                budget -= seconds
                clock += seconds
                continue
            if not self.running:
                return 0.0
            left, clock = self._decode(budget, clock)
            if left == budget:
                return budget
            budget = left
        return 0.0

    def _next_sleep(self) -> float:
        batch = self._prefill_batch()
        if batch:
            wait = self._prefill_seconds(sum(take for _, take in batch))
        elif self.running:
            step = step_seconds(self.model, len(self.running), self.speed, self.plan)
            to_finish = min(
                math.ceil((r.target_tokens - r.generated) / self.accept) for r in self.running
            )
            wait = to_finish * step
        else:
            wait = TICK_S
        return min(TICK_S, max(MIN_SLEEP_S, wait))

    def _has_work(self) -> bool:
        return bool(self.running or self.waiting or self.prefilling is not None)

    async def run(self) -> None:
        """Serve until cancelled; a stalled scheduler waits for ever (as a wedged one does)."""
        carry = 0.0
        last = time.monotonic()
        while True:
            if self.mode is not Mode.RUNNING:
                await self._resume.wait()  # never set: a stall lasts until the process ends
            if not self._has_work():
                self.ratio.reset()  # SGLang resets it when the scheduler goes idle
                self._wake.clear()
                await self._wake.wait()
                last = time.monotonic()
                carry = 0.0
                continue
            await asyncio.sleep(self._next_sleep())
            now = time.monotonic()
            carry = self.advance(carry + now - last, now)
            last = now
