"""The simulated scheduler: continuous batching on virtual time, one asyncio task, no busy loop.

It admits at most the effective max_running_requests, queues the rest, and advances decode steps
by the model in ``tui.sim.throughput`` (step time ``(t0 + t1*b) / speed``, ``A`` tokens per request
per step). Instead of sleeping per step it wakes at most every ``TICK_S`` (or at the next
completion) and advances all whole steps that fit in the elapsed time, jumping straight to the next
completion or log boundary, so CPU cost does not grow with ``--sim-speed``. Idle, it waits on an
event.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from tui.sglang.models import ModelSpec
from tui.sglang.plan_types import MemoryPlan
from tui.sim import logfmt
from tui.sim.throughput import DEFAULT_MEAN_OUTPUT_TOKENS, accept_length, step_seconds

TICK_S = 0.05
"""Longest wall time between two scheduler wake-ups while busy."""

MIN_SLEEP_S = 0.005
"""Shortest sleep, so a burst of completions cannot spin the loop."""


@dataclass(eq=False)
class SimRequest:
    """One request inside the scheduler (mutable: it advances as it decodes)."""

    rid: str
    """Request id."""
    prompt_tokens: int
    """Input length."""
    target_tokens: int
    """Tokens it will generate."""
    capped: bool
    """True when ``target_tokens`` came from the request's max tokens (finish_reason length)."""
    done: asyncio.Future[None]
    """Resolved when the last token is generated."""
    created: float = field(default_factory=time.monotonic)
    """Submission time (wall, monotonic)."""
    generated: float = 0.0
    """Tokens generated so far (fractional: accept length is a mean)."""
    first_token_at: float | None = None
    """When decoding started."""


class DrainingError(RuntimeError):
    """Raised by submit when the server is shutting down."""


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
    ) -> None:
        """Create it (call ``run`` as a task to start it).

        Args:
            plan: the server's memory plan (cap, KV tokens, Mamba slots).
            model: the served model (step-time constants).
            speed: ``--sim-speed``.
            decode_log_interval: decode steps between two ``Decode batch`` lines.
            emit: writes one log message (the server stamps it).
            seed: random seed for output lengths.
        """
        self.plan = plan
        self.model = model
        self.speed = speed
        self.interval = decode_log_interval
        self.emit = emit
        self.rng = random.Random(seed)
        self.accept = accept_length(model, plan)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.draining = False
        self.steps = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.requests_total = 0
        self.last_gen_throughput = 0.0
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._log_tokens = 0.0
        self._log_at = time.monotonic()

    # --- submission -------------------------------------------------------------------------

    def sample_output_tokens(self, max_tokens: int | None, ignore_eos: bool) -> tuple[int, bool]:
        """Output length: exactly ``max_tokens`` with ignore_eos, else a lognormal draw it caps.

        Args:
            max_tokens: the request's bound, or None.
            ignore_eos: generate exactly ``max_tokens``.

        Returns:
            (tokens, hit_the_bound).
        """
        if ignore_eos and max_tokens is not None:
            return max_tokens, True
        sigma = 0.5
        mu = math.log(DEFAULT_MEAN_OUTPUT_TOKENS) - sigma * sigma / 2
        drawn = max(16, int(self.rng.lognormvariate(mu, sigma)))
        if max_tokens is not None and drawn >= max_tokens:
            return max(max_tokens, 1), True
        return drawn, False

    def submit(
        self, rid: str, prompt_tokens: int, max_tokens: int | None, ignore_eos: bool
    ) -> SimRequest:
        """Queue a request; await ``request.done`` for its completion.

        Args:
            rid: request id.
            prompt_tokens: input length.
            max_tokens: the request's bound on output tokens.
            ignore_eos: generate exactly max_tokens.

        Returns:
            The queued request.

        Raises:
            DrainingError: when the server is shutting down.
        """
        if self.draining:
            raise DrainingError("server is shutting down")
        target, capped = self.sample_output_tokens(max_tokens, ignore_eos)
        loop = asyncio.get_running_loop()
        req = SimRequest(rid, prompt_tokens, target, capped, loop.create_future())
        self.waiting.append(req)
        self._idle.clear()
        self._wake.set()
        return req

    # --- state the HTTP layer reads ---------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Requests running or queued."""
        return len(self.running) + len(self.waiting)

    def used_tokens(self) -> int:
        """KV tokens held by running requests."""
        return sum(r.prompt_tokens + int(r.generated) for r in self.running)

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
        if not self.running:
            return 0.0
        cap = max(self.plan.max_running_requests, 1)
        return min(99.0, 45.0 + 54.0 * len(self.running) / cap)

    async def wait_idle(self) -> None:
        """Wait until nothing is running or queued."""
        await self._idle.wait()

    async def wait_changed(self) -> None:
        """Wait until the batch size changes (for the telemetry publisher)."""
        self._changed.clear()
        await self._changed.wait()

    # --- the loop ---------------------------------------------------------------------------

    def _admit(self) -> None:
        cap = self.plan.max_running_requests
        new: list[SimRequest] = []
        while self.waiting and len(self.running) < cap:
            req = self.waiting.popleft()
            req.first_token_at = time.monotonic()
            self.running.append(req)
            new.append(req)
        if not new:
            return
        tokens = sum(r.prompt_tokens for r in new)
        self.prompt_tokens_total += tokens
        self._changed.set()
        self.emit(
            logfmt.prefill_line(
                self.plan,
                new_seq=len(new),
                new_token=tokens,
                cached_token=0,
                token_usage=self.token_usage(),
                mamba_usage=self.mamba_usage(),
                running=len(self.running) - len(new),
                queued=len(self.waiting),
                input_throughput=tokens
                * self.speed
                / (0.005 + tokens / self.model.prefill_tokens_per_s),
            )
        )

    def _finish(self, now: float) -> None:
        still: list[SimRequest] = []
        for req in self.running:
            if req.generated >= req.target_tokens:
                self.requests_total += 1
                if not req.done.done():
                    req.done.set_result(None)
            else:
                still.append(req)
        if len(still) != len(self.running):
            self.running = still
            self._changed.set()
            if not still and not self.waiting:
                self._idle.set()

    def _log_decode(self, now: float) -> None:
        elapsed = max(now - self._log_at, 1e-9)
        self.last_gen_throughput = self._log_tokens / elapsed
        self._log_tokens = 0.0
        self._log_at = now
        self.emit(
            logfmt.decode_line(
                self.plan,
                running=len(self.running),
                tokens=self.used_tokens(),
                token_usage=self.token_usage(),
                mamba_num=self.mamba_num(),
                mamba_usage=self.mamba_usage(),
                accept_len=self.accept + self.rng.uniform(-0.08, 0.08)
                if self.plan.speculative
                else 1.0,
                gen_throughput=self.last_gen_throughput,
                queued=len(self.waiting),
            )
        )

    def _advance(self, budget: float, now: float) -> float:
        """Run every whole decode step that fits in ``budget`` wall seconds; return the rest.

        A late wake-up catches up several log intervals at once: each step is stamped at the
        time it would have run (``now - budget`` onwards), so a decode line's throughput is
        tokens over the interval's own duration, never over the microseconds between two
        lines written in one catch-up (which once printed 1.9e12 tok/s).
        """
        clock = now - budget
        while self.running:
            step = step_seconds(self.model, len(self.running), self.speed)
            fit = int(budget // step)
            if fit <= 0:
                break
            to_finish = min(
                math.ceil((r.target_tokens - r.generated) / self.accept) for r in self.running
            )
            to_log = self.interval - self.steps % self.interval
            k = max(1, min(fit, to_finish, to_log))
            gained = k * self.accept
            for req in self.running:
                req.generated += gained
            produced = gained * len(self.running)
            self.generation_tokens_total += int(produced)
            self._log_tokens += produced
            self.steps += k
            budget -= k * step
            clock += k * step
            if self.steps % self.interval == 0:
                self._log_decode(clock)
            self._finish(clock)
            self._admit()
        return budget if self.running else 0.0

    def _next_sleep(self) -> float:
        step = step_seconds(self.model, len(self.running), self.speed)
        to_finish = min(
            math.ceil((r.target_tokens - r.generated) / self.accept) for r in self.running
        )
        return min(TICK_S, max(MIN_SLEEP_S, to_finish * step))

    async def run(self) -> None:
        """Serve forever (cancel the task to stop)."""
        carry = 0.0
        last = time.monotonic()
        while True:
            if not self.running and not self.waiting:
                self._wake.clear()
                await self._wake.wait()
                last = time.monotonic()
                carry = 0.0
            self._admit()
            await asyncio.sleep(self._next_sleep())
            now = time.monotonic()
            carry = self._advance(carry + now - last, now)
            last = now
