"""One request inside the simulated scheduler, how long its output will be, and which requests a
prefill batch takes (SGLang's chunked prefill: up to ``chunked_prefill_size`` tokens a batch)."""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from tui.sglang.plan_types import MemoryPlan
from tui.sim.kvpool import admission_cost, max_new_tokens
from tui.sim.throughput import DEFAULT_MEAN_OUTPUT_TOKENS

HEALTH_CHECK_RID_PREFIX = "HEALTH_CHECK"
"""SGLang's rid prefix of ``/health`` probes (``srt/entrypoints/http_server.py``)."""


@dataclass(eq=False)
class SimRequest:
    """One request inside the scheduler (mutable: it is prefilled, then decodes)."""

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
    log_metrics: bool = True
    """False for health probes (SGLang's ``log_metrics=False``: not in the token counters)."""
    created: float = field(default_factory=time.monotonic)
    """Submission time (wall, monotonic)."""
    prefilled: int = 0
    """Prompt tokens prefilled so far (a long prompt is prefilled in chunks)."""
    generated: float = 0.0
    """Tokens generated so far (fractional: accept length is a mean)."""
    first_token_at: float | None = None
    """When decoding started."""
    max_new: int = 0
    """``max_new_tokens`` after SGLang's clamp (what admission reserves, ``tui.sim.kvpool``)."""
    ignore_eos: bool = False
    """Generates exactly its max tokens (admission reserves them at ratio 1)."""

    @property
    def is_health_check(self) -> bool:
        """A ``/health`` probe's one-token generation."""
        return self.rid.startswith(HEALTH_CHECK_RID_PREFIX)

    @property
    def prefill_left(self) -> int:
        """Prompt tokens (and, after a retraction, generated ones) still to prefill."""
        return max(self.prompt_tokens + int(self.generated) - self.prefilled, 0)


def sample_output_tokens(
    rng: random.Random, max_tokens: int | None, ignore_eos: bool
) -> tuple[int, bool]:
    """Output length: exactly ``max_tokens`` with ignore_eos, else a lognormal draw it caps.

    Args:
        rng: the scheduler's random source.
        max_tokens: the request's bound, or None.
        ignore_eos: generate exactly ``max_tokens``.

    Returns:
        (tokens, hit_the_bound).
    """
    if ignore_eos and max_tokens is not None:
        return max_tokens, True
    sigma = 0.5
    mu = math.log(DEFAULT_MEAN_OUTPUT_TOKENS) - sigma * sigma / 2
    drawn = max(16, int(rng.lognormvariate(mu, sigma)))
    if max_tokens is not None and drawn >= max_tokens:
        return max(max_tokens, 1), True
    return drawn, False


def new_request(
    plan: MemoryPlan,
    rng: random.Random,
    rid: str,
    prompt_tokens: int,
    max_tokens: int | None,
    ignore_eos: bool,
    loop: asyncio.AbstractEventLoop,
) -> SimRequest:
    """A request with its ``max_new_tokens`` clamped as SGLang does (``tui.sim.kvpool``) and
    its output length drawn within it.

    Args:
        plan: the server's plan (context length, KV pool).
        rng: the scheduler's random source.
        rid: request id.
        prompt_tokens: input length.
        max_tokens: the request's bound on output tokens.
        ignore_eos: generate exactly max_tokens.
        loop: the loop its ``done`` future belongs to (the throughput model's is never run).

    Returns:
        The request, not queued.
    """
    max_new = max_new_tokens(plan, prompt_tokens, max_tokens)
    target, capped = sample_output_tokens(rng, max_new, ignore_eos)
    req = SimRequest(rid, prompt_tokens, target, capped, loop.create_future())
    req.max_new, req.ignore_eos = max_new, ignore_eos
    return req


Batch = list[tuple[SimRequest, int]]
"""A prefill batch: each request with the prompt tokens it prefills in this batch."""


def next_batch(
    prefilling: SimRequest | None,
    waiting: Iterable[SimRequest],
    room: int,
    chunk: int,
    kv_room: float | None = None,
) -> Batch:
    """The next prefill batch: the chunked request first, then waiting ones while a running slot
    is free, up to ``chunk`` tokens (the last one taken may be cut: it is chunked), and while the
    KV pool can hold each one's admission cost (``tui.sim.kvpool``).

    Args:
        prefilling: the request whose prompt a previous batch began, if any.
        waiting: the queue, in order.
        room: running slots free (the chunked request holds one already).
        chunk: ``chunked_prefill_size``.
        kv_room: ``rem_total_tokens`` (None: the pool is not modelled).

    Returns:
        (request, tokens) pairs; empty when no prefill is due.
    """
    budget = chunk
    batch: Batch = []
    if prefilling is not None:
        take = min(prefilling.prefill_left, budget)
        batch.append((prefilling, take))
        budget -= take
    for req in waiting:
        if budget <= 0 or room <= 0:
            break
        if kv_room is not None:
            # SGLang stops the batch at the first request the pool cannot hold (NO_TOKEN).
            cost = admission_cost(req, req.prefill_left)
            if cost >= kv_room:
                break
            kv_room -= cost
        take = min(req.prefill_left, budget)
        batch.append((req, take))
        budget -= take
        room -= 1
    return batch
