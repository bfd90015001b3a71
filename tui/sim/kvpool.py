"""SGLang 0.5.23's KV-pool rules for the simulated scheduler: admission, retraction, token ratio.

The scheduler admits a request only when the KV pool can hold what it may still need, and a
decode step that does not fit retracts running requests back to the queue. Each rule below is
read from SGLang 0.5.23 (``srt/`` paths):

- **Admission** (``managers/schedule_policy.py`` ``PrefillAdder``): every running request
  reserves ``min(max_new_tokens - len(output_ids), CLIP) * new_token_ratio`` tokens
  (``_get_running_request_total_token_offset``; ratio 1 with ``ignore_eos``); a new request
  costs its prompt plus ``min(max_new_tokens - len(output_ids), CLIP)`` in full
  (``add_one_req``) and is taken only while that cost is below ``rem_total_tokens``, the free
  tokens minus every reservation (``mem_cache/prefill_budget.py`` ``remaining_total``,
  ``check_prefill``: ``total_tokens < self.remaining_total``); each admitted one then reserves
  its full cost for the rest of the batch (``PrefillBudget.reserve``).
- **The ratio** (``managers/scheduler_components/new_token_ratio_tracker.py``): it starts at
  ``SGLANG_INIT_NEW_TOKEN_RATIO`` (0.7, ``environ.py``) times ``schedule_conservativeness``
  (1.0), falls by ``(init - min) / SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS`` (600) on every decode
  step that does not retract, down to ``init * SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR`` (0.14), so a
  long calm run admits more and more on the bet that requests stop early.
- **Retraction** (``managers/scheduler.py`` ``update_running_batch``,
  ``managers/schedule_batch.py`` ``check_decode_mem`` / ``retract_decode``): when the next
  decode step's tokens do not fit, requests are retracted, fewest generated tokens first
  (ties: longest prompt first; ``_get_decode_retraction_order``), at least one and until the
  step fits, never the last one; their KV is freed, they go back to the queue and are
  prefilled again, prompt and generated tokens alike (the recomputation is the lost work), and
  the ratio jumps to ``(sum(len(output_ids)) + SGLANG_RETRACT_DECODE_STEPS * n) /
  (sum(max_new_tokens) + 1)`` over the requests kept (``estimate_new_token_ratio_after_retract``,
  at most 1). The WARNING: ``KV cache pool is full. Retract requests. #retracted_reqs: N,
  #new_tokens_gained: T[, #mamba_num_gained: M], #new_token_ratio: a -> b``.
- **Bounds** (``managers/scheduler.py``, ``managers/tp_worker.py``): ``max_new_tokens`` is
  clamped to ``max_req_len - input_len - 1`` with ``max_req_len = min(context_len - 1,
  max_total_num_tokens - 1)``, so one request always fits an empty pool.

Simplifications: one decode step allocates ``num_draft_tokens`` per request with speculative
decoding (``mem_cache/allocation_sizing.py`` ``get_alloc_len_per_decode``: ``max(topk * steps,
draft tokens)``, which is the draft tokens with topk 1), 1 without; pages are 1 token (the
seed's page size); no radix cache (the job's prompts share nothing worth caching).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from tui.sglang.plan_types import MemoryPlan

INIT_NEW_TOKEN_RATIO = 0.7
"""``SGLANG_INIT_NEW_TOKEN_RATIO`` (``srt/environ.py``), times ``schedule_conservativeness`` 1.0."""
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
"""``SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR``: the floor is ``init * 0.14``."""
NEW_TOKEN_RATIO_DECAY_STEPS = 600
"""``SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS``: decode steps from the initial ratio to the floor."""
RETRACT_DECODE_STEPS = 20
"""``SGLANG_RETRACT_DECODE_STEPS``: tokens per kept request the post-retraction ratio adds."""
CLIP_MAX_NEW_TOKENS = 4096
"""``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION``: the most of a request's max_new_tokens reserved."""

MIN_NEW_TOKEN_RATIO = INIT_NEW_TOKEN_RATIO * MIN_NEW_TOKEN_RATIO_FACTOR
"""The ratio's floor."""
NEW_TOKEN_RATIO_DECAY = (INIT_NEW_TOKEN_RATIO - MIN_NEW_TOKEN_RATIO) / NEW_TOKEN_RATIO_DECAY_STEPS
"""What one decode step without retraction takes off the ratio."""


class KvRequest(Protocol):
    """What the rules read of a request (``tui.sim.requests.SimRequest`` has it)."""

    prompt_tokens: int
    generated: float
    max_new: int
    ignore_eos: bool


Req = TypeVar("Req", bound=KvRequest)


@dataclass(slots=True)
class NewTokenRatio:
    """SGLang's ``NewTokenRatioTracker`` (mutable: the scheduler moves it every step)."""

    current: float = INIT_NEW_TOKEN_RATIO
    """The ratio admission reserves running requests' remaining tokens at."""

    def decay(self, steps: int = 1) -> None:
        """``decay_step`` once per decode step that did not retract."""
        self.current = max(self.current - NEW_TOKEN_RATIO_DECAY * steps, MIN_NEW_TOKEN_RATIO)

    def reset(self) -> None:
        """Back to the initial ratio (SGLang resets it when the scheduler goes idle)."""
        self.current = INIT_NEW_TOKEN_RATIO


def max_new_tokens(plan: MemoryPlan, prompt_tokens: int, requested: int | None) -> int:
    """A request's ``max_new_tokens`` after SGLang's clamp to the pool and the context.

    Args:
        plan: The server's plan (context length, KV pool tokens).
        prompt_tokens: Input length.
        requested: The request's max tokens (None: up to the context length).

    Returns:
        The bound (>= 0).
    """
    max_req_len = plan.context_len - 1
    if plan.max_total_num_tokens > 0:
        max_req_len = min(max_req_len, plan.max_total_num_tokens - 1)
    bound = max_req_len - prompt_tokens - 1
    return max(0, bound if requested is None else min(requested, bound))


def held_tokens(req: KvRequest) -> int:
    """KV tokens a running request holds: its prompt and what it generated."""
    return req.prompt_tokens + int(req.generated)


def _left(req: KvRequest) -> int:
    return min(max(req.max_new - int(req.generated), 0), CLIP_MAX_NEW_TOKENS)


def reserved_tokens(req: KvRequest, ratio: float) -> float:
    """What a running request reserves for its future tokens (``_get_running_request_total_
    token_offset``)."""
    return _left(req) * (1.0 if req.ignore_eos else ratio)


def admission_cost(req: KvRequest, prefill_tokens: int) -> int:
    """What admitting a waiting request costs the budget (``add_one_req``'s total_tokens)."""
    return prefill_tokens + _left(req)


def remaining_total(pool: int, held: int, running: Sequence[KvRequest], ratio: float) -> float:
    """``rem_total_tokens``: free tokens less every running request's reservation.

    Args:
        pool: ``max_total_num_tokens``.
        held: Tokens held now (running and prefilling requests).
        running: Requests that reserve future tokens.
        ratio: The current new-token ratio.

    Returns:
        Tokens (may be negative).
    """
    return pool - held - sum(reserved_tokens(r, ratio) for r in running)


def decode_tokens_per_request(plan: MemoryPlan) -> int:
    """KV tokens one request allocates in one decode step."""
    return plan.num_draft_tokens if plan.speculative else 1


def decode_fits(plan: MemoryPlan, free: int, running: int) -> bool:
    """``check_decode_mem``: whether ``running`` requests' next decode step fits in ``free``."""
    return free >= running * decode_tokens_per_request(plan)


def decode_steps_that_fit(plan: MemoryPlan, free: int, running: int, accept: float) -> int:
    """Decode steps that can run before the pool must be checked again (at least 1).

    Args:
        plan: The server's plan.
        free: Free KV tokens now (the next step is known to fit).
        running: Requests decoding.
        accept: Tokens each request gains per step.

    Returns:
        Steps; each one's allocation still finds its tokens free.
    """
    spare = free - running * decode_tokens_per_request(plan)
    return max(int(spare // max(running * accept, 1e-9)) + 1, 1)


def retraction_victims(
    plan: MemoryPlan, running: Sequence[Req], free: int, count: int | None = None
) -> list[Req]:
    """``retract_decode``: the requests to send back to the queue, in retraction order.

    Args:
        plan: The server's plan (tokens per decode step).
        running: The decoding requests.
        free: Free KV tokens now.
        count: Retract exactly this many (a test's fault) instead of until the step fits.

    Returns:
        The victims (never every request: the last one is kept).
    """
    keep = sorted(running, key=lambda r: (int(r.generated), -r.prompt_tokens), reverse=True)
    victims: list[Req] = []
    while len(keep) > 1:
        if count is not None and len(victims) >= count:
            break
        if count is None and victims and decode_fits(plan, free, len(keep)):
            break
        victim = keep.pop()
        free += held_tokens(victim)
        victims.append(victim)
    return victims


def ratio_after_retract(kept: Sequence[KvRequest]) -> float:
    """``estimate_new_token_ratio_after_retract`` over the requests kept."""
    decoded = sum(int(r.generated) for r in kept)
    budget = sum(r.max_new for r in kept)
    return min(1.0, (decoded + RETRACT_DECODE_STEPS * len(kept)) / (budget + 1))
