"""The throughput model where the KV pool binds: the simulator's own scheduler, on virtual time.

When every running request can hold its whole reservation (``max_running_requests`` times the
prompt plus ``max_new_tokens``) the pool never refuses or retracts and the closed form of
``tui.sim.throughput`` is exact. Otherwise the rate depends on how often the pool retracts,
which follows SGLang's feedback loop (the ratio decays while calm, admits more, the pool fills,
decode retracts, the ratio jumps; ``tui.sim.kvpool``) and has no closed form. So the model runs
the very scheduler the simulated server runs (``tui.sim.scheduler.SimScheduler.advance``), with
a queue kept full of the job's requests, on virtual time (no sleeping, no event loop running):
the bench's grid, the tests and the servers cannot drift apart, because they are one code.

The run is deterministic (a fixed seed for the output lengths): warm-up for ``WARM_LIVES``
request lifetimes (the ratio's cycle settles), then decode tokens over ``MEASURE_LIVES``
lifetimes. A few hundred milliseconds of CPU per distinct server shape, cached.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from tui.sglang.models import ModelSpec
from tui.sglang.plan_types import MemoryPlan
from tui.sim import kvpool

WARM_LIVES = 4.0
"""Request lifetimes run before measuring."""
MEASURE_LIVES = 12.0
"""Request lifetimes measured."""
STEPS_PER_LIFE = 40
"""Virtual-time slices per lifetime (the queue is topped up between slices)."""
SEED = 17
"""Output lengths' seed: the model is a fixed function of the plan."""


@dataclass(frozen=True, slots=True)
class Workload:
    """The job's requests as the model assumes them (the bench's pipeline sends these)."""

    prompt_tokens: int = 8
    """Input length (the job's prompts are a few words; outputs dominate the KV)."""
    max_tokens: int | None = 3000
    """The request's max tokens (the pipeline's ``--max-tokens``)."""
    ignore_eos: bool = False
    """Generate exactly max_tokens."""


JOB = Workload()
"""The seed job's requests."""


@dataclass(frozen=True, slots=True)
class SteadyRun:
    """What one virtual-time run measured (speed 1)."""

    output_tokens_per_s: float
    """Decode tokens per second over the measured window."""
    running: float
    """Mean requests decoding together (sampled each slice)."""
    retracted: int
    """Requests retracted in the measured window."""
    completed: int
    """Requests completed in the measured window."""


def kv_binds(plan: MemoryPlan, workload: Workload = JOB) -> bool:
    """Whether the KV pool can refuse or retract at full concurrency (else the closed form).

    Args:
        plan: The server's plan.
        workload: The requests.

    Returns:
        True when the running cap times one request's whole reservation (prompt, clipped
        ``max_new_tokens`` and one decode step) reaches the pool.
    """
    pool = plan.max_total_num_tokens
    if pool <= 0:
        return False
    new = kvpool.max_new_tokens(plan, workload.prompt_tokens, workload.max_tokens)
    per = workload.prompt_tokens + min(new, kvpool.CLIP_MAX_NEW_TOKENS)
    per += kvpool.decode_tokens_per_request(plan)
    return plan.max_running_requests * per >= pool


_CACHE: dict[tuple[object, ...], SteadyRun] = {}


def _key(plan: MemoryPlan, model: ModelSpec, workload: Workload) -> tuple[object, ...]:
    shape = (
        plan.max_running_requests,
        plan.max_total_num_tokens,
        plan.speculative,
        plan.num_draft_tokens,
        plan.cuda_graph_max_bs,
        plan.chunked_prefill_size,
        plan.context_len,
    )
    return (shape, model, workload)


def steady_run(plan: MemoryPlan, model: ModelSpec, workload: Workload = JOB) -> SteadyRun:
    """Run the simulator's scheduler with a full queue on virtual time (speed 1).

    Args:
        plan: The server's plan.
        model: The served model.
        workload: The requests.

    Returns:
        The measured run (cached per server shape).
    """
    key = _key(plan, model, workload)
    if key not in _CACHE:
        _CACHE[key] = _run(plan, model, workload)
    return _CACHE[key]


def _run(plan: MemoryPlan, model: ModelSpec, workload: Workload) -> SteadyRun:
    # The scheduler imports the closed form of tui.sim.throughput, which imports this module.
    from tui.sim.requests import new_request
    from tui.sim.scheduler import SimScheduler
    from tui.sim.throughput import DEFAULT_MEAN_OUTPUT_TOKENS, accept_length, step_seconds

    loop = asyncio.new_event_loop()  # owns the requests' futures; never run
    try:
        sch = SimScheduler(
            plan, model, speed=1.0, decode_log_interval=1 << 30, emit=_drop, seed=SEED
        )
        cap = max(plan.max_running_requests, 1)
        mean = min(DEFAULT_MEAN_OUTPUT_TOKENS, workload.max_tokens or DEFAULT_MEAN_OUTPUT_TOKENS)
        life = mean / accept_length(model, plan) * step_seconds(model, cap, 1.0, plan)
        dt = life / STEPS_PER_LIFE
        warm, end = WARM_LIVES * life, (WARM_LIVES + MEASURE_LIVES) * life
        clock, carry, serial = 0.0, 0.0, 0
        tokens0 = retracted0 = completed0 = 0.0
        running_sum, samples = 0.0, 0
        measuring = False
        while clock < end:
            while len(sch.waiting) < cap:
                serial += 1
                sch.waiting.append(
                    new_request(
                        plan,
                        sch.rng,
                        f"model-{serial}",
                        workload.prompt_tokens,
                        workload.max_tokens,
                        workload.ignore_eos,
                        loop,
                    )
                )
            if not measuring and clock >= warm:
                measuring = True
                tokens0 = sch.realtime_tokens["decode"]
                retracted0, completed0 = sch.retracted_total, sch.requests_total
            clock += dt
            carry = sch.advance(carry + dt, clock)
            if measuring:
                running_sum += len(sch.running)
                samples += 1
        seconds = end - warm
        return SteadyRun(
            (sch.realtime_tokens["decode"] - tokens0) / seconds,
            running_sum / max(samples, 1),
            int(sch.retracted_total - retracted0),
            int(sch.requests_total - completed0),
        )
    finally:
        loop.close()


def _drop(_message: str) -> None:
    """The model's runs print nothing."""
