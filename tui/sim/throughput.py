"""The simulator's throughput model, as a pure function tests and the canary compare against.

Model (one server, decode-bound, continuous batching)::

    step_time(b)   = (t0 + t1 * b) / speed          # one forward (target verify + draft) for b reqs
    tokens/step    = b * A                          # A = speculative accept length (1 without spec)
    output tok/s   = b * A / step_time(b)           # rises with b, flattens towards A * speed / t1
    requests/s     = output tok/s / mean output length

``t0`` (fixed cost per step: weights read, kernel launches) and ``t1`` (per-request cost: state and
KV reads) come from the ModelSpec. For qwen3.6-27b on a B200, t0 = 16 ms, t1 = 0.55 ms, A = 3.0:
16 running -> 24.8 ms per step, ~1,935 tok/s, ~0.87 req/s at a 2,220-token mean output; that is the
seed's baseline (≈13,500 tok/s and ≈6.1 req/s over 7 GPUs). 40 running -> ~3,160 tok/s (x1.63 for
x2.5 concurrency), 64 -> ~3,750: more concurrency helps with diminishing returns. The scheduler
charges prefill at the model's prefill rate (decode pauses meanwhile), which this model leaves
out: prompts are short next to ~2,200-token outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.sglang.models import ModelSpec
from tui.sglang.plan_types import MemoryPlan

DEFAULT_MEAN_OUTPUT_TOKENS = 2220
"""Mean output length when a request does not bound it (seed: 13,500 tok/s / 6.1 req/s)."""


@dataclass(frozen=True, slots=True)
class RateEstimate:
    """Steady-state rates of one server at a fixed number of running requests."""

    running: int
    """Requests decoding together."""
    step_s: float
    """Wall seconds per decode step."""
    output_tokens_per_s: float
    """Generated tokens per wall second."""
    requests_per_s: float
    """Completed requests per wall second at the given mean output length."""


def accept_length(model: ModelSpec, plan: MemoryPlan) -> float:
    """Tokens each request gains per step: the model's accept length with spec, else 1."""
    return model.accept_length if plan.speculative else 1.0


def step_seconds(model: ModelSpec, running: int, speed: float = 1.0) -> float:
    """Wall time of one decode step with ``running`` requests.

    Args:
        model: the model (its t0 and t1).
        running: batch size (>= 1).
        speed: the simulator's ``--sim-speed``.

    Returns:
        Seconds.
    """
    return (model.decode_base_s + model.decode_per_req_s * max(running, 1)) / speed


def expected_rate(
    plan: MemoryPlan,
    model: ModelSpec,
    running: int | None = None,
    speed: float = 1.0,
    mean_output_tokens: float = DEFAULT_MEAN_OUTPUT_TOKENS,
) -> RateEstimate:
    """Steady-state throughput of one simulated server.

    Args:
        plan: the server's memory plan (its effective max_running_requests and spec setting).
        model: the served model.
        running: requests decoding together (default: the effective cap, i.e. a full queue).
        speed: ``--sim-speed``.
        mean_output_tokens: mean generated tokens per request.

    Returns:
        The estimate.
    """
    b = plan.max_running_requests if running is None else min(running, plan.max_running_requests)
    b = max(b, 1)
    step = step_seconds(model, b, speed)
    tokens = b * accept_length(model, plan) / step
    return RateEstimate(b, step, tokens, tokens / mean_output_tokens)
